// Order statistics and sorted search written once over every backend as free functions:
// cummax/cummin, median, quantile, searchsorted, bucketize. They are compositions of sort,
// comparisons, reductions and gather, so every backend, Autodiff and Fusion run them; the
// values that carry a gradient are gathered at the chosen indices, so it flows to those, as
// in torch.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kiln {

namespace detail {

// The running max (or min) along dim and its index, as torch's cummax/cummin: the last index
// among ties, and once a NaN is seen the value is NaN and the index the last NaN's. That is a
// running argmax of the order (is NaN, value, index), which is associative, so it is a scan in
// log2(n) steps: at step s each position takes the winner of the s positions before it, if
// that one wins over its own.
template <class B, std::size_t D, class K>
std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> cumulative_extreme(const char* op, const Tensor<B, D, K>& x,
                                                                 std::int64_t dim, bool largest) {
  const auto d = static_cast<std::int64_t>(normalize_dim(op, dim, D));
  const std::int64_t n = x.shape()[static_cast<std::size_t>(d)];
  std::vector<std::int64_t> line(D, 1);
  line[static_cast<std::size_t>(d)] = n;
  const auto positions = Tensor<B, 1, Int>::arange(0, n, 1, x.device());
  Tensor<B, D, Int> index(B::expand(B::reshape(positions.primitive(), Shape(line)), x.shape()));
  Tensor<B, D, K> best = x;
  for (std::int64_t s = 1; s < n; s *= 2) {
    // The winner s positions back; the first s positions see themselves, and keep.
    const Tensor<B, D, K> before = cat(std::vector{best.narrow(d, 0, s), best.narrow(d, 0, n - s)}, d);
    const Tensor<B, D, Int> before_index = cat(std::vector{index.narrow(d, 0, s), index.narrow(d, 0, n - s)}, d);
    Tensor<B, D, Bool> earlier_wins = largest ? before.gt(best) : before.lt(best);
    if constexpr (std::same_as<K, Float>)
      earlier_wins = best.isnan().logical_not().logical_and(before.isnan().logical_or(earlier_wins));
    best = best.mask_where(earlier_wins, before);
    index = index.mask_where(earlier_wins, before_index);
  }
  return {x.gather(d, index), index};
}

}  // namespace detail

// {running max along dim, its index} (torch.cummax): ties take the last index; a NaN stays the
// max from where it appears. The values are gathered at the indices, so the gradient goes there.
template <class B, std::size_t D, class K>
std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> cummax(const Tensor<B, D, K>& x, std::int64_t dim) requires Numeric<K> {
  return detail::cumulative_extreme("cummax", x, dim, true);
}
// {running min along dim, its index} (torch.cummin), with cummax's rules for ties and NaN.
template <class B, std::size_t D, class K>
std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> cummin(const Tensor<B, D, K>& x, std::int64_t dim) requires Numeric<K> {
  return detail::cumulative_extreme("cummin", x, dim, false);
}

// {median along dim, its index}, the dim kept with size 1 as Kiln's reductions do (torch.median
// with keepdim=True): of an even count the lower of the two middle values, and NaN (at the
// first NaN's index) where the slice holds one.
template <class B, std::size_t D, class K>
std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> median_with_indices(const Tensor<B, D, K>& x, std::int64_t dim)
  requires Numeric<K>
{
  const auto d = static_cast<std::int64_t>(normalize_dim("median", dim, D));
  const std::int64_t n = x.shape()[static_cast<std::size_t>(d)];
  KILN_CHECK(n > 0, "median: dim {} of shape {} is empty", d, x.shape());
  const auto [sorted, order] = x.sort_with_indices(d);
  // The position in sorted order: the lower middle, or the first NaN (NaN sorts last).
  Tensor<B, D, Int> position(
      provided::full<B>(order.narrow(d, 0, 1).shape(), static_cast<double>((n - 1) / 2), DType::i64, x.device()));
  if constexpr (std::same_as<K, Float>) {
    const Tensor<B, D, Int> numbers = x.isnan().logical_not().to_int().sum_dim(d);
    position = position.mask_where(numbers.lt(static_cast<double>(n)), numbers);
  }
  const Tensor<B, D, Int> index = order.gather(d, position);
  return {x.gather(d, index), index};
}
template <class B, std::size_t D, class K> Tensor<B, D, K> median(const Tensor<B, D, K>& x, std::int64_t dim)
  requires Numeric<K>
{
  return median_with_indices(x, dim).first;
}
// The median of all elements (torch.median without dim), as Kiln's scalar: shape [1].
template <class B, std::size_t D, class K> Tensor<B, 1, K> median(const Tensor<B, D, K>& x) requires Numeric<K> {
  return median(x.template reshape<1>({-1}), 0);
}

