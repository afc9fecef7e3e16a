// Layout ops that never copy (or copy only when the input's strides force it):
// reshape, permute, expand, slice.
#include "internal.hpp"


namespace kiln {

using cpu::CpuTensor;


Cpu::Primitive Cpu::reshape(const Primitive& x, const Shape& shape) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  if (auto strides = strided::reshape_strides(x, shape)) return cpu::view_of(x, shape, std::move(*strides), x.offset);
  CpuTensor v = cpu::contiguous(x);
  v.shape = shape;
  v.strides = shape.contiguous_strides();
  return v;
}

Cpu::Primitive Cpu::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  return strided::permute(x, dims);
}

Cpu::Primitive Cpu::expand(const Primitive& x, const Shape& shape) { return strided::broadcast(x, shape); }

Cpu::Primitive Cpu::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  return strided::slice(x, ranges);
}

}  // namespace kiln
