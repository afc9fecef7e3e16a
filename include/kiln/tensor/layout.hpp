// Layout and indexing ops on Tensor: permute, expand, slice, cat, gather/scatter,
// index_select, flip/roll, pad, tril/triu, one_hot. Backends implement the primitives
// (kiln/backend/backend.hpp); repeat, roll, narrow, chunk, split, stack, pad, tril/triu and
// one_hot are composites written here once.
#pragma once

#include "kiln/tensor/fwd.hpp"

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <vector>

namespace kiln {

// The parameter types of the layout ops, reachable as kiln::Slice, kiln::PadMode and
// kiln::ScatterMode (as in t.slice({Slice(0, 2), Slice()}), t.pad({1, 1}, PadMode::reflect)).
using ops::PadMode;
using ops::ScatterMode;
using ops::Slice;

template <class B, std::size_t D, class K> class LayoutApi : public TensorMixin<B, D, K, LayoutApi<B, D, K>> {
  using Base = TensorMixin<B, D, K, LayoutApi<B, D, K>>;
  using typename Base::Self;
  using Base::prim;
  using Base::self;
  using Base::wrap;
  using Primitive = typename B::Primitive;
  using Dims = std::array<std::int64_t, D>;

 public:
  // ---- dim order
  Self permute(const Dims& order) const {
    std::vector<std::int64_t> dims(D);
    std::vector<bool> seen(D, false);
    for (std::size_t i = 0; i < D; ++i) {
      const std::size_t d = normalize_dim("permute", order[i], D);
      KILN_CHECK(!seen[d], "permute: dim {} appears twice in the order given for shape {}", d, self().shape());
      seen[d] = true;
      dims[i] = static_cast<std::int64_t>(d);
    }
    return wrap(B::permute(prim(), dims));
  }
  Self swap_dims(std::int64_t a, std::int64_t b) const {
    Dims order;
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[normalize_dim("swap_dims", a, D)], order[normalize_dim("swap_dims", b, D)]);
    return permute(order);
  }
  // Swaps the last two dims.
  Self transpose() const requires(D >= 2) { return swap_dims(-2, -1); }

  // ---- broadcasting
  // expand({4, -1, 3}): size-1 dims grow, -1 keeps a dim; a higher rank adds leading dims.
  template <std::size_t D2> Tensor<B, D2, K> expand(const std::int64_t (&dims)[D2]) const {
    static_assert(D2 >= D, "expand: the target rank must be at least the tensor's rank");
    const Shape in = self().shape();
    std::vector<std::int64_t> out(dims, dims + D2);
    for (std::size_t i = 0; i < D2; ++i) {
      if (out[i] == -1) {
        KILN_CHECK(i >= D2 - D, "expand: -1 is not allowed in the new leading dim {}", i);
        out[i] = in[i - (D2 - D)];
      }
      if (i >= D2 - D) {
        const std::int64_t have = in[i - (D2 - D)];
        KILN_CHECK(have == out[i] || have == 1, "expand: cannot expand shape {} to {} (dim {}: {} to {})", in,
                   Shape(out), i, have, out[i]);
      }
    }
    return Tensor<B, D2, K>(B::expand(prim(), Shape(out)));
  }
  // Broadcasts to `shape`, which has the same rank.
  Self expand_as(const Shape& shape) const {
    KILN_CHECK(shape.rank() == D, "expand: target shape {} has rank {}, not {}", shape, shape.rank(), D);
    return wrap(B::expand(prim(), shape));
  }
  // Broadcasts to the shape of `other` (torch.Tensor.expand_as).
  template <class K2> Self expand_as(const Tensor<B, D, K2>& other) const { return expand_as(other.shape()); }
  // Tiles the tensor counts[i] times along each dim, like torch.Tensor.repeat.
  Self repeat(const Dims& counts) const {
    const Shape in = self().shape();
    std::vector<std::int64_t> split, tiled, out;
    for (std::size_t i = 0; i < D; ++i) {
      KILN_CHECK(counts[i] >= 0, "repeat: negative count {} for dim {}", counts[i], i);
      split.insert(split.end(), {1, in[i]});
      tiled.insert(tiled.end(), {counts[i], in[i]});
      out.push_back(counts[i] * in[i]);
    }
    const Primitive x = B::expand(B::reshape(prim(), Shape(split)), Shape(tiled));
    return wrap(B::reshape(x, Shape(out)));
  }

