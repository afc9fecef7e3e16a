// Layout kernels that copy: slice_assign, flip and cat. They are byte moves, so they
// work on every dtype without dispatch: strided copies go through copy_into, and cat
// moves whole contiguous blocks with memcpy when its inputs allow it.
#include "internal.hpp"

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& value) {
  KILN_CHECK(value.dtype == x.dtype, "slice_assign: the value is {}, the tensor is {}", value.dtype, x.dtype);
  const Shape region = ops::sliced_shape(ranges);
  KILN_CHECK(ranges.size() != x.shape.rank() || value.shape == region,
             "slice_assign: the value has shape {}, the region of shape {} has shape {}", value.shape, x.shape, region);
  // The input is never modified: copy it, then overwrite the region of the copy.
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  cpu::copy_into(x, out);
  cpu::copy_into(value, slice(out, ranges));
  return out;
}

Cpu::Primitive Cpu::flip(const Primitive& x, std::span<const std::int64_t> dims) {
  // A view with negated strides on the flipped dims, copied out contiguously.
  const CpuTensor view = strided::flip(x, dims);
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (x.numel() > 0) cpu::copy_into(view, out);
  return out;
}

Cpu::Primitive Cpu::cat(std::span<const Primitive> xs, std::int64_t dim) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  bool all_contiguous = true;
  for (const auto& x : xs) {
    shapes.push_back(x.shape);
    dtypes.push_back(x.dtype);
    all_contiguous = all_contiguous && x.is_contiguous();
  }
  const Shape out_shape = strided::cat_shape(shapes, dtypes, dim);
  const Shape& first = xs[0].shape;
  const std::size_t rank = first.rank();
  const auto d = static_cast<std::size_t>(dim);
  const std::vector<std::int64_t> out_dims = out_shape.to_vector();
  CpuTensor out = cpu::empty(out_shape, xs[0].dtype);
  if (out.numel() == 0) return out;

  // Every input is `outer` blocks of shape[d] * inner elements; block o of each input lands,
  // one after the other, in output row o.
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= first[i];
  for (std::size_t i = d + 1; i < rank; ++i) inner *= first[i];
  const auto size = static_cast<std::int64_t>(dtype_size(out.dtype));
  const std::int64_t out_row = out_dims[d] * inner * size;
  if (all_contiguous) {
    // Output row o is block o of every input, one after the other. Threads take equal byte ranges
    // of the output, so one huge block (cat along dim 0) is shared as well as many small ones.
    std::vector<std::int64_t> starts{0};  // byte offset of each input's block within an output row
    for (const auto& x : xs) starts.push_back(starts.back() + x.shape[d] * inner * size);
    const std::int64_t total = outer * out_row;
    cpu::parallel_for(total, 1 << 16, [&](std::int64_t begin, std::int64_t end) {
      std::int64_t at = begin;
      while (at < end) {
        const std::int64_t o = at / out_row, r = at % out_row;
        const auto k = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), r) - starts.begin() - 1);
        const std::int64_t n = std::min(end - at, starts[k + 1] - r);
        const std::int64_t block = starts[k + 1] - starts[k];
        std::memcpy(out.bytes() + at, xs[k].bytes() + o * block + (r - starts[k]), static_cast<std::size_t>(n));
        at += n;
      }
    });
    return out;
  }
  // Some input is a strided view: copy each into its slice of the output.
  std::vector<ops::SliceRange> ranges(rank);
  for (std::size_t i = 0; i < rank; ++i) ranges[i] = {0, out_dims[i], 1};
  std::int64_t start = 0;
  for (const auto& x : xs) {
    ranges[d] = {start, x.shape[d], 1};
    start += x.shape[d];
    if (x.numel() > 0) cpu::copy_into(x, slice(out, ranges));
  }
  return out;
}

}  // namespace kiln
