// kiln::Dispatch: the backend chosen at run time. A program compiled once over Dispatch (its
// model, its Autodiff<Dispatch> training loop) runs on whichever built backend a device
// names: "cpu", "vulkan", "cuda", "rocm", or Fusion over one of them ("fusion_cpu"...).
// A default-constructed device is the process default: set_default_device, else the
// KILN_BACKEND environment variable, else "cpu".
//
// A primitive holds its backend's own primitive; every op forwards to that backend (its
// fused kernels and overrides included: softmax, layer norm, the Adam step, max pooling's
// backward...), and operands on two backends are an error naming both. Declarations only:
// the forwarding is compiled once in the kiln_dispatch library, which links the backends.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/ops/optim.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

// The backends a Dispatch device can name.
enum class DispatchTarget : std::uint8_t { cpu, vulkan, fusion_cpu, fusion_vulkan, cuda, fusion_cuda, rocm, fusion_rocm };

// Which backend (and, where it has several, which of its devices) a tensor lives on.
struct DispatchDevice {
  std::optional<DispatchTarget> target;  // none: the process default
  int index = -1;                        // the backend's device index (Vulkan, CUDA, ROCm); -1: its default
  friend bool operator==(const DispatchDevice&, const DispatchDevice&) = default;
  // "cpu", "vulkan", "vulkan:1", "fusion_cpu", "fusion_vulkan:0", "cuda:1", "fusion_cuda";
  // "default" for the process default.
  std::string str() const;
  // The inverse of str(); a kiln::Error names what it cannot read and the backends built.
  static DispatchDevice parse(std::string_view name);
};

namespace dispatch {
// The backend's name ("fusion_cpu").
std::string_view target_name(DispatchTarget target);
// The targets this build of Kiln can run (those whose backend is built; a device may still
// be missing at run time: see unavailable_reason).
std::vector<DispatchTarget> built_targets();
// Why `device` cannot run here, or an empty string when it can (no Vulkan device...).
std::string unavailable_reason(const DispatchDevice& device);
}  // namespace dispatch

// A tensor on some backend: that backend's primitive, type-erased, and what every op reads
// without unwrapping it.
struct DispatchPrimitive {
  std::shared_ptr<const void> value;  // the target backend's Primitive
  DispatchTarget target = DispatchTarget::cpu;
  Shape shape;
  DType dtype = DType::f32;
};

struct Dispatch {
  using Device = DispatchDevice;
  using Primitive = DispatchPrimitive;
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;
  static constexpr std::string_view name = "dispatch";

  // The device that a default-constructed Device means (KILN_BACKEND, else "cpu", until set).
  static Device default_device();
  static void set_default_device(const Device& device);
  // The device with its target filled in (the default's where it has none).
  static Device resolve(const Device& device);

  static Primitive from_data(const TensorData& data, const Device& device);
  static TensorData into_data(const Primitive& p);
  static Primitive full(const Shape& shape, double value, DType dtype, const Device& device);
  static Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                          const Device& device);
  static Shape shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p);
  // Across backends through the host.
  static Primitive to_device(const Primitive& p, const Device& device);
  static Primitive cast(const Primitive& p, DType dtype);

  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);
  // The catalogue's ops and gradient formulas, each forwarded to the backend's own kernel
  // where it has one (the CPU's compile-time kernels), else its one-op program. Compiled for
  // every op of the catalogue in the kiln_dispatch library (backends/dispatch/src/elementwise.cpp).
  template <class Op> static Primitive unary(const Primitive& x);
  template <class Op> static Primitive binary(const Primitive& a, const Primitive& b);
  template <class Op> static Primitive binary_scalar(const Primitive& a, double b);
  // The same on operands the caller gives up: a handle nothing else holds lets go of its
  // primitive, which the backend may then write the result over.
  template <class Op> static Primitive unary(Primitive&& x);
  template <class Op> static Primitive binary(Primitive&& a, Primitive&& b);
  template <class Op> static Primitive binary_scalar(Primitive&& a, double b);
  static Primitive where(const Primitive& cond, const Primitive& a, const Primitive& b);
  template <class Op> static Primitive unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy);
  template <class Op>
  static Primitive binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
                                   ops::Operand operand);
  // The same on a dy the caller gives up, which the backend may write the gradient over.
  template <class Op> static Primitive unary_backward(const Primitive& x, const Primitive& y, Primitive&& dy);
  template <class Op>
  static Primitive binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, Primitive&& dy,
                                   ops::Operand operand);
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim);
  static Primitive reduce_all(const Primitive& x, ops::ReduceOp op);
  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim);
  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim);
  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending);
  static Primitive matmul(const Primitive& a, const Primitive& b);

  static Primitive reshape(const Primitive& x, const Shape& shape);
  static Primitive permute(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive expand(const Primitive& x, const Shape& shape);
  static Primitive slice(const Primitive& x, std::span<const ops::SliceRange> ranges);
  static Primitive slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& value);
  static Primitive flip(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive cat(std::span<const Primitive> xs, std::int64_t dim);
  static Primitive gather(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                           ops::ScatterMode mode);
  static Primitive index_select(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive index_add(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& values);

  // The backend's fused Adam step, or the composition of its ops where it has none. param, m
  // and v are given up as the CPU backend's are (a handle nothing else holds passes its
  // buffer on); on an error they are left as they were.
  static std::array<Primitive, 3> adam_step(Primitive&& param, const Primitive& grad, Primitive&& m, Primitive&& v,
                                            const ops::AdamStep& options);

  static Primitive conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                         const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                          const ops::Conv2dOptions& options);
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                       const ops::Pool2dOptions& options);
  static Primitive avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& options);
  static Primitive adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size);
  static Primitive adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy);
  static Primitive interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                               const ops::InterpolateOptions& options);
  static Primitive interpolate_backward(const Primitive& x, const Primitive& dy,
                                        const ops::InterpolateOptions& options);

  // The backend's fused softmax and layer norm, or the composition of its primitives where
  // it has none (the same composition the tensor API and nn::LayerNorm use).
  static Primitive softmax(const Primitive& x, std::int64_t dim, bool log);
  static Primitive softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log);
  static Primitive layer_norm(const Primitive& x, std::int64_t dims, double eps);
  static Primitive layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps);

  // The backend's linear layer and layer norm with its weight and bias (the provided
  // primitives: its override where it has one, the default otherwise).
  static Primitive linear(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          ops::LinearActivation activation);
  static Primitive layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                     const std::optional<Primitive>& bias, std::int64_t dims, double eps);
  static LayerNormGradients<Primitive> layer_norm_affine_backward(const Primitive& x,
                                                                  const std::optional<Primitive>& weight,
                                                                  const Primitive& dy, std::int64_t dims, double eps,
                                                                  bool bias);

  // Autodiff keeps a value for its backward pass: a Fusion target then computes it once.
  static void retain(const Primitive& p);
};

static_assert(Backend<Dispatch>, "kiln::Dispatch must satisfy the Backend concept");
static_assert(FusedSoftmax<Dispatch> && FusedLayerNorm<Dispatch>);

}  // namespace kiln
