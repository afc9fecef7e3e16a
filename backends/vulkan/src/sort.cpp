// Stable sort along one dim on the Vulkan backend: values and i64 indices, exactly the CPU
// backend's (backends/cpu/src/sort.cpp): NaN sorts last ascending and first descending
// (PyTorch's order), equal values (and NaNs among themselves) keep their input order in
// both directions, -0.0 and 0.0 compare equal. Every dtype the device holds: f32, f64, i32,
// i64, u8 and bool (as its 0/1 bytes).
//
// Algorithm (for now): a rank sort. The (contiguous) input is seen as [outer, n, inner]; one
// invocation per element counts the elements of its line that sort before it under the
// strict total order (key, then input position), which is its output position, and writes
// its value and index there. O(n^2) work per line, but exact, stable and deterministic
// with one dispatch and no scratch; a bitonic or merge sort in shared memory is the later
// speed-up for long lines.
//
// The i64 indices are written as (low, high) 32-bit pairs, so the kernel needs shaderInt64
// only for i64 values.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {


// Parameter buffer (ints): [0] elements, [1] n, [2] inner, [3] input element offset.
std::string sort_shader(DType dtype, bool descending) {
  const std::string storage = storage_type(dtype);
  const bool fp = dtype == DType::f32 || dtype == DType::f64;
  const std::string key = fp ? storage : (dtype == DType::u8 || dtype == DType::boolean) ? "uint" : storage;
  std::string s = "#version 450\n" + glsl_extensions({dtype});
  s += fmt::format("layout(local_size_x = {}) in;\n", kWorkgroupSize);
  s += "layout(std430, binding = 0) readonly buffer Params { int params[]; };\n";
  s += fmt::format("layout(std430, binding = 1) writeonly buffer Values {{ {} values_data[]; }};\n", storage);
  s += "layout(std430, binding = 2) writeonly buffer Indices { int indices_data[]; };\n";
  s += fmt::format("layout(std430, binding = 3) readonly buffer In {{ {} in_data[]; }};\n", storage);
  // lt(a, b): a's key sorts strictly before b's; same(a, b): equal keys (two NaNs are equal).
  if (fp) {
    s += fmt::format("bool lt({0} a, {0} b) {{ return {1}; }}\n", key,
                     descending ? "(isnan(a) && !isnan(b)) || a > b" : "(!isnan(a) && isnan(b)) || a < b");
    s += fmt::format("bool same({0} a, {0} b) {{ return a == b || (isnan(a) && isnan(b)); }}\n", key);
  } else {
    s += fmt::format("bool lt({0} a, {0} b) {{ return {1}; }}\n", key, descending ? "a > b" : "a < b");
    s += fmt::format("bool same({0} a, {0} b) {{ return a == b; }}\n", key);
  }
  s += "void main() {\n";
  s += fmt::format(
      "  const int t = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * {}u);\n",
      kWorkgroupSize);
  s += fmt::format(
      "  if (t >= params[0]) return;\n"
      "  const int n = params[1], inner = params[2], offset = params[3];\n"
      "  const int o = t / (n * inner), r = t - o * n * inner;\n"
      "  const int j = r / inner, i = r - j * inner;\n"
      "  const int base = o * n * inner + i;\n"
      "  const {0} v = {0}(in_data[offset + t]);\n"
      "  int rank = 0;\n"
      "  for (int k = 0; k < n; ++k) {{\n"
      "    const {0} u = {0}(in_data[offset + base + k * inner]);\n"
      "    if (lt(u, v) || (k < j && same(u, v))) ++rank;\n"
      "  }}\n"
      "  const int p = base + rank * inner;\n"
      "  values_data[p] = in_data[offset + t];\n"
      "  indices_data[2 * p] = j;\n"
      "  indices_data[2 * p + 1] = 0;\n"
      "}}\n",
      key);
  return s;
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

std::pair<Vulkan::Primitive, Vulkan::Primitive> Vulkan::sort(const Primitive& x, std::int64_t dim,
                                                             bool descending) {
  const std::size_t d = normalize_dim("sort", dim, x.shape.rank());
  vulkan::check_dtype_supported("sort", x.dtype);
  vulkan::check_dtype_supported("sort", DType::i64);
  if (vulkan::is_half(x.dtype)) {
    // f16 / bf16 → f32 is exact, so sorting in f32 and casting back returns the input's values.
    auto [values, indices] = sort(cast(x, DType::f32), dim, descending);
    return {cast(values, x.dtype), indices};
  }
  VulkanTensor values = vulkan::empty(x.shape, x.dtype);
  VulkanTensor indices = vulkan::empty(x.shape, DType::i64);
  if (x.numel() == 0) return {values, indices};
  const ops::DimSplit s = ops::split_at(x.shape, d);
  const VulkanTensor c = vulkan::contiguous(x);
  const std::vector<std::int32_t> params{vulkan::checked_int(x.numel(), "a tensor of"),
                                         vulkan::checked_int(s.n, "a dim of"),
                                         vulkan::checked_int(s.inner, "a tensor of"),
                                         vulkan::checked_int(c.offset, "an offset of")};
  vulkan::Context& context = vulkan::Context::get();
  auto param_buffer = vulkan::upload_ints(params);
  const std::vector<std::shared_ptr<vulkan::Buffer>> buffers{param_buffer, values.buffer, indices.buffer, c.buffer};
  const vulkan::Pipeline& pipeline = context.pipeline(vulkan::sort_shader(x.dtype, descending), 4);
  vulkan::dispatch_invocations("sort", pipeline, buffers, x.numel());
  return {values, indices};
}

}  // namespace kiln
