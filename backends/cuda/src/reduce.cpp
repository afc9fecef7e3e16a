// Reductions (sum, prod, max, min, mean over one dim), arg-reductions and cumulative scans on
// the CUDA and ROCm backends. Every kernel (kernels/cuda/reduce.cu) sees its contiguous input as
// [outer, n, inner] around the dim, and the results match the CPU backend's: the same dtypes
// (the input's; i64 indices), accumulators, NaN handling and errors.
//
// Algorithms:
// - reduce, short rows, or many rows that are not contiguous: one thread per output element
//   loops over its row (reduce_rows_*). Adjacent threads read adjacent elements when inner > 1.
// - reduce, long rows: one block per output element, its threads striding over the row and
//   combining their accumulators with a tree in shared memory (reduce_tree_*). With few
//   outputs, each row is split into parts, a block each (reduce_parts_*), whose accumulators
//   go to a scratch buffer that one thread per row reduces (reduce_combine_*). A reduction of
//   every element is the one-row case.
// - arg_reduce: the same two shapes without parts (argmax_rows_*, argmax_tree_*, ...).
// - cumulative: one thread per line, a sequential scan down the dim (cumsum_*, cumprod_*).
// Accumulators: floats sum, multiply and scan in double (f32 rounds once at the end); integers
// in the unsigned type of their width, which wraps like the CPU's u64 accumulator cast back to
// the element type. f16 and bf16 run as f32 and round once; bool runs as its 0/1 bytes.
#include "runtime.hpp"


#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

namespace kiln::KILN_GPU_NAMESPACE {
namespace {

using ops::ReduceOp;
using Split = ops::DimSplit;

// Rows at least this long get a block each (a tree reduction) rather than one thread.
constexpr long long kTreeRows = 512;
// With this many outputs or more, rows that are not contiguous (inner > 1) keep one thread
// each even when long: the threads' reads are then coalesced and the device is full.
constexpr long long kManyRows = 65536;
// Threads per block of the tree kernels: KILN_TREE_THREADS in reduce.cu.
constexpr int kTreeThreads = 256;
// With few outputs, long rows are split into parts of at least kMinPart elements, so that
// about kTargetBlocks blocks run.
constexpr long long kMinPart = 4096;
constexpr long long kTargetBlocks = 1024;

// The element type in entry names: bool runs as its 0/1 bytes.
std::string_view kernel_type(DType dtype) { return dtype == DType::boolean ? "u8" : dtype_name(dtype); }

// Bytes of a reduction's accumulator (reduce.cu): double for float sums and products, the
// unsigned type of the element's width for integers (u8 in 32 bits); max and min compare in
// the element type.
std::size_t accumulator_bytes(ReduceOp op, DType dtype) {
  if (op == ReduceOp::max || op == ReduceOp::min) return dtype_size(dtype);
  if (is_float(dtype)) return sizeof(double);
  return dtype == DType::u8 ? sizeof(unsigned int) : dtype_size(dtype);
}

bool use_tree(const Split& s) { return s.n >= kTreeRows && (s.inner == 1 || s.outer * s.inner < kManyRows); }

const Kernel& reduce_kernel(int device, std::string_view entry) { return file_kernel(device, "reduce", {}, entry); }

// The reduction `op` of the contiguous `c` viewed as `s` (n > 0), into a new tensor of `shape`.
Tensor run_reduce(const Tensor& c, const Split& s, ReduceOp op, const Shape& shape) {
  const std::string_view kind = op == ReduceOp::mean ? "sum" : ops::reduce_name(op);
  const std::string_view type = kernel_type(c.dtype);
  const auto entry = [&](std::string_view stage) -> const Kernel& {
    return reduce_kernel(c.device, fmt::format("reduce_{}_{}_{}", stage, kind, type));
  };
  Tensor out = empty(shape, c.dtype, c.device);
  void* out_data = address(out);
  const void* in_data = address(c);
  const long long rows = s.outer * s.inner, n = s.n, inner = s.inner;
  const long long divisor = op == ReduceOp::mean ? n : 0;
  if (!use_tree(s)) {
    launch_threads(c.device, entry("rows"), rows, out_data, in_data, rows, n, inner, 1LL, n, divisor);
    return out;
  }
  long long parts = 1;
  if (rows < kTargetBlocks) {
    parts = std::max(1LL, std::min((n + kMinPart - 1) / kMinPart, kTargetBlocks / rows));
    const long long chunk = (n + parts - 1) / parts;
    parts = (n + chunk - 1) / chunk;  // no empty part
  }
  if (parts == 1) {
    launch_blocks(c.device, entry("tree"), rows, kTreeThreads, 0, out_data, in_data, rows, n, inner, 1LL, n,
                  divisor);
    return out;
  }
  // Two passes: each part's accumulator into [rows, parts] scratch, then each row's parts.
  // The scratch goes back to the allocator at return, which is safe with the kernels queued
  // (blocks are reused in stream order).
  const long long chunk = (n + parts - 1) / parts;
  const auto scratch =
      Context::get(c.device).allocate(static_cast<std::size_t>(rows * parts) * accumulator_bytes(op, c.dtype));
  void* partial = scratch->data;
  const void* partial_in = scratch->data;
  launch_blocks(c.device, entry("parts"), rows * parts, kTreeThreads, 0, partial, in_data, rows, n, inner, parts,
                chunk, 0LL);
  launch_threads(c.device, entry("combine"), rows, out_data, partial_in, rows, parts, 1LL, 1LL, parts, divisor);
  return out;
}

// The result of reducing nothing: sum 0, prod 1, mean NaN (0/0), any false, all true.
Tensor empty_reduction(const Shape& shape, ReduceOp op, DType dtype, int device) {
  double value = 0.0;
  switch (op) {
    case ReduceOp::sum: value = 0.0; break;
    case ReduceOp::prod: value = 1.0; break;
    case ReduceOp::mean: value = std::numeric_limits<double>::quiet_NaN(); break;
    case ReduceOp::max: value = 0.0; break;  // bool only: the others have no identity
    case ReduceOp::min: value = 1.0; break;
  }
  return Gpu::full(shape, value, dtype, Gpu::Device{device});
}

// ---- arg-reductions: the first index of the max (min); a NaN counts as the max (min).
Tensor run_arg(const Tensor& c, const Split& s, ops::ArgReduceOp op, const Shape& shape) {
  const bool tree = use_tree(s);
  const Kernel& kernel = reduce_kernel(
      c.device, fmt::format("{}_{}_{}", ops::arg_reduce_name(op), tree ? "tree" : "rows", kernel_type(c.dtype)));
  Tensor out = empty(shape, DType::i64, c.device);
  long long* out_data = pointer<long long>(out);
  const void* in_data = address(c);
  const long long rows = s.outer * s.inner, n = s.n, inner = s.inner;
  if (tree) launch_blocks(c.device, kernel, rows, kTreeThreads, 0, out_data, in_data, rows, n, inner);
  else launch_threads(c.device, kernel, rows, out_data, in_data, rows, n, inner);
  return out;
}

// ---- scans: out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], one thread per line.
Tensor run_scan(const Tensor& c, const Split& s, ops::CumulativeOp op) {
  const Kernel& kernel =
      reduce_kernel(c.device, fmt::format("{}_{}", ops::cumulative_name(op), kernel_type(c.dtype)));
  Tensor out = empty(c.shape, c.dtype, c.device);
  void* out_data = address(out);
  const void* in_data = address(c);
  const long long rows = s.outer * s.inner, n = s.n, inner = s.inner;
  launch_threads(c.device, kernel, rows, out_data, in_data, rows, n, inner);
  return out;
}

}  // namespace
}  // namespace kiln::KILN_GPU_NAMESPACE

