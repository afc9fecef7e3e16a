// Reductions (sum, prod, max, min, mean over one dim or all elements), arg-reductions and
// cumulative scans on the Vulkan backend. Every kernel sees its (contiguous) input as
// [outer, n, inner] around the reduced dim, and the results match the CPU backend's
// (backends/cpu/src/reduce.cpp): the same dtypes, accumulators, NaN handling and errors.
//
// Algorithms:
// - reduce, short rows (n < kGroupRows): one invocation per output element loops over n.
// - reduce, long rows: one workgroup per output element (or per part of one, when there
//   are few outputs); its kWorkgroupSize invocations stride over the row and combine their
//   accumulators with a tree in shared memory. With parts, the per-part accumulators go to
//   a scratch buffer and a second pass reduces them. reduce_all is the [1, numel, 1] case.
// - arg_reduce: the same two shapes (one invocation per output, or a workgroup per row
//   combining (value, index) pairs, where ties and NaNs keep the lowest index).
// - cumulative: one invocation per line, a sequential scan down the dim.
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


// The shader's header: version, the extensions its text needs, the workgroup size.
std::string header(const std::string& body) {
  std::string s = "#version 450\n";
  if (body.find("int64_t") != std::string::npos) s += glsl_extensions({DType::i64});
  if (body.find("uint8_t") != std::string::npos) s += glsl_extensions({DType::u8});
  s += fmt::format("layout(local_size_x = {}) in;\n", kWorkgroupSize);
  return s + body;
}

// GLSL type in which `dtype` values compare (bool and u8 as uint).
std::string compare_type(DType dtype) {
  switch (dtype) {
    case DType::u8:
    case DType::boolean: return "uint";
    default: return storage_type(dtype);
  }
}

// The accumulator of a reduction or scan of `dtype` (see the file comment).
std::string accumulator(DType dtype, bool additive) {
  if (!additive) return compare_type(dtype);
  if (dtype == DType::f32) return Context::get().features().float64 ? "double" : "float";
  return compare_type(dtype);
}

std::size_t type_bytes(const std::string& type) { return type == "double" || type == "int64_t" ? 8 : 4; }

std::string identity(ReduceOp op, const std::string& acc) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return acc + "(0)";
    case ReduceOp::prod: return acc + "(1)";
    case ReduceOp::max:
      if (acc == "float") return "uintBitsToFloat(0xff800000u)";
      if (acc == "double") return "double(uintBitsToFloat(0xff800000u))";
      if (acc == "int") return "(-2147483647 - 1)";
      if (acc == "int64_t") return "(-9223372036854775807l - 1l)";
      return "0u";
    case ReduceOp::min:
      if (acc == "float") return "uintBitsToFloat(0x7f800000u)";
      if (acc == "double") return "double(uintBitsToFloat(0x7f800000u))";
      if (acc == "int") return "2147483647";
      if (acc == "int64_t") return "9223372036854775807l";
      return "0xffffffffu";
  }
  return "";
}

bool is_float_type(const std::string& t) { return t == "float" || t == "double"; }

// combine(a, b): one accumulation step; max/min keep a NaN once seen.
std::string combine_function(ReduceOp op, const std::string& acc) {
  std::string body;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: body = "a + b"; break;
    case ReduceOp::prod: body = "a * b"; break;
    case ReduceOp::max: body = is_float_type(acc) ? "(b > a || isnan(b)) ? b : a" : "b > a ? b : a"; break;
    case ReduceOp::min: body = is_float_type(acc) ? "(b < a || isnan(b)) ? b : a" : "b < a ? b : a"; break;
  }
  return fmt::format("{0} combine({0} a, {0} b) {{ return {1}; }}\n", acc, body);
}

// Parameter buffer (ints): [0] outer, [1] n, [2] inner, [3] parts, [4] rows per part,
// [5] input element offset, [6] work items, [7] the divisor of a mean.
std::shared_ptr<Buffer> upload_params(const std::vector<std::int32_t>& params) {
  Context& context = Context::get();
  auto buffer = context.allocate(params.size() * sizeof(std::int32_t));
  context.upload(*buffer, 0, params.data(), params.size() * sizeof(std::int32_t));
  return buffer;
}

void dispatch_groups(const Pipeline& pipeline, std::span<const std::shared_ptr<Buffer>> buffers, std::int64_t groups) {
  Context& context = Context::get();
  const std::int64_t x = std::min<std::int64_t>(groups, context.max_groups_x());
  const std::int64_t y = (groups + x - 1) / x;
  context.dispatch(pipeline, buffers, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y));
}

