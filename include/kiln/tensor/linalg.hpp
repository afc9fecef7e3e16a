// Diagonals and products written once over every backend as free functions: diagonal, diag,
// trace, outer, cross. A diagonal is a strided slice of the two dims flattened into one, so
// every backend, Autodiff and Fusion run and differentiate these with no kernel of their own.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace kiln {

// The `offset`-th diagonal of the dims dim1 and dim2 (torch.diagonal, defaults 0, 0, 1): those
// two dims are removed and the diagonal is appended as the last dim. offset > 0 is above the
// main diagonal, offset < 0 below; a diagonal outside the matrix is empty.
template <class B, std::size_t D, class K>
Tensor<B, D - 1, K> diagonal(const Tensor<B, D, K>& x, std::int64_t offset = 0, std::int64_t dim1 = 0,
                             std::int64_t dim2 = 1)
  requires(D >= 2)
{
  const std::size_t d1 = normalize_dim("diagonal", dim1, D), d2 = normalize_dim("diagonal", dim2, D);
  KILN_CHECK(d1 != d2, "diagonal: dim1 and dim2 are both dim {} of shape {}", d1, x.shape());
  const Shape in = x.shape();
  std::array<std::int64_t, D> order;
  std::vector<std::int64_t> flat_dims;
  std::size_t j = 0;
  for (std::size_t i = 0; i < D; ++i) {
    if (i == d1 || i == d2) continue;
    order[j++] = static_cast<std::int64_t>(i);
    flat_dims.push_back(in[i]);
  }
  order[D - 2] = static_cast<std::int64_t>(d1);
  order[D - 1] = static_cast<std::int64_t>(d2);
  const std::int64_t rows = in[d1], cols = in[d2];
  const std::int64_t length =
      std::max<std::int64_t>(0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  const std::int64_t start = length == 0 ? 0 : (offset >= 0 ? offset : -offset * cols);
  flat_dims.push_back(rows * cols);
  const auto flat = B::reshape(x.permute(order).primitive(), Shape(flat_dims));
  std::vector<ops::SliceRange> ranges;
  for (std::size_t i = 0; i + 1 < flat_dims.size(); ++i) ranges.push_back({0, flat_dims[i], 1});
  ranges.push_back({start, length, cols + 1});
  return Tensor<B, D - 1, K>(B::slice(flat, ranges));
}

// A square matrix with `v` on its `offset`-th diagonal and zeros elsewhere (torch.diag of a
// 1-d tensor): n elements give an (n + |offset|) square.
template <class B, class K> Tensor<B, 2, K> diag(const Tensor<B, 1, K>& v, std::int64_t offset = 0) {
  const std::int64_t length = v.dim(0);
  const std::int64_t n = length + (offset >= 0 ? offset : -offset);
  const auto zeros = provided::full<B>(Shape{n * n}, 0.0, v.dtype(), v.device());
  const std::int64_t start = length == 0 ? 0 : (offset >= 0 ? offset : -offset * n);
  const std::vector<ops::SliceRange> ranges{{start, length, n + 1}};
  return Tensor<B, 2, K>(B::reshape(B::slice_assign(zeros, ranges, v.primitive()), Shape{n, n}));
}
// The `offset`-th diagonal of a matrix (torch.diag of a 2-d tensor).
template <class B, class K> Tensor<B, 1, K> diag(const Tensor<B, 2, K>& m, std::int64_t offset = 0) {
  return diagonal(m, offset, 0, 1);
}

// The sum of a matrix's main diagonal (torch.trace), as Kiln's scalar: shape [1].
template <class B, class K> Tensor<B, 1, K> trace(const Tensor<B, 2, K>& m) requires Numeric<K> {
  return diagonal(m).sum();
}

// The outer product of two vectors: out[i][j] = a[i] * b[j] (torch.outer).
template <class B, class K> Tensor<B, 2, K> outer(const Tensor<B, 1, K>& a, const Tensor<B, 1, K>& b)
  requires Numeric<K>
{
  return a.template reshape<2>({-1, 1}).mul(b.template reshape<2>({1, -1}));
}

// The cross product of 3-vectors along dim (torch.linalg.cross, default dim -1); the other dims
// broadcast. c[i] = a[i+1] b[i+2] - a[i+2] b[i+1], indices mod 3: two rolls of each operand.
template <class B, std::size_t D, class K>
Tensor<B, D, K> cross(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b, std::int64_t dim = -1) requires Numeric<K> {
  const std::size_t d = normalize_dim("cross", dim, D);
  KILN_CHECK(a.shape()[d] == 3 && b.shape()[d] == 3, "cross: dim {} must have size 3 in both {} and {}", d,
             a.shape(), b.shape());
  const auto dd = static_cast<std::int64_t>(d);
  return a.roll(-1, dd).mul(b.roll(-2, dd)).sub(a.roll(-2, dd).mul(b.roll(-1, dd)));
}

}  // namespace kiln
