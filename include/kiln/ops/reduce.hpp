// Reductions, arg-reductions, scans and sorting: the heavy ops that backends write by
// hand. Composite reductions (var, std, norm, logsumexp, any, all) are built from these
// in the tensor layer.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
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

// ---- checks every backend makes before reducing, with the same words

// mean needs a float tensor; bool tensors reduce only with max/min (any/all).
inline void check_reduce_dtype(ReduceOp op, DType dtype) {
  const auto name = reduce_name(op);
  if (op == ReduceOp::mean) KILN_CHECK(is_float(dtype), "{}: expected a float tensor, got {}", name, dtype);
  if (op != ReduceOp::max && op != ReduceOp::min)
    KILN_CHECK(!is_bool(dtype), "{}: expected a float or int tensor, got {} (bool tensors reduce with max/min: any/all)",
               name, dtype);
}
// Whether reducing no elements has a value (sum 0, prod 1, mean NaN, any false, all true);
// max and min of numbers have none.
constexpr bool has_identity(ReduceOp op, DType dtype) {
  return !((op == ReduceOp::max || op == ReduceOp::min) && !is_bool(dtype));
}
inline void check_reduce_dim_extent(ReduceOp op, DType dtype, const Shape& shape, std::size_t dim) {
  const auto name = reduce_name(op);
  KILN_CHECK(has_identity(op, dtype) || shape[dim] != 0,
             "{}: cannot reduce over dim {} of size 0 in shape {} ({} of no elements is undefined)", name, dim, shape,
             name);
}
inline void check_reduce_all_extent(ReduceOp op, DType dtype, const Shape& shape) {
  const auto name = reduce_name(op);
  KILN_CHECK(has_identity(op, dtype) || shape.numel() != 0,
             "{}: cannot reduce an empty tensor of shape {} ({} of no elements is undefined)", name, shape, name);
}

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
