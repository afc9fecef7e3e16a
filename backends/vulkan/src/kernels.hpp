// How the Vulkan backend's files get and run kernels. Two kinds:
// - the hand-written kernels of kernels/glsl, compiled to SPIR-V at build time and picked
//   by variant name (kernel_pipeline);
// - the elementwise kernel, generated at run time: one GLSL compute shader per value
//   expression and operand types, any shapes. Inputs are read through their strides
//   (broadcast dims have stride 0) from a small parameter buffer, so one compiled kernel
//   serves every shape.
// Private to backends/vulkan/src.
#pragma once

#include "context.hpp"

#include "codegen/kernel.hpp"
#include "kiln/codegen/expr.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::vulkan {

// An elementwise kernel: out0 = value0(in0, in1, ...), out1 = value1(...)..., where each
// value is a GLSL expression over variables in0... of each input's value type (bool inputs
// arrive as `bool`).
// Specs are made once and kept in a SpecCache, which gives each its key: a number that
// names the spec for as long as the process runs, so that the pipelines of a repeated op
// are found by that number without tracing, rendering or hashing any source.
struct ElementwiseSpec {
  std::vector<DType> inputs;
  std::vector<codegen::KernelOutput> outputs;  // one or more: each its dtype and GLSL value
  std::string helpers;  // GLSL functions the values call
  // f16 / bf16 operands move as their 16 bits (as uint) instead of converting to float and
  // back: copies keep every bit, NaN payloads included.
  bool raw_bits = false;
  // Scalar parameters p0, p1... of this type, read from the parameter buffer
  // (codegen::param_layout), so a new value is a new number there, not a new buffer.
  int params = 0;
  codegen::ScalarType param_type = codegen::ScalarType::f32;
  std::uint64_t key = 0;  // given by SpecCache; 0: not cached (the pipeline is found by its source)
};

// Specs by a slot number (a dtype, a pair of them, a program's id and output), each made by
// `make` the first time its slot is asked for and kept for the process. Thread-safe.
class SpecCache {
 public:
  // slots: the slot numbers are below it; 0: any.
  explicit SpecCache(std::size_t slots = 0);
  ~SpecCache();
  SpecCache(const SpecCache&) = delete;
  SpecCache& operator=(const SpecCache&) = delete;
  template <class Make> const ElementwiseSpec& get(std::uint64_t slot, Make&& make) {
    if (const ElementwiseSpec* spec = find(slot)) return *spec;
    return put(slot, make());
  }

 private:
  const ElementwiseSpec* find(std::uint64_t slot);
  const ElementwiseSpec& put(std::uint64_t slot, ElementwiseSpec spec);
  struct State;
  std::unique_ptr<State> state_;
};
// The slot of a pair of dtypes in a SpecCache of dtype_count * dtype_count slots.
constexpr std::size_t dtype_slot(DType a, DType b = DType::f32) {
  return static_cast<std::size_t>(a) * dtype_count + static_cast<std::size_t>(b);
}
// How many times an elementwise spec or shader was rendered (traced formulas rendered to
// GLSL, and shader texts built): kiln::vulkan::elementwise_renders() reports it.
void count_render();

// The SPIR-V words of a kernels/glsl variant, empty when the build has none of that name
// (defined in spirv_kernels.cpp, which backends/vulkan/CMakeLists.txt generates with the
// list of variants).
std::span<const std::uint32_t> spirv_kernel(std::string_view name);
// The pipeline of a kernels/glsl variant with `bindings` buffers; `op` and `dtype` name the
// request in the error when the build has no such variant.
const Pipeline& kernel_pipeline(std::string_view op, DType dtype, const std::string& variant,
                                std::uint32_t bindings);
// The dtype in variant names: dtype_name, but bool as u8 (its 0/1 bytes compare and move
// like u8) for the kernels that have no bool variant of their own.
std::string_view variant_dtype(DType dtype);
// The element size in the names of the kernels that only move elements ("32bit").
std::string variant_bits(DType dtype);

// A fresh contiguous tensor (uninitialized) on the context's device.
VulkanTensor empty(const Shape& shape, DType dtype);
// Runs the kernel over `shape` (the inputs broadcast to it) into a new contiguous tensor.
// `params`: the values of the spec's parameters.
VulkanTensor run_elementwise(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                             const Shape& shape, std::span<const double> params = {});
// Runs a kernel of several outputs over `shape` into new contiguous tensors, in one dispatch.
std::vector<VulkanTensor> run_elementwise_outputs(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                                                  const Shape& shape, std::span<const double> params = {});
// Runs the kernel into `out`, any strided view of a buffer (the inputs broadcast to its
// shape); writes only the elements the view shows.
void run_elementwise_into(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                          const VulkanTensor& out, std::span<const double> params = {});
// Appends the layout integers of parameters `params` of type t, from codegen::param_layout(inputs) on.
void append_params(std::vector<std::int32_t>& layout, std::size_t inputs, std::span<const double> params,
                   codegen::ScalarType t);
// The identity kernel of a dtype (copies).
const ElementwiseSpec& copy_spec(DType dtype);
// `x` itself when contiguous, else a contiguous copy.
VulkanTensor contiguous(const VulkanTensor& x);

// A fresh buffer holding `values` (a kernel's parameters).
std::shared_ptr<Buffer> upload_ints(std::span<const std::int32_t> values);
// Records `pipeline` over `invocations` invocations: workgroups of kWorkgroupSize, spread
// over x (up to the device's limit) and y; `op` names the op when there are too many.
void dispatch_invocations(std::string_view op, const Pipeline& pipeline,
                          std::span<const std::shared_ptr<Buffer>> buffers, std::int64_t invocations);
// Records `pipeline` over `groups` workgroups, spread over x and y as above.
void dispatch_groups(std::string_view op, const Pipeline& pipeline, std::span<const std::shared_ptr<Buffer>> buffers,
                     std::int64_t groups);

// v as a 32-bit int for a kernel's parameters (the kernels index with 32-bit ints); the
// error names the op and what v is ("a dim of", "an offset of"...).
std::int32_t checked_int(std::int64_t v, std::string_view what, std::string_view op = "vulkan");

// GLSL spelling of a dtype in arithmetic, in the generated kernels (bool: bool; f16 and
// bf16: float, converted by codegen/glsl_half.hpp's helpers).
std::string value_type(DType dtype);
// f16 and bf16: stored in 16 bits, computed in float. Kernels that do arithmetic take
// them as f32 and round the result once, like the CPU backend (see to_f32_and_back);
// kernels that only move elements take them as they are.
bool is_half(DType dtype);
// Checks that the device can hold `dtype` tensors (names the op and the missing feature).
void check_dtype_supported(std::string_view op, DType dtype);
// An exact GLSL literal of `value` as the value type of `dtype`.
std::string literal(double value, DType dtype);

}  // namespace kiln::vulkan