const char* kBindings =
    "layout(std430, binding = 0) readonly buffer Params {{ int params[]; }};\n"
    "layout(std430, binding = 1) writeonly buffer Out {{ {} out_data[]; }};\n"
    "layout(std430, binding = 2) readonly buffer In {{ {} in_data[]; }};\n";

const char* kThreadIndex =
    "  const int t = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * {}u);\n"
    "  if (t >= params[6]) return;\n";
const char* kGroupIndex =
    "  const int item = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);\n"
    "  if (item >= params[6]) return;\n"  // uniform over the workgroup: no barrier is skipped by some only
    "  const int lid = int(gl_LocalInvocationID.x);\n";

// One reduction pass over `in` (elements of `in_type` from `offset`) viewed as `s`, into
// `out`: the finished values (`out_type`, mean divided by `mean_n`) or, with parts > 1, the
// accumulators of each part, [outer * inner, parts].
struct Pass {
  ReduceOp op;
  std::string acc;
};

void reduce_pass(const Pass& pass, const std::shared_ptr<Buffer>& in, const std::string& in_type, std::int64_t offset,
                 const Split& s, std::int64_t parts, const std::shared_ptr<Buffer>& out, const std::string& out_type,
                 bool finish, std::int64_t mean_n) {
  const std::string& acc = pass.acc;
  const std::int64_t rows = s.outer * s.inner;
  const bool group = s.n >= kGroupRows;
  const std::int64_t chunk = (s.n + parts - 1) / parts;
  std::string finalize = "acc";
  if (finish)
    finalize = pass.op == ReduceOp::mean ? fmt::format("{}(acc / {}(params[7]))", out_type, acc)
                                         : fmt::format("{}(acc)", out_type);
  std::string body = fmt::format(fmt::runtime(kBindings), out_type, in_type) + combine_function(pass.op, acc);
  if (!group) {
    body += "void main() {\n" + fmt::format(fmt::runtime(kThreadIndex), kWorkgroupSize) +
            fmt::format("  const int n = params[1], inner = params[2];\n"
                        "  const int o = t / inner, i = t - o * inner;\n"
                        "  int k = params[5] + o * n * inner + i;\n"
                        "  {0} acc = {1};\n"
                        "  for (int j = 0; j < n; ++j, k += inner) acc = combine(acc, {0}(in_data[k]));\n"
                        "  out_data[t] = {2};\n"
                        "}}\n",
                        acc, identity(pass.op, acc), finalize);
  } else {
    body += fmt::format("shared {} partial[{}];\n", acc, kWorkgroupSize) + "void main() {\n" + kGroupIndex +
            fmt::format("  const int n = params[1], inner = params[2], parts = params[3], chunk = params[4];\n"
                        "  const int r = item / parts, p = item - r * parts;\n"
                        "  const int o = r / inner, i = r - o * inner;\n"
                        "  const int j1 = min(n, (p + 1) * chunk);\n"
                        "  {0} acc = {1};\n"
                        "  for (int j = p * chunk + lid; j < j1; j += {2})\n"
                        "    acc = combine(acc, {0}(in_data[params[5] + (o * n + j) * inner + i]));\n"
                        "  partial[lid] = acc;\n"
                        "  memoryBarrierShared();\n"
                        "  barrier();\n"
                        "  for (int w = {3}; w > 0; w >>= 1) {{\n"
                        "    if (lid < w) partial[lid] = combine(partial[lid], partial[lid + w]);\n"
                        "    memoryBarrierShared();\n"
                        "    barrier();\n"
                        "  }}\n"
                        "  if (lid == 0) {{\n"
                        "    acc = partial[0];\n"
                        "    out_data[item] = {4};\n"
                        "  }}\n"
                        "}}\n",
                        acc, identity(pass.op, acc), kWorkgroupSize, kWorkgroupSize / 2, finalize);
  }
  const std::int64_t items = group ? rows * parts : rows;
  const std::vector<std::int32_t> params{checked_int(s.outer, "a tensor of"), checked_int(s.n, "a dim of"),
                                         checked_int(s.inner, "a tensor of"), checked_int(parts, "a split of"),
                                         checked_int(chunk, "a split of"),   checked_int(offset, "an offset of"),
                                         checked_int(items, "a tensor of"),  checked_int(mean_n, "a dim of")};
  Context& context = Context::get();
  const std::vector<std::shared_ptr<Buffer>> buffers{upload_params(params), out, in};
  const Pipeline& pipeline = context.pipeline(header(body), 3);
  dispatch_groups(pipeline, buffers, group ? items : (items + kWorkgroupSize - 1) / kWorkgroupSize);
}

