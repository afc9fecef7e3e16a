// A strided view of a buffer's elements: shape, element strides and offset, and dtype,
// and the layout ops that only change the view (reshape where strides allow, permute,
// broadcast, slice, flip). Backends whose tensors are views into device or host buffers
// (CPU, Vulkan) build their handles on it; a broadcast dim has stride 0.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ops/layout.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kiln {

struct StridedView {
  Shape shape;
  Strides strides;  // in elements; 0 on broadcast dims
  std::int64_t offset = 0;            // in elements
  DType dtype = DType::f32;

  std::int64_t numel() const { return shape.numel(); }
  // Row-major and dense (size-1 dims may have any stride); the offset may be non-zero.
  // An empty view is contiguous, whatever its strides.
  bool is_contiguous() const {
    if (numel() == 0) return true;
    std::int64_t expected = 1;
    for (std::size_t i = shape.rank(); i-- > 0;) {
      if (shape[i] != 1 && strides[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
};

namespace strided {

// Strides that show x's elements, in row-major order, with `shape`; none when x's strides
// cannot. x's dims (size-1 dims aside) fall into blocks that are contiguous among
// themselves, each one evenly spaced run of elements; a reshape is a view when every new
// dim lies within one block.
inline std::optional<Strides> reshape_strides(const StridedView& x, const Shape& shape) {
  if (x.numel() == 0) return shape.contiguous_strides();
  // Block b: block_numel[b] elements, block_stride[b] the stride of its innermost dim.
  Extents block_numel, block_stride;
  for (std::size_t d = 0; d < x.shape.rank(); ++d) {
    if (x.shape[d] == 1) continue;
    if (!block_stride.empty() && block_stride.back() == x.strides[d] * x.shape[d]) {
      block_numel[block_numel.size() - 1] *= x.shape[d];
      block_stride[block_stride.size() - 1] = x.strides[d];
    } else {
      block_numel.push_back(x.shape[d]);
      block_stride.push_back(x.strides[d]);
    }
  }
  const std::size_t blocks = block_numel.size();
  Strides strides(shape.rank(), 1);
  std::size_t b = 0;
  std::int64_t left = blocks == 0 ? 1 : block_numel[0];  // elements of block b not yet given to a new dim
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    if (b == blocks || left % shape[i] != 0) return std::nullopt;
    left /= shape[i];
    strides[i] = block_stride[b] * left;
    if (left == 1 && ++b < blocks) left = block_numel[b];
  }
  return strides;
}

// x with its dims in the order `dims` (a permutation).
template <class View> View permute(const View& x, std::span<const std::int64_t> dims) {
  KILN_CHECK(dims.size() == x.shape.rank(), "permute: {} dims given for a tensor of shape {}", dims.size(), x.shape);
  Extents seen(dims.size(), 0);
  for (auto d : dims) {
    KILN_CHECK(d >= 0 && static_cast<std::size_t>(d) < dims.size() && !seen[static_cast<std::size_t>(d)],
               "permute: dims {} are not a permutation of the dims of shape {}", Shape(dims), x.shape);
    seen[static_cast<std::size_t>(d)] = 1;
  }
  View v = x;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    v.shape[i] = x.shape[static_cast<std::size_t>(dims[i])];
    v.strides[i] = x.strides[static_cast<std::size_t>(dims[i])];
  }
  return v;
}

// x broadcast to `shape` (NumPy rules: missing leading dims and size-1 dims get stride 0).
template <class View> View broadcast(const View& x, const Shape& shape) {
  if (x.shape == shape) return x;
  const std::size_t rank = shape.rank();
  KILN_CHECK(x.shape.rank() <= rank, "expand: cannot broadcast shape {} to {}", x.shape, shape);
  View v = x;
  v.shape = shape;
  v.strides.assign(rank, 0);
  const std::size_t lead = rank - x.shape.rank();
  for (std::size_t d = 0; d < x.shape.rank(); ++d) {
    KILN_CHECK(x.shape[d] == shape[lead + d] || x.shape[d] == 1,
               "expand: cannot broadcast shape {} to {} (dim {}: {} vs {})", x.shape, shape, d, x.shape[d],
               shape[lead + d]);
    v.strides[lead + d] = x.shape[d] == 1 ? 0 : x.strides[d];
  }
  return v;
}

// The elements of x in `ranges` (one per dim, validated here).
template <class View> View slice(const View& x, std::span<const ops::SliceRange> ranges) {
  KILN_CHECK(ranges.size() == x.shape.rank(), "slice: {} ranges given for a tensor of shape {}", ranges.size(),
             x.shape);
  View v = x;
  for (std::size_t d = 0; d < ranges.size(); ++d) {
    const auto& r = ranges[d];
    KILN_CHECK(r.start >= 0 && r.step >= 1 && (r.size == 0 || r.start + (r.size - 1) * r.step < x.shape[d]),
               "slice: range start {} size {} step {} does not fit dim {} of shape {}", r.start, r.size, r.step, d,
               x.shape);
    if (r.size > 0) v.offset += r.start * x.strides[d];
    v.shape[d] = r.size;
    v.strides[d] = x.strides[d] * r.step;
  }
  return v;
}

// x read backwards along each of `dims` (negated strides).
template <class View> View flip(const View& x, std::span<const std::int64_t> dims) {
  View view = x;
  Extents flipped(x.shape.rank(), 0);
  for (auto d : dims) {
    KILN_CHECK(d >= 0 && static_cast<std::size_t>(d) < x.shape.rank(), "flip: dim {} is out of range for shape {}", d,
               x.shape);
    const auto i = static_cast<std::size_t>(d);
    KILN_CHECK(!flipped[i], "flip: dim {} appears twice in the dims given for shape {}", d, x.shape);
    flipped[i] = 1;
    if (x.shape[i] > 0) view.offset += (x.shape[i] - 1) * x.strides[i];
    view.strides[i] = -x.strides[i];
  }
  return view;
}

// The shape of concatenating `shapes` along dim, checking that they agree elsewhere.
inline Shape cat_shape(std::span<const Shape> shapes, std::span<const DType> dtypes, std::int64_t dim) {
  KILN_CHECK(!shapes.empty(), "cat: no tensors given");
  const Shape& first = shapes[0];
  const std::size_t rank = first.rank();
  KILN_CHECK(dim >= 0 && static_cast<std::size_t>(dim) < rank, "cat: dim {} is out of range for shape {}", dim, first);
  const auto d = static_cast<std::size_t>(dim);
  std::vector<std::int64_t> out = first.to_vector();
  out[d] = 0;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    KILN_CHECK(dtypes[k] == dtypes[0], "cat: dtypes {} and {} differ", dtypes[0], dtypes[k]);
    bool match = shapes[k].rank() == rank;
    for (std::size_t i = 0; match && i < rank; ++i) match = i == d || shapes[k][i] == first[i];
    KILN_CHECK(match, "cat: shapes {} and {} differ outside dim {}", first, shapes[k], d);
    out[d] += shapes[k][d];
  }
  return Shape(std::move(out));
}

// The layout ops of a backend whose tensors are views and which copies through
// `copy(src, dst)` (src broadcast into the view dst) into tensors from `empty(shape, dtype)`:
// the GPU backends' reshape, slice_assign and cat are these.

// x with `shape`: a view where x's strides allow, else a view of `contiguous(x)`.
template <class View, class Contiguous> View reshape(const View& x, const Shape& shape, Contiguous&& contiguous) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  View v = x;
  if (auto strides = reshape_strides(x, shape)) {
    v.strides = std::move(*strides);
  } else {
    v = contiguous(x);
    v.strides = shape.contiguous_strides();
  }
  v.shape = shape;
  return v;
}

// A copy of x with the region `ranges` overwritten by value (x itself is never modified).
template <class View, class Empty, class Copy>
View slice_assign(const View& x, std::span<const ops::SliceRange> ranges, const View& value, Empty&& empty,
                  Copy&& copy) {
  KILN_CHECK(value.dtype == x.dtype, "slice_assign: the value is {}, the tensor is {}", value.dtype, x.dtype);
  const Shape region = ops::sliced_shape(ranges);
  KILN_CHECK(ranges.size() != x.shape.rank() || value.shape == region,
             "slice_assign: the value has shape {}, the region of shape {} has shape {}", value.shape, x.shape, region);
  View out = empty(x.shape, x.dtype);
  copy(x, out);
  copy(value, slice(out, ranges));
  return out;
}

// xs joined along dim, each copied into its part of one new tensor.
template <class View, class Empty, class Copy>
View cat(std::span<const View> xs, std::int64_t dim, Empty&& empty, Copy&& copy) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const auto& x : xs) {
    shapes.push_back(x.shape);
    dtypes.push_back(x.dtype);
  }
  const Shape shape = cat_shape(shapes, dtypes, dim);
  View out = empty(shape, xs[0].dtype);
  std::vector<ops::SliceRange> ranges(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) ranges[i] = {0, shape[i], 1};
  std::int64_t start = 0;
  const auto d = static_cast<std::size_t>(dim);
  for (const auto& x : xs) {
    ranges[d] = {start, x.shape[d], 1};
    start += x.shape[d];
    copy(x, slice(out, ranges));
  }
  return out;
}

}  // namespace strided
}  // namespace kiln
