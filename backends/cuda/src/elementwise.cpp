// Elementwise and row programs on the CUDA and ROCm backends: a program's outputs are rendered to
// CUDA C++ through the renderer table (src/codegen/cuda.hpp), wrapped by the shared kernel
// generators (codegen/kernel.hpp, codegen/row_kernel.hpp) and compiled by NVRTC. A program's
// spec is made once and kept by its id, and its kernels by the spec and the variant (flat or
// strided, which inputs are single elements), so a repeated program renders and hashes
// nothing. The layout (sizes, offsets, strides) and the scalar parameters are kernel
// arguments: a new shape or scalar value compiles nothing and uploads nothing.
#include "runtime.hpp"

#include "codegen/cuda.hpp"
#include "codegen/row_kernel.hpp"
#include "kiln/codegen/program.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace kiln {

using gpu::Tensor;

namespace KILN_GPU_NAMESPACE {
namespace {

using codegen::kFirstLayout;
using codegen::kLayoutStride;
using codegen::kMaxRank;

// What one generated kernel computes (the parts of codegen::ElementwiseKernel that do not
// depend on the layout variant).
struct Spec {
  std::vector<DType> inputs;
  std::vector<codegen::KernelOutput> outputs;
  std::string helpers;
  bool raw_bits = false;
  int params = 0;
  codegen::ScalarType param_type = codegen::ScalarType::f32;
};

// Specs kept for the process by a slot number (a program's id, a dtype pair...), each with
// its kernels by variant.
class SpecCache {
 public:
  struct Entry {
    Spec spec;
    std::mutex mutex;
    std::unordered_map<std::uint64_t, const Kernel*> kernels;  // by variant and device
  };
  template <class Make> Entry& get(std::uint64_t slot, Make&& make) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(slot); it != entries_.end()) return *it->second;
    }
    auto entry = std::make_unique<Entry>();
    entry->spec = make();
    std::lock_guard lock(mutex_);
    auto& kept = entries_[slot];
    if (!kept) kept = std::move(entry);  // another thread may have made it meanwhile
    return *kept;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Entry>> entries_;
};

// The CUDA kernel parameters of one launch: the layout words, then pointers and scalars,
// each stored here and pointed to by `pointers`.
struct Arguments {
  std::vector<long long> layout;
  std::vector<std::array<unsigned char, 8>> values;  // pointers and parameters
  std::vector<void*> pointers;

  void add_pointer(const void* p) {
    std::array<unsigned char, 8> v{};
    std::memcpy(v.data(), &p, sizeof p);
    values.push_back(v);
  }
  void add_param(double value, codegen::ScalarType t) {
    std::array<unsigned char, 8> v{};
    switch (t) {
      case codegen::ScalarType::f32: {
        const auto f = static_cast<float>(value);
        std::memcpy(v.data(), &f, sizeof f);
        break;
      }
      case codegen::ScalarType::f64: std::memcpy(v.data(), &value, sizeof value); break;
      case codegen::ScalarType::i32: {
        const auto i = static_cast<std::int32_t>(value);
        std::memcpy(v.data(), &i, sizeof i);
        break;
      }
      case codegen::ScalarType::i64: {
        const auto i = static_cast<std::int64_t>(value);
        std::memcpy(v.data(), &i, sizeof i);
        break;
      }
      case codegen::ScalarType::u8: v[0] = static_cast<std::uint8_t>(value); break;
      case codegen::ScalarType::boolean: KILN_FAIL(KILN_GPU_ID ": a bool program has no parameters");
    }
    values.push_back(v);
  }
  // The argument array, once everything is added (the vectors no longer move).
  void** finish() {
    pointers.clear();
    pointers.push_back(layout.data());
    for (auto& v : values) pointers.push_back(v.data());
    return pointers.data();
  }
};