  // ---- slicing
  // slice({Slice(0, 2), Slice(), Slice(1, std::nullopt, 2)}): one Slice per leading dim.
  Self slice(std::initializer_list<ops::Slice> slices) const {
    return slice(std::vector<ops::Slice>(slices));
  }
  Self slice(const std::vector<ops::Slice>& slices) const {
    const auto ranges = ops::resolve_slices("slice", self().shape(), slices);
    return wrap(B::slice(prim(), ranges));
  }
  // Writes `value` (of the slice's shape) into the sliced region, returning the new tensor.
  Self slice_assign(std::initializer_list<ops::Slice> slices, const Self& value) const {
    return slice_assign(std::vector<ops::Slice>(slices), value);
  }
  Self slice_assign(const std::vector<ops::Slice>& slices, const Self& value) const {
    const auto ranges = ops::resolve_slices("slice_assign", self().shape(), slices);
    const Shape region = ops::sliced_shape(ranges);
    KILN_CHECK(value.shape() == region, "slice_assign: the value has shape {}, the region has shape {}",
               value.shape(), region);
    return wrap(B::slice_assign(prim(), ranges, value.primitive()));
  }
  // `length` elements from `start` along dim.
  Self narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
    const std::size_t d = normalize_dim("narrow", dim, D);
    const std::int64_t size = self().shape()[d];
    if (start < 0) start += size;
    KILN_CHECK(start >= 0 && length >= 0 && start + length <= size,
               "narrow: start {} length {} does not fit dim {} of shape {}", start, length, d, self().shape());
    std::vector<ops::SliceRange> ranges = full_ranges();
    ranges[d] = {start, length, 1};
    return wrap(B::slice(prim(), ranges));
  }
  // Splits into pieces of `size` along dim (the last may be smaller).
  std::vector<Self> split(std::int64_t size, std::int64_t dim = 0) const {
    KILN_CHECK(size > 0, "split: size must be positive, got {}", size);
    const std::int64_t total = self().dim(dim);
    if (total == 0) return {self()};  // an empty dim splits into one empty piece, as in torch
    std::vector<Self> out;
    for (std::int64_t start = 0; start < total; start += size)
      out.push_back(narrow(dim, start, std::min(size, total - start)));
    return out;
  }
  std::vector<Self> split_sizes(const std::vector<std::int64_t>& sizes, std::int64_t dim = 0) const {
    const std::int64_t total = self().dim(dim);
    KILN_CHECK(std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) == total,
               "split_sizes: sizes sum to {}, dim {} of shape {} has {}",
               std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}), dim, self().shape(), total);
    std::vector<Self> out;
    std::int64_t start = 0;
    for (auto s : sizes) {
      out.push_back(narrow(dim, start, s));
      start += s;
    }
    return out;
  }
  // `chunks` pieces of equal size (the last may be smaller), like torch.chunk.
  std::vector<Self> chunk(std::int64_t chunks, std::int64_t dim = 0) const {
    KILN_CHECK(chunks > 0, "chunk: the number of chunks must be positive, got {}", chunks);
    const std::int64_t total = self().dim(dim);
    if (total == 0) return std::vector<Self>(static_cast<std::size_t>(chunks), self());
    return split(std::max<std::int64_t>(1, (total + chunks - 1) / chunks), dim);
  }

  // ---- reordering
  // Reverses the order of elements along each of `dims`.
  Self flip(std::initializer_list<std::int64_t> dims) const { return flip(std::vector<std::int64_t>(dims)); }
  Self flip(const std::vector<std::int64_t>& dims) const {
    std::vector<std::int64_t> normalized;
    std::vector<bool> seen(D, false);
    for (auto d : dims) {
      const std::size_t n = normalize_dim("flip", d, D);
      KILN_CHECK(!seen[n], "flip: dim {} appears twice in the dims given for shape {}", n, self().shape());
      seen[n] = true;
      normalized.push_back(static_cast<std::int64_t>(n));
    }
    return wrap(provided::flip<B>(prim(), normalized));
  }
  // Rolls elements along dim by `shift` (positive moves towards higher indices), like torch.roll.
  Self roll(std::int64_t shift, std::int64_t dim) const {
    const std::int64_t size = self().dim(dim);
    if (size == 0) return self();
    const std::int64_t s = ((shift % size) + size) % size;
    if (s == 0) return self();
    return cat({narrow(dim, size - s, s), narrow(dim, 0, size - s)}, dim);
  }

  // ---- indexing
  // out[i][j] = x[index[i][j]][j] along dim (torch.gather): index has the tensor's rank.
  Self gather(std::int64_t dim, const Tensor<B, D, Int>& index) const {
    return wrap(B::gather(prim(), static_cast<std::int64_t>(normalize_dim("gather", dim, D)), index.primitive()));
  }
  // out = x; out[index[i][j]][j] = src[i][j] along dim (torch.scatter).
  Self scatter(std::int64_t dim, const Tensor<B, D, Int>& index, const Self& src) const {
    return wrap(B::scatter(prim(), static_cast<std::int64_t>(normalize_dim("scatter", dim, D)), index.primitive(),
                           src.primitive(), ops::ScatterMode::assign));
  }
  // out = x; out[index[i][j]][j] += src[i][j] along dim (torch.scatter_add).
  Self scatter_add(std::int64_t dim, const Tensor<B, D, Int>& index, const Self& src) const {
    return wrap(B::scatter(prim(), static_cast<std::int64_t>(normalize_dim("scatter_add", dim, D)), index.primitive(),
                           src.primitive(), ops::ScatterMode::add));
  }
  // The slices at `index` along dim (torch.index_select).
  Self index_select(std::int64_t dim, const Tensor<B, 1, Int>& index) const {
    return wrap(provided::index_select<B>(prim(), static_cast<std::int64_t>(normalize_dim("index_select", dim, D)),
                                index.primitive()));
  }
  // Adds values' slices into the slices at `index` along dim, duplicates summed (torch.index_add;
  // Burn's select_assign).
  Self index_add(std::int64_t dim, const Tensor<B, 1, Int>& index, const Self& values) const {
    return wrap(provided::index_add<B>(prim(), static_cast<std::int64_t>(normalize_dim("index_add", dim, D)),
                             index.primitive(), values.primitive()));
  }

  // ---- masks of the last two dims
  // Keeps elements on and below the `diagonal`-th diagonal (torch.tril), zeroes the rest.
  Self tril(std::int64_t diagonal = 0) const requires(D >= 2) { return triangle(diagonal, true); }
  Self triu(std::int64_t diagonal = 0) const requires(D >= 2) { return triangle(diagonal, false); }

  // One-hot encoding of class indices: a new last dim of `num_classes` (torch.nn.functional.one_hot).
  Tensor<B, D + 1, Int> one_hot(std::int64_t num_classes) const requires std::same_as<K, Int> {
    const auto classes = Tensor<B, 1, Int>::arange(0, num_classes, 1, self().device(), self().dtype());
    if (self().numel() > 0) {
      const auto max = self().max().item();
      const auto min = self().min().item();
      KILN_CHECK(min >= 0 && max < num_classes, "one_hot: class indices must lie in [0, {}), got values from {} to {}",
                 num_classes, min, max);
    }
    const Tensor<B, D + 1, Int> expanded = self().unsqueeze_dim(D);
    std::vector<std::int64_t> class_shape(D + 1, 1);
    class_shape[D] = num_classes;
    const Tensor<B, D + 1, Int> row(B::reshape(classes.primitive(), Shape(class_shape)));
    return expanded.eq(row).to_int(self().dtype());
  }

  // Pads the last dims: pads = {left, right} for the last dim, then {top, bottom} for the one before...,
  // as torch.nn.functional.pad. reflect mirrors without repeating the edge; replicate repeats it;
  // circular wraps around (the left padding comes from the end of the dim, at most the dim's size).
  Self pad(std::initializer_list<std::int64_t> pads, ops::PadMode mode = ops::PadMode::constant,
           double value = 0.0) const {
    const std::vector<std::int64_t> p(pads);
    KILN_CHECK(p.size() % 2 == 0 && p.size() / 2 <= D, "pad: {} pad values for a tensor of rank {} (need pairs)",
               p.size(), D);
    Self out = self();
    for (std::size_t i = 0; i < p.size() / 2; ++i) {
      const std::int64_t dim = static_cast<std::int64_t>(D - 1 - i);
      out = out.pad_dim(dim, p[2 * i], p[2 * i + 1], mode, value);
    }
    return out;
  }

  // Concatenates along dim; all other dims must match.
  static Self cat(const std::vector<Self>& tensors, std::int64_t dim) {
    KILN_CHECK(!tensors.empty(), "cat: no tensors given");
    const std::size_t d = normalize_dim("cat", dim, D);
    const Shape first = tensors[0].shape();
    std::vector<Primitive> prims;
    for (const auto& t : tensors) {
      const Shape s = t.shape();
      for (std::size_t i = 0; i < D; ++i)
        KILN_CHECK(i == d || s[i] == first[i], "cat: shapes {} and {} differ outside dim {}", first, s, d);
      KILN_CHECK(t.dtype() == tensors[0].dtype(), "cat: dtypes {} and {} differ", tensors[0].dtype(), t.dtype());
      prims.push_back(t.primitive());
    }
    return Self(provided::cat<B>(prims, static_cast<std::int64_t>(d)));
  }

 private:
  std::vector<ops::SliceRange> full_ranges() const {
    const Shape s = self().shape();
    std::vector<ops::SliceRange> ranges(D);
    for (std::size_t i = 0; i < D; ++i) ranges[i] = {0, s[i], 1};
    return ranges;
  }

  Self triangle(std::int64_t diagonal, bool lower) const {
    const Shape s = self().shape();
    const std::int64_t rows = s[D - 2], cols = s[D - 1];
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        keep[static_cast<std::size_t>(i * cols + j)] = lower ? (j - i <= diagonal) : (j - i >= diagonal);
    std::vector<std::int64_t> mask_shape(D, 1);
    mask_shape[D - 2] = rows;
    mask_shape[D - 1] = cols;
    TensorData data(std::vector<std::byte>(reinterpret_cast<const std::byte*>(keep.data()),
                                           reinterpret_cast<const std::byte*>(keep.data()) + keep.size()),
                    Shape(mask_shape), DType::boolean);
    const Tensor<B, D, Bool> mask(B::from_data(data, self().device()));
    return self().mask_fill(mask.logical_not(), 0.0);
  }

  Self pad_dim(std::int64_t dim, std::int64_t before, std::int64_t after, ops::PadMode mode, double value) const {
    const std::size_t d = static_cast<std::size_t>(dim);
    const Shape s = self().shape();
    const std::int64_t size = s[d];
    if (before == 0 && after == 0) return self();
    if (mode == ops::PadMode::constant) {
      KILN_CHECK(before >= 0 && after >= 0, "pad: negative padding {} / {} on dim {}", before, after, d);
      std::vector<std::int64_t> dims = s.to_vector();
      dims[d] = size + before + after;
      const Primitive filled = provided::full<B>(Shape(dims), value, self().dtype(), self().device());
      std::vector<ops::SliceRange> ranges(D);
      for (std::size_t i = 0; i < D; ++i) ranges[i] = {0, dims[i], 1};
      ranges[d] = {before, size, 1};
      return wrap(B::slice_assign(filled, ranges, prim()));
    }
    const bool reflect = mode == ops::PadMode::reflect;
    KILN_CHECK(before >= 0 && after >= 0 && size > 0, "pad: padding {} / {} on dim {} of shape {}", before, after, d,
               s);
    KILN_CHECK(!reflect || (before < size && after < size),
               "pad: reflect padding {} / {} must be smaller than dim {} of shape {}", before, after, d, s);
    const bool circular = mode == ops::PadMode::circular;
    KILN_CHECK(!circular || (before <= size && after <= size),
               "pad: circular padding {} / {} must not exceed dim {} of shape {}", before, after, d, s);
    std::vector<double> index;
    for (std::int64_t i = -before; i < size + after; ++i) {
      std::int64_t j = i;
      if (circular) j = (j + size) % size;
      if (j < 0) j = reflect ? -j : 0;
      if (j >= size) j = reflect ? 2 * (size - 1) - j : size - 1;
      index.push_back(static_cast<double>(j));
    }
    const auto n = static_cast<std::int64_t>(index.size());
    const Primitive idx = B::from_data(TensorData::from(index, Shape{n}).convert(DType::i64), self().device());
    return wrap(provided::index_select<B>(prim(), dim, idx));
  }
};

// Concatenates along dim (torch.cat).
template <class B, std::size_t D, class K>
Tensor<B, D, K> cat(const std::vector<Tensor<B, D, K>>& tensors, std::int64_t dim) {
  return Tensor<B, D, K>::cat(tensors, dim);
}

// Stacks equally shaped tensors along a new dim (torch.stack).
template <class B, std::size_t D, class K>
Tensor<B, D + 1, K> stack(const std::vector<Tensor<B, D, K>>& tensors, std::int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: no tensors given");
  std::vector<Tensor<B, D + 1, K>> expanded;
  for (const auto& t : tensors) {
    KILN_CHECK(t.shape() == tensors[0].shape(), "stack: shapes {} and {} differ", tensors[0].shape(), t.shape());
    expanded.push_back(t.unsqueeze_dim(dim));
  }
  return Tensor<B, D + 1, K>::cat(expanded, dim);
}

}  // namespace kiln
