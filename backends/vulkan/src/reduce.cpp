// Reductions (sum, prod, max, min, mean over one dim or all elements), arg-reductions and
// cumulative scans on the Vulkan backend. Every kernel sees its (contiguous) input as
// [outer, n, inner] around the reduced dim, and the results match the CPU backend's
// (backends/cpu/src/reduce.cpp): the same dtypes, accumulators, NaN handling and errors.
//
// Algorithms (the kernels are in kernels/glsl):
// - reduce, short rows (n < kGroupRows): one invocation per output element loops over n
//   (reduce_rows.comp).
// - reduce, long rows: one workgroup per output element (or per part of one, when there
//   are few outputs); its kWorkgroupSize invocations stride over the row and combine their
//   accumulators with a tree in shared memory (reduce_tree.comp). With parts, the per-part
//   accumulators go to a scratch buffer and a second pass reduces them. reduce_all is the
//   [1, numel, 1] case.
// - arg_reduce: the same two shapes (arg_reduce_rows.comp, one invocation per output, or
//   arg_reduce_tree.comp, a workgroup per row combining (value, index) pairs, where ties
//   and NaNs keep the lowest index).
// - cumulative: one invocation per line, a sequential scan down the dim (cumulative.comp).
// Accumulators follow the CPU: f32 sums, products, means and scans accumulate in double
// where the device has shaderFloat64 (else in float: a device without float64 rounds more);
// integer sums and products wrap exactly like the CPU's u64 accumulator cast back to the
// element type (i32 in 32-bit int, u8 in 32-bit uint truncated, i64 in int64_t); max/min
// compare in the element type, NaN propagating.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::vulkan {
namespace {

using ops::ReduceOp;

// Rows at least this long get a workgroup each (a tree reduction) rather than one invocation.
constexpr std::int64_t kGroupRows = 512;
// With few outputs, long rows are split into parts of at least this many elements, so that
// about kTargetGroups workgroups run.
constexpr std::int64_t kMinPart = 4096;
constexpr std::int64_t kTargetGroups = 256;

using ops::keep_dim;
using ops::split_at;
using Split = ops::DimSplit;

// The accumulator's dtype in variant names (see the file comment): u32 for u8 and bool,
// f64 for f32 sums, products, means and scans where the device has shaderFloat64.
std::string_view accumulator(DType dtype, bool additive) {
  if (dtype == DType::u8 || dtype == DType::boolean) return "u32";
  if (additive && dtype == DType::f32 && Context::get().features().float64) return "f64";
  return dtype_name(dtype);
}

// Parameters of every kernel here: kernels/glsl/rows.glsl.
std::vector<std::int32_t> params_of(const Split& s, std::int64_t parts, std::int64_t chunk, std::int64_t offset,
                                    std::int64_t items, std::int64_t divisor) {
  return {checked_int(s.outer, "a tensor of"), checked_int(s.n, "a dim of"),
          checked_int(s.inner, "a tensor of"), checked_int(parts, "a split of"),
          checked_int(chunk, "a split of"),    checked_int(offset, "an offset of"),
          checked_int(items, "a tensor of"),   checked_int(divisor, "a dim of")};
}

// Runs `variant` of `op` over [params, out, in]: one invocation per item, or with `group`
// one workgroup per item.
void run(std::string_view op, DType dtype, const std::string& variant, const std::vector<std::int32_t>& params,
         const std::shared_ptr<Buffer>& out, const std::shared_ptr<Buffer>& in, bool group) {
  Context& context = Context::get();
  const std::vector<std::shared_ptr<Buffer>> buffers{upload_ints(params), out, in};
  const Pipeline& pipeline = kernel_pipeline(op, dtype, variant, 3);
  const std::int64_t items = params[6];
  const std::int64_t groups = group ? items : (items + kWorkgroupSize - 1) / kWorkgroupSize;
  const std::int64_t x = std::min<std::int64_t>(groups, context.max_groups_x());
  const std::int64_t y = (groups + x - 1) / x;
  context.dispatch(pipeline, buffers, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y));
}

