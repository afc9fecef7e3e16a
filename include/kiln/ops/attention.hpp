// The shape rule of scaled-dot-product attention, shared by the tensor API
// (kiln/tensor/attention.hpp) and the backends' fused kernels, so that bad input gets the
// same kiln::Error whichever path runs it.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>

namespace kiln::ops {

// softmax(q kᵀ · scale, masked) v for q [N, H, L, D], k [N, H, S, D], v [N, H, S, Dv], of
// one float dtype; mask (bool, true where a query may not attend to a key) broadcasts to
// [N, H, L, S], each of its four dims either that size or 1. Returns the output's shape
// [N, H, L, Dv].
inline Shape check_attention(std::string_view op, const Shape& q, DType q_dtype, const Shape& k, DType k_dtype,
                             const Shape& v, DType v_dtype, const std::optional<Shape>& mask,
                             std::optional<DType> mask_dtype) {
  KILN_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
             "{}: q, k and v must be [N, H, L, D], [N, H, S, D] and [N, H, S, Dv], got ranks {}, {} and {} ({}, {}, {})",
             op, q.rank(), k.rank(), v.rank(), q, k, v);
  KILN_CHECK(is_float(q_dtype) && k_dtype == q_dtype && v_dtype == q_dtype,
             "{}: q, k and v must be float tensors of one dtype, got {}, {} and {}", op, q_dtype, k_dtype, v_dtype);
  KILN_CHECK(k[0] == q[0] && v[0] == q[0] && k[1] == q[1] && v[1] == q[1] && k[3] == q[3] && v[2] == k[2],
             "{}: q {}, k {} and v {} must be [N, H, L, D], [N, H, S, D] and [N, H, S, Dv]", op, q, k, v);
  if (mask) {
    const Shape scores{q[0], q[1], q[2], k[2]};
    bool broadcasts = mask->rank() == 4;
    for (std::size_t d = 0; broadcasts && d < 4; ++d) broadcasts = (*mask)[d] == scores[d] || (*mask)[d] == 1;
    KILN_CHECK(broadcasts, "{}: mask {} must broadcast to the scores' shape [N, H, L, S] = {} (each dim that size or 1)",
               op, *mask, scores);
    KILN_CHECK(mask_dtype && is_bool(*mask_dtype), "{}: mask must be a bool tensor (true: may not attend), got {}", op,
               mask_dtype ? dtype_name(*mask_dtype) : std::string_view("none"));
  }
  return Shape{q[0], q[1], q[2], v[3]};
}

// The default scale, 1 / sqrt(D), where none is given.
inline double attention_scale(const Shape& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q[3]));
}

}  // namespace kiln::ops
