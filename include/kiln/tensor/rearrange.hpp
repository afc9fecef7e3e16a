// Rearranging ops written once over every backend as free functions: movedim, squeeze of
// every size-1 dim, repeat_interleave. Each is a permute, reshape, expand or slice of the
// backend primitives, so Autodiff and Fusion run and differentiate them as they are.
// Ranks are compile-time: where torch infers the result's rank, it is a template argument.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace kiln {

// Moves dims `source[i]` to positions `destination[i]`; the other dims keep their order in
// the places left (torch.movedim). Negative dims count from the end.
template <class B, std::size_t D, class K>
Tensor<B, D, K> movedim(const Tensor<B, D, K>& x, const std::vector<std::int64_t>& source,
                        const std::vector<std::int64_t>& destination) {
  KILN_CHECK(source.size() == destination.size(), "movedim: {} source dims and {} destination dims", source.size(),
             destination.size());
  std::array<std::int64_t, D> order;
  order.fill(-1);
  std::vector<bool> moved(D, false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const std::size_t s = normalize_dim("movedim", source[i], D), d = normalize_dim("movedim", destination[i], D);
    KILN_CHECK(!moved[s], "movedim: source dim {} appears twice for shape {}", s, x.shape());
    KILN_CHECK(order[d] < 0, "movedim: destination dim {} appears twice for shape {}", d, x.shape());
    moved[s] = true;
    order[d] = static_cast<std::int64_t>(s);
  }
  std::size_t next = 0;
  for (auto& o : order) {
    if (o >= 0) continue;
    while (moved[next]) ++next;
    o = static_cast<std::int64_t>(next++);
  }
  return x.permute(order);
}
template <class B, std::size_t D, class K>
Tensor<B, D, K> movedim(const Tensor<B, D, K>& x, std::int64_t source, std::int64_t destination) {
  return movedim(x, std::vector<std::int64_t>{source}, std::vector<std::int64_t>{destination});
}

// Removes every dim of size 1 (torch.squeeze without dims): squeeze<2>(x) of a [1, 3, 1, 4]
// tensor is [3, 4]. R is the rank left; a tensor of ones only gives shape [1] (R = 1), Kiln's
// scalar. Another rank is an error naming the shape.
template <std::size_t R, class B, std::size_t D, class K> Tensor<B, R, K> squeeze(const Tensor<B, D, K>& x) {
  const Shape in = x.shape();
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < D; ++i)
    if (in[i] != 1) dims.push_back(in[i]);
  if (dims.empty() && R == 1) dims.push_back(1);
  KILN_CHECK(dims.size() == R, "squeeze: removing the size-1 dims of shape {} leaves rank {}, not {}", in,
             dims.size(), R);
  return Tensor<B, R, K>(B::reshape(x.primitive(), Shape(dims)));
}

// Repeats each element `repeats` times along dim, next to itself (torch.repeat_interleave with
// an int): [a, b] with 2 gives [a, a, b, b]. Unlike repeat, which tiles the whole tensor.
template <class B, std::size_t D, class K>
Tensor<B, D, K> repeat_interleave(const Tensor<B, D, K>& x, std::int64_t repeats, std::int64_t dim) {
  KILN_CHECK(repeats >= 0, "repeat_interleave: repeats must be non-negative, got {}", repeats);
  const std::size_t d = normalize_dim("repeat_interleave", dim, D);
  const Shape in = x.shape();
  std::vector<std::int64_t> split = in.to_vector(), tiled = in.to_vector(), out = in.to_vector();
  split.insert(split.begin() + static_cast<std::ptrdiff_t>(d) + 1, 1);
  tiled.insert(tiled.begin() + static_cast<std::ptrdiff_t>(d) + 1, repeats);
  out[d] *= repeats;
  const auto expanded = B::expand(B::reshape(x.primitive(), Shape(split)), Shape(tiled));
  return Tensor<B, D, K>(B::reshape(expanded, Shape(out)));
}
// The whole tensor flattened, each element repeated (torch.repeat_interleave without dim).
template <class B, std::size_t D, class K>
Tensor<B, 1, K> repeat_interleave(const Tensor<B, D, K>& x, std::int64_t repeats) {
  return repeat_interleave(x.template reshape<1>({-1}), repeats, 0);
}

}  // namespace kiln
