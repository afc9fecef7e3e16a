// Small numeric ops written once over every backend as free functions, with torch's meaning:
// lerp, fmod, isfinite, nan_to_num, count_nonzero, diff, dot, logcumsumexp, kthvalue,
// linspace, and functional::normalize. Compositions of elementwise ops, reductions, scans,
// sort and slices, so the CPU, Vulkan, Autodiff and Fusion run (and differentiate) them with
// no kernel of their own.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace kiln {

// start + weight (end - start) (torch.lerp), weight a number or a tensor of the same shape.
template <class B, std::size_t D>
Tensor<B, D> lerp(const Tensor<B, D>& start, const Tensor<B, D>& end, double weight) {
  return start + (end - start) * weight;
}
template <class B, std::size_t D>
Tensor<B, D> lerp(const Tensor<B, D>& start, const Tensor<B, D>& end, const Tensor<B, D>& weight) {
  return start + (end - start) * weight;
}

// The remainder with the sign of the dividend, a - trunc(a / b) b (torch.fmod; Tensor::rem
// is torch.remainder, with the divisor's sign).
template <class B, std::size_t D> Tensor<B, D> fmod(const Tensor<B, D>& a, double b) {
  return a - (a / b).trunc() * b;
}
template <class B, std::size_t D> Tensor<B, D> fmod(const Tensor<B, D>& a, const Tensor<B, D>& b) {
  return a - (a / b).trunc() * b;
}

// True where x is neither infinite nor NaN (torch.isfinite); every integer is.
template <class B, std::size_t D, class K> Tensor<B, D, Bool> isfinite(const Tensor<B, D, K>& x) {
  if constexpr (std::same_as<K, Float>) return x.isnan().logical_or(x.isinf()).logical_not();
  else return x.ones_like().to_bool();
}

// NaN, +inf and -inf replaced (torch.nan_to_num): by nan, and by posinf / neginf, which
// default to the dtype's largest and lowest finite values. The gradient passes where x is kept.
template <class B, std::size_t D>
Tensor<B, D> nan_to_num(const Tensor<B, D>& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                        std::optional<double> neginf = std::nullopt) {
  const double largest = x.dtype() == DType::f64   ? std::numeric_limits<double>::max()
                         : x.dtype() == DType::f16 ? 65504.0
                         : x.dtype() == DType::bf16 ? 3.3895313892515355e38
                                                    : static_cast<double>(std::numeric_limits<float>::max());
  const auto inf = x.isinf();
  return x.mask_fill(x.isnan(), nan)
      .mask_fill(inf.logical_and(x.gt(0.0)), posinf.value_or(largest))
      .mask_fill(inf.logical_and(x.lt(0.0)), neginf.value_or(-largest));
}

// The number of non-zero elements (torch.count_nonzero): of all of x as [1], or along `dim`
// (kept with size 1, as Kiln's reductions do); Int (i64).
namespace detail {
// 1 where x is not zero (or is true), 0 elsewhere, as Int.
template <class B, std::size_t D, class K> Tensor<B, D, Int> nonzero_ones(const Tensor<B, D, K>& x) {
  if constexpr (std::same_as<K, Bool>) return x.to_int();
  else return x.ne(0.0).to_int();
}
}  // namespace detail
template <class B, std::size_t D, class K> Tensor<B, 1, Int> count_nonzero(const Tensor<B, D, K>& x) {
  return detail::nonzero_ones(x).sum();
}
template <class B, std::size_t D, class K>
Tensor<B, D, Int> count_nonzero(const Tensor<B, D, K>& x, std::int64_t dim) {
  return detail::nonzero_ones(x).sum_dim(dim);
}

// The n-th forward difference along dim (torch.diff, without prepend / append): each pass
// x[1:] - x[:-1], so the dim shrinks by n (to at least 0).
template <class B, std::size_t D, class K>
  requires Numeric<K>
Tensor<B, D, K> diff(const Tensor<B, D, K>& x, std::int64_t n = 1, std::int64_t dim = -1) {
  KILN_CHECK(n >= 0, "diff: n must be >= 0, got {}", n);
  const std::size_t d = normalize_dim("diff", dim, D);
  const auto signed_dim = static_cast<std::int64_t>(d);
  Tensor<B, D, K> out = x;
  for (std::int64_t pass = 0; pass < n; ++pass) {
    const std::int64_t size = out.dim(d);
    if (size == 0) break;
    out = out.narrow(signed_dim, 1, size - 1) - out.narrow(signed_dim, 0, size - 1);
  }
  return out;
}

// The dot product of two 1-d tensors of one length, as [1] (torch.dot).
template <class B, class K> Tensor<B, 1, K> dot(const Tensor<B, 1, K>& a, const Tensor<B, 1, K>& b) {
  KILN_CHECK(a.shape() == b.shape(), "dot: the vectors have shapes {} and {}, not one length", a.shape(), b.shape());
  return (a * b).sum();
}

// log(cumsum(exp(x))) along dim (torch.logcumsumexp), shifted by the slice's maximum so that
// large values do not overflow; a slice of -inf stays -inf.
template <class B, std::size_t D> Tensor<B, D> logcumsumexp(const Tensor<B, D>& x, std::int64_t dim) {
  const auto m = x.max_dim(dim);
  const auto shift = m.mask_fill(m.isinf(), 0.0);
  return (x - shift).exp().cumsum(dim).log() + shift;
}

// The k-th smallest value along dim (1-based, torch.kthvalue) and its index, the dim kept
// with size 1.
template <class B, std::size_t D, class K>
std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> kthvalue(const Tensor<B, D, K>& x, std::int64_t k, std::int64_t dim = -1) {
  const std::size_t d = normalize_dim("kthvalue", dim, D);
  KILN_CHECK(k >= 1 && k <= x.dim(d), "kthvalue: k = {} is outside [1, {}] for dim {} of shape {}", k, x.dim(d), d,
             x.shape());
  const auto [sorted, order] = x.sort_with_indices(static_cast<std::int64_t>(d));
  return {sorted.narrow(static_cast<std::int64_t>(d), k - 1, 1), order.narrow(static_cast<std::int64_t>(d), k - 1, 1)};
}

// `steps` values from start to end, evenly spaced, both ends included (torch.linspace; the
// second half counted back from end, as torch does, so that end comes out exactly; torch's
// vectorized loop may differ from these in the last bit).
template <class B>
Tensor<B, 1> linspace(double start, double end, std::int64_t steps, const typename B::Device& device = {},
                      DType dtype = DType::f32) {
  KILN_CHECK(steps >= 0, "linspace: steps must be >= 0, got {}", steps);
  std::vector<double> values(static_cast<std::size_t>(steps));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  for (std::int64_t i = 0; i < steps; ++i)
    values[static_cast<std::size_t>(i)] = steps == 1 || i < steps / 2 ? start + step * static_cast<double>(i)
                                                                      : end - step * static_cast<double>(steps - 1 - i);
  return Tensor<B, 1>::from_data(TensorData::from(values, Shape{steps}).convert(dtype), device);
}

}  // namespace kiln

namespace kiln::functional {

// x / max(‖x‖_p, eps) along dim (torch.nn.functional.normalize, defaults p 2, dim 1, eps 1e-12).
template <class B, std::size_t D>
Tensor<B, D> normalize(const Tensor<B, D>& x, double p = 2.0, std::int64_t dim = 1, double eps = 1e-12) {
  return x / x.norm_dim(p, dim).clamp_min(eps).expand_as(x.shape());
}

}  // namespace kiln::functional
