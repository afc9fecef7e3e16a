// Reductions, arg-reductions, scans and sorting: the heavy ops that backends write by
// hand. Composite reductions (var, std, norm, logsumexp, any, all) are built from these
// in the tensor layer.
#pragma once

#include "kiln/core/shape.hpp"

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

// A tensor seen as [outer, n, inner] around dim: how reduction and scan kernels walk it.
struct DimSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit split_at(const Shape& shape, std::size_t dim) {
  DimSplit s;
  for (std::size_t d = 0; d < dim; ++d) s.outer *= shape[d];
  s.n = shape[dim];
  for (std::size_t d = dim + 1; d < shape.rank(); ++d) s.inner *= shape[d];
  return s;
}
// The shape of a reduction over dim: the dim kept with size 1.
inline Shape keep_dim(const Shape& shape, std::size_t dim) {
  Shape out = shape;
  out[dim] = 1;
  return out;
}

}  // namespace kiln::ops