// The kernel of `entry` in its variant on `device`: made by `source` the first time.
template <class Source>
const Kernel& variant_kernel(SpecCache::Entry& entry, std::uint64_t variant, int device, Source&& source) {
  const std::uint64_t slot = variant * 64 + static_cast<std::uint64_t>(device);
  {
    std::lock_guard lock(entry.mutex);
    if (auto it = entry.kernels.find(slot); it != entry.kernels.end()) return *it->second;
  }
  const Kernel& kernel = Context::get(device).kernel(source(), "kiln_elementwise");
  std::lock_guard lock(entry.mutex);
  entry.kernels.emplace(slot, &kernel);
  return kernel;
}

codegen::ElementwiseKernel kernel_of(const Spec& spec) {
  codegen::ElementwiseKernel k;
  k.name = "kiln_elementwise";
  k.inputs = spec.inputs;
  k.outputs = spec.outputs;
  k.helpers = spec.helpers;
  k.raw_bits = spec.raw_bits;
  k.params = spec.params;
  k.param_type = spec.param_type;
  k.workgroup_size = kBlock;
  return k;
}

// Runs the spec's kernel: outs[o] receives output o (several outputs: fresh contiguous
// tensors; one: any strided view).
void run(SpecCache::Entry& entry, std::span<const Tensor* const> inputs, std::span<const Tensor> outs,
         std::span<const double> params) {
  const Spec& spec = entry.spec;
  KILN_CHECK(inputs.size() == spec.inputs.size(), KILN_GPU_ID ": a kernel of {} inputs got {}", spec.inputs.size(),
             inputs.size());
  KILN_CHECK(params.size() == static_cast<std::size_t>(spec.params), KILN_GPU_ID ": a kernel of {} parameters got {}",
             spec.params, params.size());
  const Tensor& out = outs[0];
  const Shape& shape = out.shape;
  KILN_CHECK(shape.rank() <= kMaxRank, "elementwise: the " KILN_GPU_NAME " kernels take tensors of rank up to {}, got {}", kMaxRank,
             shape);
  for (const Tensor* t : inputs)
    KILN_CHECK(t->device == out.device, "elementwise: an input on " KILN_GPU_NAME " device {} and the output on device {}",
               t->device, out.device);
  const std::int64_t n = shape.numel();
  if (n == 0) return;

  // Flat when the output is the dense start of its buffer and every input is contiguous
  // with its shape or a single element; else every index goes through the strides.
  const bool out_strided = !out.is_contiguous() || out.offset != 0;
  KILN_CHECK(!out_strided || outs.size() == 1, KILN_GPU_ID ": a kernel of {} outputs writes fresh tensors, not views",
             outs.size());
  bool strided = out_strided;
  for (const Tensor* t : inputs) strided = strided || !(t->numel() == 1 || (t->shape == shape && t->is_contiguous()));
  std::vector<bool> scalar(inputs.size(), false);
  for (std::size_t k = 0; k < inputs.size() && !strided; ++k) scalar[k] = inputs[k]->numel() == 1;

  Arguments args;
  args.layout.assign(static_cast<std::size_t>(codegen::param_layout(inputs.size())), 0);
  args.layout[0] = n;
  args.layout[1] = static_cast<long long>(shape.rank());
  for (std::size_t d = 0; d < shape.rank(); ++d) args.layout[2 + d] = shape[d];
  std::vector<const StridedView*> views(inputs.begin(), inputs.end());
  if (out_strided) views.push_back(&out);
  for (std::size_t k = 0; k < views.size(); ++k) {
    const StridedView& t = *views[k];
    const std::size_t base = static_cast<std::size_t>(kFirstLayout) + k * static_cast<std::size_t>(kLayoutStride);
    args.layout[base] = t.offset;
    if (!strided) continue;
    const std::size_t lead = shape.rank() - t.shape.rank();  // broadcast right-aligned
    for (std::size_t d = 0; d < t.shape.rank(); ++d) args.layout[base + 1 + lead + d] = t.shape[d] == 1 ? 0 : t.strides[d];
  }
  // Input and output pointers are the buffers' starts: offsets are in the layout.
  for (const Tensor* t : inputs) args.add_pointer(t->buffer->data);
  for (const Tensor& o : outs) args.add_pointer(o.buffer->data);
  for (const double p : params) args.add_param(p, spec.param_type);
  KILN_CHECK(args.layout.size() * 8 + args.values.size() * 8 <= 32000,
             "elementwise: a program of {} inputs and {} outputs exceeds the " KILN_GPU_NAME " kernel argument space", inputs.size(),
             outs.size());

  std::uint64_t variant = (strided ? 1u : 0u) | (out_strided ? 2u : 0u);
  for (std::size_t k = 0; k < scalar.size(); ++k) variant |= scalar[k] ? std::uint64_t{4} << k : 0;
  const Kernel& kernel = variant_kernel(entry, variant, out.device, [&] {
    return gpu::prelude() + codegen::elementwise_kernel(gpu::dialect(), kernel_of(spec),
                                                                 {strided, out_strided, scalar});
  });
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  Context::get(out.device).launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), args.finish());
}

