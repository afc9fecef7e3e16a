// The kernels/glsl lookup, and the generated elementwise kernel: shader text, parameter
// buffer, dispatch.
#include "kernels.hpp"

#include "codegen/glsl.hpp"

#include <fmt/format.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace kiln::vulkan {
namespace {

using codegen::kMaxRank;
constexpr int kInputParams = codegen::kLayoutStride;
constexpr int kFirstInput = codegen::kFirstLayout;

// The shader of a spec, from the shared kernel generator with GLSL's dialect
// (src/codegen/kernel.hpp). Strided: each input's index from the output index and its
// strides; flat: offset + i. scalar[k]: input k is a single element (flat kernels only).
std::string shader(const ElementwiseSpec& spec, bool strided, bool out_strided, const std::vector<bool>& scalar) {
  count_render();
  codegen::ElementwiseKernel kernel;
  kernel.inputs = spec.inputs;
  kernel.outputs = spec.outputs;
  kernel.helpers = spec.helpers;
  kernel.raw_bits = spec.raw_bits;
  kernel.params = spec.params;
  kernel.param_type = spec.param_type;
  kernel.workgroup_size = static_cast<int>(kWorkgroupSize);
  return codegen::elementwise_kernel(codegen::glsl_kernels(), kernel, {strided, out_strided, scalar});
}

std::atomic<std::uint64_t> renders{0};
std::atomic<std::uint64_t> next_spec_key{1};

// The pipelines of cached specs, by the spec's key and the kernel's variant (strided or
// flat, output strided, which inputs are single elements): a repeated op finds its pipeline
// here without building its shader text. The pipelines themselves belong to the Context.
class PipelineIndex {
 public:
  static PipelineIndex& get() {
    static PipelineIndex index;
    return index;
  }
  template <class Make> const Pipeline& find_or_make(std::uint64_t key, std::uint64_t variant, Make&& make) {
    const Key k{key, variant};
    {
      std::lock_guard lock(mutex_);
      if (auto it = pipelines_.find(k); it != pipelines_.end()) return *it->second;
    }
    const Pipeline& pipeline = make();
    std::lock_guard lock(mutex_);
    pipelines_.emplace(k, &pipeline);
    return pipeline;
  }

 private:
  struct Key {
    std::uint64_t spec, variant;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const { return std::hash<std::uint64_t>{}(k.spec * 0x9E3779B97F4A7C15ull ^ k.variant); }
  };
  std::mutex mutex_;
  std::unordered_map<Key, const Pipeline*, Hash> pipelines_;
};

}  // namespace

void count_render() { renders.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t elementwise_renders() { return renders.load(std::memory_order_relaxed); }

struct SpecCache::State {
  std::mutex mutex;
  std::size_t slots = 0;  // 0: any slot number
  std::unordered_map<std::uint64_t, std::unique_ptr<ElementwiseSpec>> specs;
};
SpecCache::SpecCache(std::size_t slots) : state_(std::make_unique<State>()) { state_->slots = slots; }
SpecCache::~SpecCache() = default;
const ElementwiseSpec* SpecCache::find(std::uint64_t slot) {
  std::lock_guard lock(state_->mutex);
  KILN_CHECK(state_->slots == 0 || slot < state_->slots, "vulkan: spec slot {} of {}", slot, state_->slots);
  const auto it = state_->specs.find(slot);
  return it == state_->specs.end() ? nullptr : it->second.get();
}
const ElementwiseSpec& SpecCache::put(std::uint64_t slot, ElementwiseSpec spec) {
  std::lock_guard lock(state_->mutex);
  auto& kept = state_->specs[slot];
  if (!kept) {  // another thread may have made it meanwhile: the first one stays
    spec.key = next_spec_key.fetch_add(1, std::memory_order_relaxed);
    kept = std::make_unique<ElementwiseSpec>(std::move(spec));
  }
  return *kept;
}

const Pipeline& kernel_pipeline(std::string_view op, DType dtype, const std::string& variant,
                                std::uint32_t bindings) {
  const std::span<const std::uint32_t> words = spirv_kernel(variant);
  KILN_CHECK(!words.empty(),
             "{}: the Vulkan backend was built without the kernel {} for {} tensors (kernels/glsl variants are "
             "listed in backends/vulkan/CMakeLists.txt)",
             op, variant, dtype);
  return Context::get().pipeline(variant, words, bindings);
}

std::string_view variant_dtype(DType dtype) { return dtype == DType::boolean ? "u8" : dtype_name(dtype); }

std::string variant_bits(DType dtype) { return fmt::format("{}bit", dtype_size(dtype) * 8); }

std::int32_t checked_int(std::int64_t v, std::string_view what, std::string_view op) {
  KILN_CHECK(v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max(),
             "{}: {} {} exceeds the 32-bit indices of the Vulkan kernels", op, what, v);
  return static_cast<std::int32_t>(v);
}

std::shared_ptr<Buffer> upload_ints(std::span<const std::int32_t> values) {
  Context& context = Context::get();
  auto buffer = context.allocate(std::max<std::size_t>(1, values.size()) * sizeof(std::int32_t));
  if (!values.empty()) context.upload(*buffer, 0, values.data(), values.size_bytes());
  return buffer;
}

void dispatch_invocations(std::string_view op, const Pipeline& pipeline,
                          std::span<const std::shared_ptr<Buffer>> buffers, std::int64_t invocations) {
  dispatch_groups(op, pipeline, buffers, (invocations + kWorkgroupSize - 1) / kWorkgroupSize);
}

void dispatch_groups(std::string_view op, const Pipeline& pipeline, std::span<const std::shared_ptr<Buffer>> buffers,
                     std::int64_t groups) {
  Context& context = Context::get();
  const std::int64_t x = std::max<std::int64_t>(1, std::min<std::int64_t>(groups, context.max_groups_x()));
  const std::int64_t y = (groups + x - 1) / x;
  KILN_CHECK(y <= 65535, "{}: {} workgroups are too many for one dispatch", op, groups);
  context.dispatch(pipeline, buffers, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y));
}

