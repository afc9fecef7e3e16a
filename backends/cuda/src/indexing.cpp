// Indexing on the CUDA and ROCm backends: gather and scatter (per-element indices along one dim,
// torch.gather / torch.scatter semantics, assign and add), with the CPU backend's checks,
// results and error messages. The kernels are kernels/cuda/indexing.cu.
//
// Every operand goes to the kernels contiguous, as [outer, extent along dim, inner]: the
// input is first cut (a view) to the index's extents outside dim, which the shape rules
// allow, so the kernels need no per-dim strides. Scatter writes into a copy of x; where the
// cut of that copy is not contiguous it works on a contiguous copy of the cut and copies it
// back.
//
// Indices (i64 or i32, negative ones counting from the end) stay on the device: a kernel
// that meets one out of range sets a flag, and the host reads the flag back (the op waits
// for its kernel). When it is set, the index is read back and its first entry out of range,
// in row-major order, raises the CPU's kiln::Error naming the op; the result is discarded.
#include "runtime.hpp"


#include <cstring>
#include <string>
#include <vector>

namespace kiln::KILN_GPU_NAMESPACE {
namespace {

// The entry name's part for an element size: moves need no dtype.
std::string_view element_bits(DType dtype) {
  switch (dtype_size(dtype)) {
    case 1: return "u8";
    case 2: return "u16";
    case 4: return "u32";
    default: return "u64";
  }
}

// "<name>_<part>_<i32|i64>", an entry of kernels/cuda/indexing.cu.
std::string entry(std::string_view name, std::string_view part, DType index) {
  std::string s(name);
  s += '_';
  s += part;
  s += index == DType::i64 ? "_i64" : "_i32";
  return s;
}

// The CPU's read_indices, for the error only: throws on the first index out of range.
[[noreturn]] void fail_on_bad_index(std::string_view op, const Tensor& index, std::int64_t limit) {
  ops::check_index_dtype(op, index.dtype);
  const TensorData data = Gpu::into_data(index);
  ops::read_indices(op, data.dtype(), data.bytes(), limit);
  KILN_FAIL("{}: an index is out of range for a dim of size {}", op, limit);
}

// A zeroed i32 flag on `device`, which the kernels set to 1 on an index out of range.
Tensor zeroed_flag(int device) { return zeros(Shape{1}, DType::i32, device); }

// Waits for the kernels and raises the CPU's error when one met an index out of range.
void check_flag(std::string_view op, const Tensor& flag, const Tensor& index, std::int64_t limit) {
  std::int32_t bad = 0;
  Context::get(flag.device).download(&bad, address(flag), sizeof bad);
  if (bad != 0) fail_on_bad_index(op, index, limit);
}

// x's view cut to `shape`'s extents on every dim but d (no larger than x's there).
Tensor cut(const Tensor& x, const Shape& shape, std::size_t d) {
  Tensor v = x;
  for (std::size_t i = 0; i < shape.rank(); ++i)
    if (i != d) v.shape[i] = shape[i];
  return v;
}

// The product of shape's extents before d (outer) and after d (inner).
std::pair<std::int64_t, std::int64_t> outer_inner(const Shape& shape, std::size_t d) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (i < d) outer *= shape[i];
    if (i > d) inner *= shape[i];
  }
  return {outer, inner};
}

void check_devices(std::string_view op, const Tensor& x, const Tensor& other, std::string_view what) {
  KILN_CHECK(x.device == other.device, "{}: the input is on " KILN_GPU_NAME " device {} and the {} on device {}", op, x.device,
             what, other.device);
}

}  // namespace
}  // namespace kiln::KILN_GPU_NAMESPACE

namespace kiln {

using gpu::Tensor;

Gpu::Primitive Gpu::gather(const Primitive& x, std::int64_t dim, const Primitive& index) {
  constexpr std::string_view op = "gather";
  ops::check_dim(op, dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_gather_index(x.shape, index.shape, d);
  ops::check_index_dtype(op, index.dtype);
  Tensor out = gpu::empty(index.shape, x.dtype, x.device);
  if (out.numel() == 0) return out;
  gpu::check_devices(op, x, index, "index");
  const std::int64_t size = x.shape[d];
  if (size == 0) gpu::fail_on_bad_index(op, index, size);
  const Tensor xc = gpu::contiguous(gpu::cut(x, index.shape, d));
  const Tensor ic = gpu::contiguous(index);
  const std::int64_t inner = gpu::outer_inner(index.shape, d).second;
  const Tensor flag = gpu::zeroed_flag(x.device);
  const gpu::Kernel& kernel =
      gpu::file_kernel(x.device, "indexing", {}, gpu::entry("gather", gpu::element_bits(x.dtype), index.dtype));
  const std::int64_t n = out.numel(), index_dim = index.shape[d];
  gpu::launch_threads(x.device, kernel, n, gpu::address(out), gpu::address(xc), gpu::address(ic), n, size,
                       index_dim, inner, gpu::address(flag));
  gpu::check_flag(op, flag, index, size);
  return out;
}

Gpu::Primitive Gpu::scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                              ops::ScatterMode mode) {
  const std::string_view op = mode == ops::ScatterMode::add ? "scatter_add" : "scatter";
  ops::check_dim(op, dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_scatter_operands(op, x.shape, x.dtype, index.shape, index.dtype, src.shape, src.dtype, d);
  Tensor out = gpu::empty(x.shape, x.dtype, x.device);
  gpu::copy_into(x, out);
  if (index.numel() == 0) return out;
  gpu::check_devices(op, x, index, "index");
  gpu::check_devices(op, x, src, "src");
  const std::int64_t size = x.shape[d];
  if (size == 0) gpu::fail_on_bad_index(op, index, size);
  // src cut to the index's shape on every dim; the output cut outside dim.
  Tensor src_view = src;
  src_view.shape = index.shape;
  const Tensor sc = gpu::contiguous(src_view);
  const Tensor ic = gpu::contiguous(index);
  const Tensor target = gpu::cut(out, index.shape, d);
  const bool in_place = target.is_contiguous();
  const Tensor work = in_place ? target : gpu::contiguous(target);
  const auto [outer, inner] = gpu::outer_inner(index.shape, d);
  const std::int64_t positions = outer * inner, fiber = index.shape[d];
  const std::string variant = mode == ops::ScatterMode::assign
                                  ? gpu::entry("scatter_assign", gpu::element_bits(x.dtype), index.dtype)
                                  : gpu::entry("scatter_add", dtype_name(x.dtype), index.dtype);
  const Tensor flag = gpu::zeroed_flag(x.device);
  const gpu::Kernel& kernel = gpu::file_kernel(x.device, "indexing", {}, variant);
  gpu::launch_threads(x.device, kernel, positions, gpu::address(work), gpu::address(sc), gpu::address(ic),
                       positions, size, fiber, inner, gpu::address(flag));
  gpu::check_flag(op, flag, index, size);
  if (!in_place) gpu::copy_into(work, target);
  return out;
}

}  // namespace kiln
