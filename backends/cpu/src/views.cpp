// Layout ops that never copy (or copy only when the input's strides force it):
// reshape, permute, expand, slice.
#include "internal.hpp"

#include <optional>

namespace kiln {

using cpu::CpuTensor;

namespace {

// Strides that show x's elements, in row-major order, with `shape`; none when x's strides cannot.
// x's dims (size-1 dims aside) fall into blocks that are contiguous among themselves, each one
// evenly spaced run of elements; a reshape is a view when every new dim lies within one block.
std::optional<std::vector<std::int64_t>> view_strides(const CpuTensor& x, const Shape& shape) {
  if (x.numel() == 0) return shape.contiguous_strides();
  struct Block {
    std::int64_t numel;
    std::int64_t stride;  // of the block's innermost dim
  };
  std::vector<Block> blocks;
  for (std::size_t d = 0; d < x.shape.rank(); ++d) {
    if (x.shape[d] == 1) continue;
    if (!blocks.empty() && blocks.back().stride == x.strides[d] * x.shape[d]) {
      blocks.back().numel *= x.shape[d];
      blocks.back().stride = x.strides[d];
    } else {
      blocks.push_back({x.shape[d], x.strides[d]});
    }
  }
  std::vector<std::int64_t> strides(shape.rank(), 1);
  std::size_t b = 0;
  std::int64_t left = blocks.empty() ? 1 : blocks[0].numel;  // elements of block b not yet given to a new dim
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    if (b == blocks.size() || left % shape[i] != 0) return std::nullopt;
    left /= shape[i];
    strides[i] = blocks[b].stride * left;
    if (left == 1 && ++b < blocks.size()) left = blocks[b].numel;
  }
  return strides;
}

}  // namespace

Cpu::Primitive Cpu::reshape(const Primitive& x, const Shape& shape) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  if (auto strides = view_strides(x, shape)) {
    CpuTensor v = x;
    v.shape = shape;
    v.strides = std::move(*strides);
    return v;
  }
  CpuTensor v = cpu::contiguous(x);
  v.shape = shape;
  v.strides = shape.contiguous_strides();
  return v;
}

Cpu::Primitive Cpu::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  KILN_CHECK(dims.size() == x.shape.rank(), "permute: {} dims given for a tensor of shape {}", dims.size(), x.shape);
  std::vector<bool> seen(dims.size(), false);
  for (auto d : dims) {
    KILN_CHECK(d >= 0 && static_cast<std::size_t>(d) < dims.size() && !seen[static_cast<std::size_t>(d)],
               "permute: dims {} are not a permutation of the dims of shape {}", Shape(dims), x.shape);
    seen[static_cast<std::size_t>(d)] = true;
  }
  CpuTensor v = x;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    v.shape[i] = x.shape[static_cast<std::size_t>(dims[i])];
    v.strides[i] = x.strides[static_cast<std::size_t>(dims[i])];
  }
  return v;
}

Cpu::Primitive Cpu::expand(const Primitive& x, const Shape& shape) { return cpu::broadcast_view(x, shape); }

Cpu::Primitive Cpu::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  KILN_CHECK(ranges.size() == x.shape.rank(), "slice: {} ranges given for a tensor of shape {}", ranges.size(),
             x.shape);
  CpuTensor v = x;
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

}  // namespace kiln