// The spec of a program: one kernel writing all its outputs.
Spec spec_of(const codegen::Program& program) {
  codegen::ElementwiseKernel k = codegen::program_kernel(codegen::cuda(), program, 0, program.outputs().size());
  return Spec{std::move(k.inputs), std::move(k.outputs), std::move(k.helpers), k.raw_bits, k.params, k.param_type};
}

SpecCache::Entry& copy_entry(DType dtype) {
  static SpecCache cache;
  return cache.get(static_cast<std::uint64_t>(dtype), [&] {
    return Spec{{dtype}, {{dtype, "in0", dtype == DType::boolean}}, "", true};
  });
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = empty(x.shape, x.dtype, x.device);
  copy_into(x, out);
  return out;
}

void copy_into(const Tensor& src, const Tensor& dst) {
  KILN_CHECK(src.dtype == dst.dtype, KILN_GPU_ID ": copying {} into {}", src.dtype, dst.dtype);
  const std::array<const Tensor*, 1> inputs{&src};
  run(copy_entry(src.dtype), inputs, std::span(&dst, 1), {});
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype == dtype) return x;
  static SpecCache cache;
  auto& entry = cache.get(static_cast<std::uint64_t>(x.dtype) * dtype_count + static_cast<std::uint64_t>(dtype), [&] {
    const std::string_view to = codegen::detail::cuda_value_type(dtype);
    std::string value = "in0";
    bool is_bool = false;
    if (dtype == DType::boolean) {
      value = x.dtype == DType::boolean ? "in0" : "(in0 != 0)";
      is_bool = true;
    } else if (x.dtype == DType::boolean) {
      value = fmt::format("(in0 ? ({0})1 : ({0})0)", to);
    }
    return Spec{{x.dtype}, {{dtype, value, is_bool}}, "", false};
  });
  Tensor out = empty(x.shape, dtype, x.device);
  const std::array<const Tensor*, 1> inputs{&x};
  run(entry, inputs, std::span(&out, 1), {});
  return out;
}

}  // namespace KILN_GPU_NAMESPACE

std::vector<Gpu::Primitive> Gpu::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                               std::span<const double> params) {
  const Shape shape = codegen::check_elementwise_call<Gpu>(program, inputs, params);
  KILN_CHECK(inputs.size() <= max_program_inputs,
             "elementwise: the " KILN_GPU_NAME " backend runs programs of up to {} inputs, got {} ({})", max_program_inputs,
             inputs.size(), program.key());
  static gpu::SpecCache specs;
  auto& entry = specs.get(program.id(), [&] { return gpu::spec_of(program); });
  const int device = inputs.empty() ? gpu::Context::get().index() : inputs[0].device;
  std::vector<const Tensor*> all;
  for (const Primitive& x : inputs) all.push_back(&x);
  std::vector<Primitive> outs;
  for (const codegen::ProgramOutput& o : program.outputs()) outs.push_back(gpu::empty(shape, o.dtype, device));
  gpu::run(entry, all, outs, params);
  return outs;
}

