// Reductions, arg-reductions, scans and sorting: the heavy ops that backends write by
// hand. Composite reductions (var, std, norm, logsumexp, any, all) are built from these
// in the tensor layer.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::ops {

enum class ReduceOp : std::uint8_t { sum, prod, max, min, mean };
enum class ArgReduceOp : std::uint8_t { argmax, argmin };
enum class CumulativeOp : std::uint8_t { sum, prod };

constexpr std::string_view reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::mean: return "mean";
  }
  return "?";
}
constexpr std::string_view arg_reduce_name(ArgReduceOp op) { return op == ArgReduceOp::argmax ? "argmax" : "argmin"; }
constexpr std::string_view cumulative_name(CumulativeOp op) { return op == CumulativeOp::sum ? "cumsum" : "cumprod"; }

}  // namespace kiln::ops