std::string value_type(DType dtype) { return std::string(codegen::detail::glsl_value_type(dtype)); }

bool is_half(DType dtype) { return codegen::is_half(dtype); }

void check_dtype_supported(std::string_view op, DType dtype) {
  const Features& f = Context::get().features();
  KILN_CHECK(!is_half(dtype) || f.float16_storage,
             "{}: this Vulkan device lacks 16-bit storage (storageBuffer16BitAccess) for {} tensors", op, dtype);
  KILN_CHECK(dtype != DType::f64 || f.float64, "{}: this Vulkan device has no shaderFloat64 for f64 tensors", op);
  KILN_CHECK(dtype != DType::i64 || f.int64, "{}: this Vulkan device has no shaderInt64 for i64 tensors", op);
  KILN_CHECK((dtype != DType::u8 && dtype != DType::boolean) || f.int8,
             "{}: this Vulkan device lacks 8-bit storage for {} tensors", op, dtype);
}

std::string literal(double value, DType dtype) {
  switch (dtype) {
    case DType::f32: {
      const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(value));
      return fmt::format("uintBitsToFloat({}u)", bits);
    }
    case DType::f64: {
      const auto bits = std::bit_cast<std::uint64_t>(value);
      return fmt::format("packDouble2x32(uvec2({}u, {}u))", bits & 0xffffffffu, bits >> 32);
    }
    case DType::i32: return fmt::format("int({})", static_cast<std::int32_t>(value));
    case DType::i64: return fmt::format("int64_t({}l)", static_cast<std::int64_t>(value));
    case DType::u8: return fmt::format("uint8_t({})", static_cast<unsigned>(static_cast<std::uint8_t>(value)));
    case DType::boolean: return value != 0.0 ? "true" : "false";
    // The float that the 16-bit value rounds to (then stored exactly).
    case DType::f16: return literal(static_cast<float>(Half(static_cast<float>(value))), DType::f32);
    case DType::bf16: return literal(static_cast<float>(BFloat16(static_cast<float>(value))), DType::f32);
  }
  KILN_FAIL("vulkan: no literal for dtype {}", static_cast<int>(dtype));
}

VulkanTensor empty(const Shape& shape, DType dtype) {
  for (auto d : shape) KILN_CHECK(d >= 0, "vulkan: negative dimension in shape {}", shape);
  check_dtype_supported("empty", dtype);
  VulkanTensor t;
  t.buffer = Context::get().allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  t.shape = shape;
  t.strides = shape.contiguous_strides();
  t.dtype = dtype;
  return t;
}