std::vector<Gpu::Primitive> Gpu::row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                               std::span<const double> params, const Shape& domain) {
  codegen::check_row_program_call<Gpu>(program, inputs, params, domain);
  KILN_CHECK(inputs.size() <= max_row_program_inputs,
             "row_program: the " KILN_GPU_NAME " backend runs programs of up to {} inputs, got {} ({})", max_row_program_inputs,
             inputs.size(), program.key());
  KILN_CHECK(domain.rank() >= 1 && domain.rank() <= codegen::kMaxRank,
             "row_program: the " KILN_GPU_NAME " backend runs domains of rank 1 to {}, got {}", codegen::kMaxRank, domain);
  const int device = inputs.empty() ? gpu::Context::get().index() : inputs[0].device;
  const std::int64_t cols = domain[domain.rank() - 1];
  const std::int64_t rows = cols == 0 ? 0 : domain.numel() / cols;
  Shape row_shape = domain;
  row_shape[row_shape.rank() - 1] = 1;

  // Kernels by program and output (one row kernel per output), and device.
  static std::mutex mutex;
  static std::unordered_map<std::uint64_t, const gpu::Kernel*> kernels;
  auto kernel_for = [&](std::size_t k) -> const gpu::Kernel& {
    const std::uint64_t slot = (program.id() << 8 | k) * 64 + static_cast<std::uint64_t>(device);
    {
      std::lock_guard lock(mutex);
      if (auto it = kernels.find(slot); it != kernels.end()) return *it->second;
    }
    codegen::RowKernel kernel = codegen::program_row_kernel(codegen::cuda(), program, k, gpu::kBlock);
    kernel.kernel.name = "kiln_elementwise";
    kernel.wide_sums = true;
    const std::string source =
        gpu::prelude() + codegen::row_kernel(codegen::cuda(), gpu::dialect(), kernel);
    const gpu::Kernel& compiled = gpu::Context::get(device).kernel(source, "kiln_elementwise");
    std::lock_guard lock(mutex);
    return *kernels.emplace(slot, &compiled).first->second;
  };

  // The layout (codegen/row_kernel.hpp): rows, rank, dims, each input's offset and strides.
  gpu::Arguments args;
  args.layout.assign(static_cast<std::size_t>(codegen::param_layout(inputs.size())), 0);
  args.layout[0] = rows;
  args.layout[1] = static_cast<long long>(domain.rank());
  for (std::size_t d = 0; d < domain.rank(); ++d) args.layout[2 + d] = domain[d];
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    KILN_CHECK(t.device == device, "row_program: inputs on " KILN_GPU_NAME " devices {} and {}", device, t.device);
    const std::size_t base = static_cast<std::size_t>(codegen::kFirstLayout) + k * codegen::kLayoutStride;
    args.layout[base] = t.offset;
    const std::size_t lead = domain.rank() - t.shape.rank();
    for (std::size_t d = 0; d < t.shape.rank(); ++d) args.layout[base + 1 + lead + d] = t.shape[d] == 1 ? 0 : t.strides[d];
  }
  for (const Tensor& t : inputs) args.add_pointer(t.buffer->data);
  KILN_CHECK(rows <= 0x7fffffff, "row_program: {} rows are too many for one " KILN_GPU_NAME " launch", rows);

  std::vector<Primitive> results;
  for (std::size_t k = 0; k < program.outputs().size(); ++k) {
    const codegen::ProgramOutput& out = program.outputs()[k];
    Tensor result = gpu::empty(out.per_row ? row_shape : domain, out.dtype, device);
    if (rows > 0) {
      gpu::Arguments launch = args;
      launch.add_pointer(result.buffer->data);
      for (const double p : params) launch.add_param(p, program.type());
      gpu::Context::get(device).launch(kernel_for(k), dim3(static_cast<unsigned>(rows)), dim3(gpu::kBlock),
                                        launch.finish());
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace kiln