namespace kiln {

using gpu::Tensor;

Gpu::Primitive Gpu::reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) {
  const auto name = ops::reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  ops::check_reduce_dtype(op, x.dtype);
  ops::check_reduce_dim_extent(op, x.dtype, x.shape, d);
  // f16 / bf16 accumulate in f32 (itself in double) and round once, like the CPU backend.
  if (gpu::is_half(x.dtype)) return gpu::cast(reduce(gpu::cast(x, DType::f32), op, dim), x.dtype);
  const Shape shape = ops::keep_dim(x.shape, d);
  if (shape.numel() == 0) return gpu::empty(shape, x.dtype, x.device);
  const ops::DimSplit s = ops::split_at(x.shape, d);
  if (s.n == 0) return gpu::empty_reduction(shape, op, x.dtype, x.device);
  return gpu::run_reduce(gpu::contiguous(x), s, op, shape);
}

Gpu::Primitive Gpu::arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
  const auto name = ops::arg_reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  const ops::DimSplit s = ops::split_at(x.shape, d);
  KILN_CHECK(s.n > 0, "{}: cannot reduce over dim {} of size 0 in shape {}", name, d, x.shape);
  if (gpu::is_half(x.dtype)) return arg_reduce(gpu::cast(x, DType::f32), op, dim);  // f32 holds them exactly
  const Shape shape = ops::keep_dim(x.shape, d);
  if (shape.numel() == 0) return gpu::empty(shape, DType::i64, x.device);
  return gpu::run_arg(gpu::contiguous(x), s, op, shape);
}

Gpu::Primitive Gpu::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
  const auto name = ops::cumulative_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  KILN_CHECK(!is_bool(x.dtype), "{}: expected a float or int tensor, got {}", name, x.dtype);
  if (x.numel() == 0) return gpu::empty(x.shape, x.dtype, x.device);
  if (gpu::is_half(x.dtype)) return gpu::cast(cumulative(gpu::cast(x, DType::f32), op, dim), x.dtype);
  return gpu::run_scan(gpu::contiguous(x), ops::split_at(x.shape, d), op);
}

}  // namespace kiln
