// Layout ops that never copy (or copy only when the input's strides force it):
// reshape, permute, expand, slice.
#include "internal.hpp"

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::reshape(const Primitive& x, const Shape& shape) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  CpuTensor v = cpu::contiguous(x);
  v.shape = shape;
  v.strides = shape.contiguous_strides();
  return v;
}

Cpu::Primitive Cpu::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  KILN_CHECK(dims.size() == x.shape.rank(), "permute: {} dims given for a tensor of shape {}", dims.size(), x.shape);
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