// One reduction pass of `dtype`'s reduction `op` over `in` (elements of type `in_type` from
// `offset`) viewed as `s`, into `out` (of `out_type`): the finished values (mean divided by
// `divisor`, else 0) or, with parts > 1, the accumulators of each part, [outer * inner, parts].
void reduce_pass(ReduceOp op, DType dtype, std::string_view acc, const std::shared_ptr<Buffer>& in,
                 std::string_view in_type, std::int64_t offset, const Split& s, std::int64_t parts,
                 const std::shared_ptr<Buffer>& out, std::string_view out_type, std::int64_t divisor) {
  const bool group = s.n >= kGroupRows;
  const std::int64_t chunk = (s.n + parts - 1) / parts;
  const std::int64_t items = s.outer * s.inner * (group ? parts : 1);
  const std::string_view kind = op == ReduceOp::mean ? "sum" : ops::reduce_name(op);
  const std::string variant =
      fmt::format("reduce_{}_{}_{}_{}_{}", group ? "tree" : "rows", kind, in_type, acc, out_type);
  run(ops::reduce_name(op), dtype, variant, params_of(s, parts, chunk, offset, items, divisor), out, in, group);
}

// The reduction of the contiguous `c` viewed as `s` (n > 0), into a new tensor of `shape`.
VulkanTensor run_reduce(const VulkanTensor& c, const Split& s, ReduceOp op, const Shape& shape) {
  const bool additive = op == ReduceOp::sum || op == ReduceOp::prod || op == ReduceOp::mean;
  const std::string_view acc = accumulator(c.dtype, additive), type = variant_dtype(c.dtype);
  const std::int64_t divisor = op == ReduceOp::mean ? s.n : 0;
  VulkanTensor out = empty(shape, c.dtype);
  const std::int64_t rows = s.outer * s.inner;
  std::int64_t parts = 1;
  if (s.n >= kGroupRows && rows < kTargetGroups) {
    parts = std::max<std::int64_t>(1, std::min((s.n + kMinPart - 1) / kMinPart, kTargetGroups / rows));
    const std::int64_t chunk = (s.n + parts - 1) / parts;
    parts = (s.n + chunk - 1) / chunk;  // no empty part
  }
  if (parts == 1) {
    reduce_pass(op, c.dtype, acc, c.buffer, type, c.offset, s, 1, out.buffer, type, divisor);
    return out;
  }
  // Two passes: per-part accumulators, then their reduction ([rows, parts] rows of the
  // scratch). f32's f64 accumulators stay f64; the others fit the element type: max and
  // min exactly, and u8 sums and products wrap modulo 256 like the final result.
  const DType partial = acc == "f64" ? DType::f64 : c.dtype;
  const std::string_view partial_type = variant_dtype(partial);
  auto scratch = Context::get().allocate(static_cast<std::size_t>(rows * parts) * dtype_size(partial));
  reduce_pass(op, c.dtype, acc, c.buffer, type, c.offset, s, parts, scratch, partial_type, 0);
  reduce_pass(op, c.dtype, acc, scratch, partial_type, 0, Split{rows, parts, 1}, 1, out.buffer, type, divisor);
  return out;
}

// The result of reducing nothing: sum 0, prod 1, mean NaN (0/0), any false, all true.
VulkanTensor empty_reduction(const Shape& shape, ReduceOp op, DType dtype) {
  double value = 0.0;
  switch (op) {
    case ReduceOp::sum: value = 0.0; break;
    case ReduceOp::prod: value = 1.0; break;
    case ReduceOp::mean: value = std::numeric_limits<double>::quiet_NaN(); break;
    case ReduceOp::max: value = 0.0; break;  // bool only: the others have no identity
    case ReduceOp::min: value = 1.0; break;
  }
  return Vulkan::full(shape, value, dtype, {});
}