// The q-th quantile along dim (torch.quantile, interpolation "linear"), the dim kept with
// size 1: between the sorted values at floor and ceil of q * (n - 1), linearly. NaN where the
// slice holds a NaN.
template <class B, std::size_t D> Tensor<B, D> quantile(const Tensor<B, D>& x, double q, std::int64_t dim) {
  KILN_CHECK(q >= 0.0 && q <= 1.0, "quantile: q must lie in [0, 1], got {}", q);
  const auto d = static_cast<std::int64_t>(normalize_dim("quantile", dim, D));
  const std::int64_t n = x.shape()[static_cast<std::size_t>(d)];
  KILN_CHECK(n > 0, "quantile: dim {} of shape {} is empty", d, x.shape());
  const Tensor<B, D> sorted = x.sort(d);
  const double position = q * static_cast<double>(n - 1);
  const auto below = static_cast<std::int64_t>(std::floor(position));
  const std::int64_t above = std::min(below + 1, n - 1);
  const double weight = position - static_cast<double>(below);
  const Tensor<B, D> low = sorted.narrow(d, below, 1), high = sorted.narrow(d, above, 1);
  // torch's lerp: from the nearer end, so that q at a sample gives that sample exactly.
  const Tensor<B, D> out =
      weight < 0.5 ? low.add(high.sub(low).mul(weight)) : high.sub(high.sub(low).mul(1.0 - weight));
  return out.mask_fill(x.isnan().any_dim(d), std::numeric_limits<double>::quiet_NaN());
}
// The q-th quantile of all elements (torch.quantile without dim): shape [1].
template <class B, std::size_t D> Tensor<B, 1> quantile(const Tensor<B, D>& x, double q) {
  return quantile(x.template reshape<1>({-1}), q, 0);
}

namespace detail {
// A binary search per value for the first position whose element is not before it: the
// interval [lo, hi) halves at each of floor(log2(m)) + 1 steps, all values at once.
// `probe(mid)` gives the sequence's element at each value's mid, in the values' shape.
template <class B, std::size_t D, class K, class Probe>
Tensor<B, D, Int> binary_search(const Tensor<B, D, K>& values, std::int64_t m, bool right, Probe probe) {
  Tensor<B, D, Int> lo(provided::full<B>(values.shape(), 0.0, DType::i64, values.device()));
  Tensor<B, D, Int> hi(provided::full<B>(values.shape(), static_cast<double>(m), DType::i64, values.device()));
  for (std::int64_t width = m; width > 0; width /= 2) {
    const Tensor<B, D, Int> mid = lo.add(hi).div(2.0);
    const Tensor<B, D, K> element = probe(mid.clamp_max(static_cast<double>(m - 1)));
    const Tensor<B, D, Bool> active = lo.lt(hi);
    const Tensor<B, D, Bool> after = active.logical_and(right ? element.le(values) : element.lt(values));
    lo = lo.mask_where(after, mid.add(1.0));
    hi = hi.mask_where(active.logical_and(after.logical_not()), mid);
  }
  return lo;
}
}  // namespace detail

// For each value, the index where it would go in the ascending `sorted_sequence` to keep it
// sorted (torch.searchsorted): the first such index, or the last with right = true. A 1-d
// sequence serves values of any shape; a sequence of rank D >= 2 holds one sequence per row,
// its leading dims matching the values'. A binary search of log2(m) steps for all values.
template <class B, std::size_t D, class K>
Tensor<B, D, Int> searchsorted(const Tensor<B, 1, K>& sorted_sequence, const Tensor<B, D, K>& values,
                               bool right = false)
  requires Numeric<K>
{
  const Shape shape = values.shape();
  return detail::binary_search(values, sorted_sequence.dim(0), right, [&](const Tensor<B, D, Int>& mid) {
    const Tensor<B, 1, K> picked = sorted_sequence.index_select(0, mid.template reshape<1>({-1}));
    return Tensor<B, D, K>(B::reshape(picked.primitive(), shape));
  });
}
template <class B, std::size_t D, class K>
Tensor<B, D, Int> searchsorted(const Tensor<B, D, K>& sorted_sequence, const Tensor<B, D, K>& values,
                               bool right = false)
  requires Numeric<K> && (D >= 2)
{
  const Shape s = sorted_sequence.shape(), v = values.shape();
  for (std::size_t i = 0; i + 1 < D; ++i)
    KILN_CHECK(s[i] == v[i], "searchsorted: the leading dims of the sequence {} and the values {} differ", s, v);
  return detail::binary_search(values, s[D - 1], right, [&](const Tensor<B, D, Int>& mid) {
    return sorted_sequence.gather(static_cast<std::int64_t>(D - 1), mid);
  });
}

// The bucket of each element between ascending `boundaries` (torch.bucketize): i such that
// boundaries[i-1] < x <= boundaries[i], or boundaries[i-1] <= x < boundaries[i] with right = true.
template <class B, std::size_t D, class K>
Tensor<B, D, Int> bucketize(const Tensor<B, D, K>& x, const Tensor<B, 1, K>& boundaries, bool right = false)
  requires Numeric<K>
{
  return searchsorted(boundaries, x, right);
}

}  // namespace kiln