// The reduction of the contiguous `c` viewed as `s` (n > 0), into a new tensor of `shape`.
VulkanTensor run_reduce(const VulkanTensor& c, const Split& s, ReduceOp op, const Shape& shape) {
  const bool additive = op == ReduceOp::sum || op == ReduceOp::prod || op == ReduceOp::mean;
  const Pass pass{op, accumulator(c.dtype, additive)};
  VulkanTensor out = empty(shape, c.dtype);
  const std::string in_type = storage_type(c.dtype), out_type = storage_type(c.dtype);
  const std::int64_t rows = s.outer * s.inner;
  std::int64_t parts = 1;
  if (s.n >= kGroupRows && rows < kTargetGroups) {
    parts = std::max<std::int64_t>(1, std::min((s.n + kMinPart - 1) / kMinPart, kTargetGroups / rows));
    const std::int64_t chunk = (s.n + parts - 1) / parts;
    parts = (s.n + chunk - 1) / chunk;  // no empty part
  }
  if (parts == 1) {
    reduce_pass(pass, c.buffer, in_type, c.offset, s, 1, out.buffer, out_type, true, s.n);
    return out;
  }
  // Two passes: per-part accumulators, then their reduction ([rows, parts] rows of the scratch).
  auto scratch = Context::get().allocate(static_cast<std::size_t>(rows * parts) * type_bytes(pass.acc));
  reduce_pass(pass, c.buffer, in_type, c.offset, s, parts, scratch, pass.acc, false, s.n);
  reduce_pass(pass, scratch, pass.acc, 0, Split{rows, parts, 1}, 1, out.buffer, out_type, true, s.n);
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
VulkanTensor run_arg(const VulkanTensor& c, const Split& s, bool is_max, const Shape& shape) {
  const std::string t = compare_type(c.dtype);
  const bool fp = is_float_type(t);
  const std::string strict = is_max ? "v > best" : "v < best";
  // better(v, best): v replaces a best of a lower index.
  std::string body = fmt::format(fmt::runtime(kBindings), "int64_t", storage_type(c.dtype)) +
                     fmt::format("bool better({0} v, {0} best) {{ return {1}; }}\n", t,
                                 fp ? strict + " || (isnan(v) && !isnan(best))" : strict);
  const std::int64_t rows = s.outer * s.inner;
  const bool group = s.n >= kGroupRows;
  if (!group) {
    body += "void main() {\n" + fmt::format(fmt::runtime(kThreadIndex), kWorkgroupSize) +
            fmt::format("  const int n = params[1], inner = params[2];\n"
                        "  const int o = t / inner, i = t - o * inner;\n"
                        "  const int base = params[5] + o * n * inner + i;\n"
                        "  {0} best = {0}(in_data[base]);\n"
                        "  int index = 0;\n"
                        "  for (int j = 1; j < n; ++j) {{\n"
                        "    const {0} v = {0}(in_data[base + j * inner]);\n"
                        "    if (better(v, best)) {{ best = v; index = j; }}\n"
                        "  }}\n"
                        "  out_data[t] = int64_t(index);\n"
                        "}}\n",
                        t);
  } else {
    // Each invocation keeps the first best of its strided elements (ascending indices); the
    // tree takes the better value, or on a tie (or two NaNs) the lower index.
    body += fmt::format("shared {} best_value[{}];\nshared int best_index[{}];\n", t, kWorkgroupSize, kWorkgroupSize) +
            "void main() {\n" + kGroupIndex +
            fmt::format("  const int n = params[1], inner = params[2];\n"
                        "  const int o = item / inner, i = item - o * inner;\n"
                        "  const int base = params[5] + o * n * inner + i;\n"
                        "  int index = -1;\n"
                        "  {0} best = {0}(0);\n"
                        "  for (int j = lid; j < n; j += {1}) {{\n"
                        "    const {0} v = {0}(in_data[base + j * inner]);\n"
                        "    if (index < 0 || better(v, best)) {{ best = v; index = j; }}\n"
                        "  }}\n"
                        "  best_value[lid] = best;\n"
                        "  best_index[lid] = index;\n"
                        "  memoryBarrierShared();\n"
                        "  barrier();\n"
                        "  for (int w = {2}; w > 0; w >>= 1) {{\n"
                        "    if (lid < w) {{\n"
                        "      const int bi = best_index[lid + w];\n"
                        "      const {0} bv = best_value[lid + w], av = best_value[lid];\n"
                        "      const int ai = best_index[lid];\n"
                        "      const bool take =\n"
                        "          bi >= 0 && (ai < 0 || better(bv, av) || (!better(av, bv) && bi < ai));\n"
                        "      if (take) {{ best_value[lid] = bv; best_index[lid] = bi; }}\n"
                        "    }}\n"
                        "    memoryBarrierShared();\n"
                        "    barrier();\n"
                        "  }}\n"
                        "  if (lid == 0) out_data[item] = int64_t(best_index[0]);\n"
                        "}}\n",
                        t, kWorkgroupSize, kWorkgroupSize / 2);
  }
  VulkanTensor out = empty(shape, DType::i64);
  const std::vector<std::int32_t> params{checked_int(s.outer, "a tensor of"), checked_int(s.n, "a dim of"),
                                         checked_int(s.inner, "a tensor of"), 1,
                                         checked_int(s.n, "a dim of"),       checked_int(c.offset, "an offset of"),
                                         checked_int(rows, "a tensor of"),   1};
  Context& context = Context::get();
  const std::vector<std::shared_ptr<Buffer>> buffers{upload_params(params), out.buffer, c.buffer};
  const Pipeline& pipeline = context.pipeline(header(body), 3);
  dispatch_groups(pipeline, buffers, group ? rows : (rows + kWorkgroupSize - 1) / kWorkgroupSize);
  return out;
}

// ---- scans: out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], one invocation per line.
VulkanTensor run_scan(const VulkanTensor& c, const Split& s, bool sum) {
  const std::string acc = accumulator(c.dtype, true), type = storage_type(c.dtype);
  const std::string body =
      fmt::format(fmt::runtime(kBindings), type, type) + "void main() {\n" +
      fmt::format(fmt::runtime(kThreadIndex), kWorkgroupSize) +
      fmt::format("  const int n = params[1], inner = params[2];\n"
                  "  const int o = t / inner, i = t - o * inner;\n"
                  "  const int base = o * n * inner + i;\n"
                  "  {0} acc = {0}({1});\n"
                  "  for (int j = 0; j < n; ++j) {{\n"
                  "    acc = acc {2} {0}(in_data[params[5] + base + j * inner]);\n"
                  "    out_data[base + j * inner] = {3}(acc);\n"
                  "  }}\n"
                  "}}\n",
                  acc, sum ? 0 : 1, sum ? "+" : "*", type);
  VulkanTensor out = empty(c.shape, c.dtype);
  const std::int64_t lines = s.outer * s.inner;
  const std::vector<std::int32_t> params{checked_int(s.outer, "a tensor of"), checked_int(s.n, "a dim of"),
                                         checked_int(s.inner, "a tensor of"), 1,
                                         checked_int(s.n, "a dim of"),       checked_int(c.offset, "an offset of"),
                                         checked_int(lines, "a tensor of"),  1};
  Context& context = Context::get();
  const std::vector<std::shared_ptr<Buffer>> buffers{upload_params(params), out.buffer, c.buffer};
  const Pipeline& pipeline = context.pipeline(header(body), 3);
  dispatch_groups(pipeline, buffers, (lines + kWorkgroupSize - 1) / kWorkgroupSize);
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
  return vulkan::run_arg(vulkan::contiguous(x), s, op == ops::ArgReduceOp::argmax, shape);
}

Vulkan::Primitive Vulkan::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
  const auto name = ops::cumulative_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  KILN_CHECK(!is_bool(x.dtype), "{}: expected a float or int tensor, got {}", name, x.dtype);
  vulkan::check_dtype_supported(name, x.dtype);
  if (x.numel() == 0) return vulkan::empty(x.shape, x.dtype);
  if (vulkan::is_half(x.dtype)) return cast(cumulative(cast(x, DType::f32), op, dim), x.dtype);
  return vulkan::run_scan(vulkan::contiguous(x), vulkan::split_at(x.shape, d), op == ops::CumulativeOp::sum);
}

}  // namespace kiln
