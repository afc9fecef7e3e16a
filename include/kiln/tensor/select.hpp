// Selection and counting written once over every backend as free functions: nonzero,
// argwhere, masked_select, unique, bincount, histc. Their output size depends on the data,
// so each reads what decides it (a mask, the values, their max) to the host; the elements
// themselves are then picked on the device with index_select and scatter_add, so
// masked_select's gradient flows as in torch.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace kiln {

namespace detail {
template <class B>
Tensor<B, 1, Int> host_indices(const std::vector<std::int64_t>& values, const typename B::Device& device) {
  std::vector<double> v(values.begin(), values.end());
  const auto n = static_cast<std::int64_t>(v.size());
  return Tensor<B, 1, Int>::from_data(TensorData::from(v, Shape{n}).convert(DType::i64), device);
}
}  // namespace detail

// The indices of the non-zero elements, one row of D coordinates each, in row-major order:
// shape [count, D] (torch.nonzero; torch.argwhere is the same). Reads the tensor to the host.
template <class B, std::size_t D, class K> Tensor<B, 2, Int> nonzero(const Tensor<B, D, K>& x) {
  const std::vector<double> values = x.template to_vec<double>();
  const Shape s = x.shape();
  std::vector<double> coords;
  std::vector<std::int64_t> index(D, 0);
  for (std::size_t flat = 0; flat < values.size(); ++flat) {
    if (values[flat] != 0.0) coords.insert(coords.end(), index.begin(), index.end());
    for (std::size_t d = D; d-- > 0;) {  // the next coordinate in row-major order
      if (++index[d] < s[d]) break;
      index[d] = 0;
    }
  }
  const auto count = static_cast<std::int64_t>(coords.size() / D);
  const Shape out{count, static_cast<std::int64_t>(D)};
  return Tensor<B, 2, Int>::from_data(TensorData::from(coords, out).convert(DType::i64), x.device());
}
template <class B, std::size_t D, class K> Tensor<B, 2, Int> argwhere(const Tensor<B, D, K>& x) { return nonzero(x); }

// The elements where `mask` (broadcast to x's shape) is true, in row-major order, as a 1-d
// tensor (torch.masked_select). Reads the mask to the host.
template <class B, std::size_t D, class K>
Tensor<B, 1, K> masked_select(const Tensor<B, D, K>& x, const Tensor<B, D, Bool>& mask) {
  const Shape s = x.shape(), m = mask.shape();
  for (std::size_t d = 0; d < D; ++d)
    KILN_CHECK(m[d] == s[d] || m[d] == 1, "masked_select: the mask of shape {} does not broadcast to shape {}", m, s);
  const std::vector<std::uint8_t> keep = mask.expand_as(s).template to_vec<std::uint8_t>();
  std::vector<std::int64_t> picked;
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) picked.push_back(static_cast<std::int64_t>(i));
  return x.template reshape<1>({-1}).index_select(0, detail::host_indices<B>(picked, x.device()));
}

// torch.unique of the flattened tensor, sorted ascending: the distinct values, and where asked
// the index of each element's value among them (inverse, x's shape) and how often each occurs.
template <class B, std::size_t D, class K> struct Unique {
  Tensor<B, 1, K> values;
  std::optional<Tensor<B, D, Int>> inverse;
  std::optional<Tensor<B, 1, Int>> counts;
};
// Reads the tensor to the host; the values are picked from the tensor on the device.
template <class B, std::size_t D, class K>
Unique<B, D, K> unique(const Tensor<B, D, K>& x, bool return_inverse = false, bool return_counts = false)
  requires Numeric<K>
{
  const std::vector<double> values = x.template to_vec<double>();
  std::vector<std::int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return values[static_cast<std::size_t>(a)] < values[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> first, counts;
  std::vector<double> inverse(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto at = static_cast<std::size_t>(order[i]);
    if (i == 0 || values[at] != values[static_cast<std::size_t>(order[i - 1])]) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    ++counts.back();
    inverse[at] = static_cast<double>(first.size() - 1);
  }
  Unique<B, D, K> out{x.template reshape<1>({-1}).index_select(0, detail::host_indices<B>(first, x.device())), {}, {}};
  if (return_inverse)
    out.inverse = Tensor<B, D, Int>::from_data(TensorData::from(inverse, x.shape()).convert(DType::i64), x.device());
  if (return_counts) out.counts = detail::host_indices<B>(counts, x.device());
  return out;
}

// How often each value 0, 1, ... occurs in a 1-d tensor of non-negative ints (torch.bincount):
// max(x) + 1 counts, at least `minlength`. Reads the max to the host.
template <class B> Tensor<B, 1, Int> bincount(const Tensor<B, 1, Int>& x, std::int64_t minlength = 0) {
  std::int64_t size = minlength;
  if (x.numel() > 0) {
    KILN_CHECK(x.min().item() >= 0, "bincount: the values must be non-negative, the smallest is {}", x.min().item());
    size = std::max(size, x.max().item() + 1);
  }
  const Tensor<B, 1, Int> zeros(provided::full<B>(Shape{size}, 0.0, DType::i64, x.device()));
  return zeros.scatter_add(0, x, x.ones_like().cast(DType::i64));
}
// With weights: the sum of the weights of each value, in the weights' dtype.
template <class B>
Tensor<B, 1> bincount(const Tensor<B, 1, Int>& x, const Tensor<B, 1>& weights, std::int64_t minlength = 0) {
  KILN_CHECK(weights.shape() == x.shape(), "bincount: weights of shape {} for values of shape {}", weights.shape(),
             x.shape());
  std::int64_t size = minlength;
  if (x.numel() > 0) {
    KILN_CHECK(x.min().item() >= 0, "bincount: the values must be non-negative, the smallest is {}", x.min().item());
    size = std::max(size, x.max().item() + 1);
  }
  const Tensor<B, 1> zeros(provided::full<B>(Shape{size}, 0.0, weights.dtype(), x.device()));
  return zeros.scatter_add(0, x, weights);
}

// A histogram of `bins` equal bins between min and max (torch.histc, defaults 100, 0, 0):
// min = max takes the data's own range (read to the host); elements outside are left out and
// max falls in the last bin. The counts have the tensor's dtype.
template <class B, std::size_t D>
Tensor<B, 1> histc(const Tensor<B, D>& x, std::int64_t bins = 100, double min = 0.0, double max = 0.0) {
  KILN_CHECK(bins > 0, "histc: bins must be positive, got {}", bins);
  KILN_CHECK(min <= max, "histc: min {} is larger than max {}", min, max);
  const Tensor<B, 1> flat = x.template reshape<1>({-1});
  if (min == max && flat.numel() > 0) {
    min = flat.min().item();
    max = flat.max().item();
  }
  if (min == max) {  // torch widens an empty range by one each way
    min -= 1.0;
    max += 1.0;
  }
  const Tensor<B, 1, Bool> inside = flat.ge(min).logical_and(flat.le(max));
  const Tensor<B, 1> position = flat.sub(min).div(max - min).mul(static_cast<double>(bins)).floor();
  const Tensor<B, 1, Int> bin = position.mask_fill(inside.logical_not(), 0.0)
                                    .clamp(0.0, static_cast<double>(bins - 1))
                                    .to_int();
  const Tensor<B, 1> zeros(provided::full<B>(Shape{bins}, 0.0, x.dtype(), x.device()));
  return zeros.scatter_add(0, bin, inside.to_float(x.dtype()));
}

}  // namespace kiln