// ---- arg-reductions: the first index of the max (min); a NaN counts as the max (min).
VulkanTensor run_arg(const VulkanTensor& c, const Split& s, ops::ArgReduceOp op, const Shape& shape) {
  const std::string_view name = ops::arg_reduce_name(op);
  const bool group = s.n >= kGroupRows;
  VulkanTensor out = empty(shape, DType::i64);
  const std::int64_t rows = s.outer * s.inner;
  run(name, c.dtype, fmt::format("{}_{}_{}", name, group ? "tree" : "rows", variant_dtype(c.dtype)),
      params_of(s, 1, s.n, c.offset, rows, 0), out.buffer, c.buffer, group);
  return out;
}

// ---- scans: out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], one invocation per line.
VulkanTensor run_scan(const VulkanTensor& c, const Split& s, ops::CumulativeOp op) {
  const std::string_view name = ops::cumulative_name(op);
  VulkanTensor out = empty(c.shape, c.dtype);
  const std::string variant =
      fmt::format("{}_{}_{}", name, variant_dtype(c.dtype), accumulator(c.dtype, true));
  run(name, c.dtype, variant, params_of(s, 1, s.n, c.offset, s.outer * s.inner, 0), out.buffer, c.buffer, false);
  return out;
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) {
  const auto name = ops::reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  ops::check_reduce_dtype(op, x.dtype);
  vulkan::check_dtype_supported(name, x.dtype);
  const vulkan::Split s = vulkan::split_at(x.shape, d);
  ops::check_reduce_dim_extent(op, x.dtype, x.shape, d);
  // f16 / bf16 accumulate in f32 and round once, like the CPU backend.
  if (vulkan::is_half(x.dtype)) return cast(reduce(cast(x, DType::f32), op, dim), x.dtype);
  const Shape shape = vulkan::keep_dim(x.shape, d);
  if (shape.numel() == 0) return vulkan::empty(shape, x.dtype);
  if (s.n == 0) return vulkan::empty_reduction(shape, op, x.dtype);
  return vulkan::run_reduce(vulkan::contiguous(x), s, op, shape);
}

Vulkan::Primitive Vulkan::reduce_all(const Primitive& x, ops::ReduceOp op) {
  const auto name = ops::reduce_name(op);
  ops::check_reduce_dtype(op, x.dtype);
  vulkan::check_dtype_supported(name, x.dtype);
  ops::check_reduce_all_extent(op, x.dtype, x.shape);
  if (vulkan::is_half(x.dtype)) return cast(reduce_all(cast(x, DType::f32), op), x.dtype);
  if (x.numel() == 0) return vulkan::empty_reduction(Shape{1}, op, x.dtype);
  return vulkan::run_reduce(vulkan::contiguous(x), vulkan::Split{1, x.numel(), 1}, op, Shape{1});
}

Vulkan::Primitive Vulkan::arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
  const auto name = ops::arg_reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  vulkan::check_dtype_supported(name, x.dtype);
  vulkan::check_dtype_supported(name, DType::i64);
  const vulkan::Split s = vulkan::split_at(x.shape, d);
  KILN_CHECK(s.n > 0, "{}: cannot reduce over dim {} of size 0 in shape {}", name, d, x.shape);
  if (vulkan::is_half(x.dtype)) return arg_reduce(cast(x, DType::f32), op, dim);  // f32 holds them exactly
  const Shape shape = vulkan::keep_dim(x.shape, d);
  if (shape.numel() == 0) return vulkan::empty(shape, DType::i64);
  return vulkan::run_arg(vulkan::contiguous(x), s, op, shape);
}

Vulkan::Primitive Vulkan::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
  const auto name = ops::cumulative_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  KILN_CHECK(!is_bool(x.dtype), "{}: expected a float or int tensor, got {}", name, x.dtype);
  vulkan::check_dtype_supported(name, x.dtype);
  if (x.numel() == 0) return vulkan::empty(x.shape, x.dtype);
  if (vulkan::is_half(x.dtype)) return cast(cumulative(cast(x, DType::f32), op, dim), x.dtype);
  return vulkan::run_scan(vulkan::contiguous(x), vulkan::split_at(x.shape, d), op);
}

}  // namespace kiln