namespace {

// Runs the kernel: outs[o] receives output o (several outputs: each a fresh contiguous
// tensor; one: any strided view).
void run_kernel(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                std::span<const VulkanTensor> outs, std::span<const double> params) {
  KILN_CHECK(inputs.size() == spec.inputs.size(), "vulkan: a kernel of {} inputs got {}", spec.inputs.size(),
             inputs.size());
  KILN_CHECK(params.size() == static_cast<std::size_t>(spec.params), "vulkan: a kernel of {} parameters got {}",
             spec.params, params.size());
  KILN_CHECK(outs.size() == spec.outputs.size(), "vulkan: a kernel of {} outputs got {}", spec.outputs.size(),
             outs.size());
  for (std::size_t o = 0; o < outs.size(); ++o)
    KILN_CHECK(outs[o].dtype == spec.outputs[o].dtype && outs[o].shape == outs[0].shape,
               "vulkan: a kernel's output {} of {} {} got {} {}", o, spec.outputs[o].dtype, outs[0].shape,
               outs[o].dtype, outs[o].shape);
  const VulkanTensor& out = outs[0];
  const Shape& shape = out.shape;
  KILN_CHECK(shape.rank() <= kMaxRank, "vulkan: tensors of rank {} (at most {})", shape.rank(), kMaxRank);
  const std::int64_t n = shape.numel();
  if (n == 0) return;

  // Flat when the output is contiguous and every input is contiguous with its shape or is
  // a single element; else every index goes through the strides.
  // The output goes through the strided path whenever it is not the buffer's start laid
  // out densely: a contiguous slice of a larger buffer (cat, slice_assign) has an offset.
  const bool out_strided = !out.is_contiguous() || out.offset != 0;
  KILN_CHECK(!out_strided || outs.size() == 1, "vulkan: a kernel of {} outputs writes fresh tensors, not views",
             outs.size());
  bool strided = out_strided;
  for (const VulkanTensor* t : inputs)
    strided = strided || !(t->numel() == 1 || (t->shape == shape && t->is_contiguous()));

  std::vector<const StridedView*> views(inputs.begin(), inputs.end());
  if (out_strided) views.push_back(&out);
  std::vector<std::int32_t> layout(static_cast<std::size_t>(kFirstInput + kInputParams * views.size()), 0);
  layout[0] = checked_int(n, "a tensor of");
  layout[1] = static_cast<std::int32_t>(shape.rank());
  for (std::size_t d = 0; d < shape.rank(); ++d) layout[2 + d] = checked_int(shape[d], "a dim of");
  for (std::size_t k = 0; k < views.size(); ++k) {
    const StridedView& t = *views[k];
    const std::size_t base = static_cast<std::size_t>(kFirstInput) + k * kInputParams;
    layout[base] = checked_int(t.offset, "an offset of");
    if (!strided) continue;
    // Broadcast t's dims against shape (right-aligned; size-1 dims read with stride 0).
    const std::size_t lead = shape.rank() - t.shape.rank();
    for (std::size_t d = 0; d < t.shape.rank(); ++d) {
      const std::int64_t stride = t.shape[d] == 1 ? 0 : t.strides[d];
      KILN_CHECK(std::abs(stride) <= std::numeric_limits<std::int32_t>::max(), "vulkan: stride {} is too large",
                 stride);
      layout[base + 1 + lead + d] = static_cast<std::int32_t>(stride);
    }
  }
  append_params(layout, inputs.size(), params, spec.param_type);
  Context& context = Context::get();
  auto param_buffer = upload_ints(layout);

  std::vector<bool> scalar(inputs.size(), false);  // only the flat kernels tell them apart
  for (std::size_t k = 0; k < inputs.size() && !strided; ++k) scalar[k] = inputs[k]->numel() == 1;
  std::vector<std::shared_ptr<Buffer>> buffers{param_buffer};
  for (const VulkanTensor& o : outs) buffers.push_back(o.buffer);
  for (const VulkanTensor* t : inputs) buffers.push_back(t->buffer);
  const auto bindings = static_cast<std::uint32_t>(buffers.size());
  auto make = [&]() -> const Pipeline& { return context.pipeline(shader(spec, strided, out_strided, scalar), bindings); };
  std::uint64_t variant = (strided ? 1u : 0u) | (out_strided ? 2u : 0u);
  for (std::size_t k = 0; k < scalar.size(); ++k) variant |= scalar[k] ? std::uint64_t{4} << k : 0;
  const Pipeline& pipeline = spec.key != 0 ? PipelineIndex::get().find_or_make(spec.key, variant, make) : make();
  dispatch_invocations("vulkan elementwise", pipeline, buffers, n);
}

}  // namespace

VulkanTensor run_elementwise(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                             const Shape& shape, std::span<const double> params) {
  KILN_CHECK(spec.outputs.size() == 1, "vulkan: a kernel of {} outputs run for one", spec.outputs.size());
  VulkanTensor out = empty(shape, spec.outputs[0].dtype);
  run_elementwise_into(spec, inputs, out, params);
  return out;
}

std::vector<VulkanTensor> run_elementwise_outputs(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                                                  const Shape& shape, std::span<const double> params) {
  std::vector<VulkanTensor> outs;
  outs.reserve(spec.outputs.size());
  for (const codegen::KernelOutput& o : spec.outputs) outs.push_back(empty(shape, o.dtype));
  run_kernel(spec, inputs, outs, params);
  return outs;
}

void append_params(std::vector<std::int32_t>& layout, std::size_t inputs, std::span<const double> params,
                   codegen::ScalarType t) {
  if (params.empty()) return;
  layout.resize(static_cast<std::size_t>(codegen::param_layout(inputs)), 0);
  for (const double p : params) {
    const auto words = codegen::param_words(p, t);
    layout.insert(layout.end(), words.begin(), words.end());
  }
}

void run_elementwise_into(const ElementwiseSpec& spec, std::span<const VulkanTensor* const> inputs,
                          const VulkanTensor& out, std::span<const double> params) {
  run_kernel(spec, inputs, std::span(&out, 1), params);
}


const ElementwiseSpec& copy_spec(DType dtype) {
  static SpecCache cache(dtype_count);
  return cache.get(static_cast<std::size_t>(dtype),
                   [&] { return ElementwiseSpec{{dtype}, {{dtype, "in0", dtype == DType::boolean}}, "", true}; });
}

VulkanTensor contiguous(const VulkanTensor& x) {
  if (x.is_contiguous()) return x;
  const std::array<const VulkanTensor*, 1> inputs{&x};
  return run_elementwise(copy_spec(x.dtype), inputs, x.shape);
}

}  // namespace kiln::vulkan
