// The shape rule of matmul, checked once for every backend: [..., m, k] @ [..., k, n] with
// NumPy-broadcast batch dims (size 1 stretches, missing leading dims count as 1).
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::ops {

struct MatmulShape {
  Extents batch;  // the broadcast batch dims
  std::int64_t m = 0, k = 0, n = 0;

  Shape out() const {
    Extents dims = batch;
    dims.push_back(m);
    dims.push_back(n);
    return Shape(dims);
  }
};

inline MatmulShape matmul_shape(const Shape& a, DType a_dtype, const Shape& b, DType b_dtype) {
  KILN_CHECK(a_dtype == b_dtype, "matmul: dtypes differ: {} {} @ {} {}", a, a_dtype, b, b_dtype);
  KILN_CHECK(is_float(a_dtype), "matmul: expected float tensors, got {} {} @ {} {}", a, a_dtype, b, b_dtype);
  const std::size_t ra = a.rank(), rb = b.rank();
  KILN_CHECK(ra >= 2 && rb >= 2, "matmul: both operands need at least 2 dims, got {} @ {}", a, b);
  MatmulShape s;
  s.m = a[ra - 2];
  s.k = a[ra - 1];
  s.n = b[rb - 1];
  KILN_CHECK(s.k == b[rb - 2], "matmul: inner dims do not match: {} @ {} ({} vs {})", a, b, s.k, b[rb - 2]);
  const std::size_t nb = std::max(ra, rb) - 2;
  s.batch.resize(nb);
  for (std::size_t i = 0; i < nb; ++i) {
    const std::int64_t da = i + ra - 2 >= nb ? a[i + ra - 2 - nb] : 1;
    const std::int64_t db = i + rb - 2 >= nb ? b[i + rb - 2 - nb] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of {} and {} do not broadcast (batch dim {}: {} vs {})",
               a, b, i, da, db);
    s.batch[i] = da == 1 ? db : da;
  }
  return s;
}

// The activation that a linear layer's one kernel (kiln::provided::linear) may apply to its
// output: one whose gradient reads only the output, so that the value before it is never
// written.
enum class LinearActivation : std::uint8_t { none, relu };

// linear(x [..., in], weight [out, in], bias [out]) → [..., out], checked once for every
// backend: x of rank 1 or more, all one float dtype.
inline Shape linear_shape(const Shape& x, DType x_dtype, const Shape& weight, DType w_dtype,
                          const std::optional<Shape>& bias, std::optional<DType> b_dtype) {
  KILN_CHECK(is_float(x_dtype) && w_dtype == x_dtype, "linear: x {} {} and weight {} {} must share one float dtype",
             x, x_dtype, weight, w_dtype);
  KILN_CHECK(x.rank() >= 1 && weight.rank() == 2 && x[x.rank() - 1] == weight[1],
             "linear: x {} must be [..., in] and weight {} [out, in] with the same in", x, weight);
  if (bias) {
    KILN_CHECK(*bias == Shape({weight[0]}) && b_dtype == x_dtype, "linear: bias {} {} must be [{}] {} for weight {}",
               *bias, *b_dtype, weight[0], x_dtype, weight);
  }
  std::vector<std::int64_t> out = x.to_vector();
  out.back() = weight[0];
  return Shape(out);
}

}  // namespace kiln::ops
