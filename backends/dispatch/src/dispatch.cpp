// kiln::Dispatch (kiln/dispatch/backend.hpp): each op finds the backend its operands live on
// and forwards to it. Compiled once here, over the backends this build has.
#include "forward.hpp"

#include "kiln/optim/adam.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <mutex>

namespace kiln {
namespace dispatch {
namespace {

// ---- compositions for backends without a fused kernel: the same as the tensor API's and
// nn::LayerNorm's (kiln/tensor/elementwise.hpp, kiln/nn/norm.hpp).

template <class B> using P = typename B::Primitive;

template <class B> P<B> softmax_of(const P<B>& x, std::int64_t dim, bool log) {
  if constexpr (FusedSoftmax<B>) {
    return B::softmax(x, dim, log);
  } else {
    const P<B> shifted = provided::binary<B, ops::Sub>(x, B::reduce(x, ops::ReduceOp::max, dim));
    const P<B> e = provided::unary<B, ops::Exp>(shifted);
    const P<B> sum = B::reduce(e, ops::ReduceOp::sum, dim);
    if (log) return provided::binary<B, ops::Sub>(shifted, provided::unary<B, ops::Log>(sum));
    return provided::binary<B, ops::Div>(e, sum);
  }
}
template <class B> P<B> softmax_backward_of(const P<B>& y, const P<B>& dy, std::int64_t dim, bool log) {
  if constexpr (FusedSoftmax<B>) {
    return B::softmax_backward(y, dy, dim, log);
  } else if (log) {  // dx = dy - exp(y) * sum(dy)
    const P<B> sum = B::reduce(dy, ops::ReduceOp::sum, dim);
    return provided::binary<B, ops::Sub>(dy, provided::binary<B, ops::Mul>(provided::unary<B, ops::Exp>(y), sum));
  } else {  // dx = y * (dy - sum(dy * y))
    const P<B> sum = B::reduce(provided::binary<B, ops::Mul>(dy, y), ops::ReduceOp::sum, dim);
    return provided::binary<B, ops::Mul>(y, provided::binary<B, ops::Sub>(dy, sum));
  }
}

// x as [rows, n] over its last `dims` dims, for the layer norm compositions.
template <class B> std::pair<P<B>, std::int64_t> rows_of(const P<B>& x, std::int64_t dims, std::string_view op) {
  const Shape shape = B::shape(x);
  KILN_CHECK(dims >= 1 && dims <= static_cast<std::int64_t>(shape.rank()), "{}: {} normalized dims of a tensor of shape {}",
             op, dims, shape);
  std::int64_t n = 1;
  for (std::size_t d = shape.rank() - static_cast<std::size_t>(dims); d < shape.rank(); ++d) n *= shape[d];
  return {B::reshape(x, Shape{shape.numel() / std::max<std::int64_t>(n, 1), n}), n};
}
template <class B> P<B> mean_rows(const P<B>& x, std::int64_t n) {
  return provided::binary_scalar<B, ops::Mul>(B::reduce(x, ops::ReduceOp::sum, 1), 1.0 / static_cast<double>(n));
}
template <class B> P<B> layer_norm_of(const P<B>& x, std::int64_t dims, double eps) {
  if constexpr (FusedLayerNorm<B>) {
    return B::layer_norm(x, dims, eps);
  } else {
    const auto [rows, n] = rows_of<B>(x, dims, "layer_norm");
    const P<B> centered = provided::binary<B, ops::Sub>(rows, mean_rows<B>(rows, n));
    const P<B> var = mean_rows<B>(provided::binary<B, ops::Mul>(centered, centered), n);
    const P<B> rstd = provided::unary<B, ops::Rsqrt>(provided::binary_scalar<B, ops::Add>(var, eps));
    return B::reshape(provided::binary<B, ops::Mul>(centered, rstd), B::shape(x));
  }
}
// dx = rstd * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * rstd.
template <class B> P<B> layer_norm_backward_of(const P<B>& x, const P<B>& dy, std::int64_t dims, double eps) {
  if constexpr (FusedLayerNorm<B>) {
    return B::layer_norm_backward(x, dy, dims, eps);
  } else {
    KILN_CHECK(B::shape(x) == B::shape(dy), "layer_norm_backward: dy has shape {}, x {}", B::shape(dy), B::shape(x));
    const auto [rows, n] = rows_of<B>(x, dims, "layer_norm_backward");
    const P<B> g = B::reshape(dy, B::shape(rows));
    const P<B> centered = provided::binary<B, ops::Sub>(rows, mean_rows<B>(rows, n));
    const P<B> var = mean_rows<B>(provided::binary<B, ops::Mul>(centered, centered), n);
    const P<B> rstd = provided::unary<B, ops::Rsqrt>(provided::binary_scalar<B, ops::Add>(var, eps));
    const P<B> xhat = provided::binary<B, ops::Mul>(centered, rstd);
    const P<B> inner = provided::binary<B, ops::Sub>(
        provided::binary<B, ops::Sub>(g, mean_rows<B>(g, n)),
        provided::binary<B, ops::Mul>(xhat, mean_rows<B>(provided::binary<B, ops::Mul>(g, xhat), n)));
    return B::reshape(provided::binary<B, ops::Mul>(rstd, inner), B::shape(x));
  }
}

template <class B>
std::array<P<B>, 3> adam_step_of(P<B>&& param, const P<B>& grad, P<B>&& m, P<B>&& v, const ops::AdamStep& options) {
  if constexpr (optim::FusesAdamStep<B>) {
    return B::adam_step(std::move(param), grad, std::move(m), std::move(v), options);
  } else {  // the optimizer's composition, on the flattened tensors
    const Shape shape = B::shape(param);
    auto flat = [&](const P<B>& t) { return Tensor<B, 1>(B::reshape(t, Shape{B::shape(t).numel()})); };
    const auto s = optim::adam_step<B, 1>(flat(param), flat(grad), flat(m), flat(v), options);
    return {B::reshape(s.param.primitive(), shape), B::reshape(s.m.primitive(), shape), B::reshape(s.v.primitive(), shape)};
  }
}

std::mutex default_mutex;
std::optional<DispatchDevice> default_device;

}  // namespace

std::string_view target_name(DispatchTarget target) { return kNames.at(static_cast<std::size_t>(target)); }

std::vector<DispatchTarget> built_targets() {
  std::vector<DispatchTarget> built{Target::cpu, Target::fusion_cpu};
#if defined(KILN_DISPATCH_VULKAN)
  built.insert(built.end(), {Target::vulkan, Target::fusion_vulkan});
#endif
#if defined(KILN_DISPATCH_CUDA)
  built.insert(built.end(), {Target::cuda, Target::fusion_cuda});
#endif
#if defined(KILN_DISPATCH_ROCM)
  built.insert(built.end(), {Target::rocm, Target::fusion_rocm});
#endif
  return built;
}

std::string unavailable_reason(const DispatchDevice& device) {
  const DispatchDevice d = Dispatch::resolve(device);
  const auto built = built_targets();
  if (std::find(built.begin(), built.end(), *d.target) == built.end())
    return fmt::format("{} is not built into this Kiln (built: {})", target_name(*d.target), built_names());
#if defined(KILN_DISPATCH_VULKAN)
  if (*d.target == Target::vulkan || *d.target == Target::fusion_vulkan) {
    const std::string why = vulkan::unavailable_reason();
    if (!why.empty()) return "no Vulkan device: " + why;
  }
#endif
#if defined(KILN_DISPATCH_CUDA)
  if (*d.target == Target::cuda || *d.target == Target::fusion_cuda) return cuda::unavailable_reason();
#endif
#if defined(KILN_DISPATCH_ROCM)
  if (*d.target == Target::rocm || *d.target == Target::fusion_rocm) return rocm::unavailable_reason();
#endif
  return {};
}

}  // namespace dispatch

using dispatch::on;
using dispatch::target;
using dispatch::unwrap;
using dispatch::wrap;
using dispatch::wrap_all;
using dispatch::unwrap_all;

std::string DispatchDevice::str() const {
  if (!target) return "default";
  const std::string name(dispatch::target_name(*target));
  return index < 0 ? name : fmt::format("{}:{}", name, index);
}

DispatchDevice DispatchDevice::parse(std::string_view text) {
  if (text == "default") return {};
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  DispatchDevice d;
  for (std::size_t k = 0; k < dispatch::kNames.size(); ++k)
    if (dispatch::kNames[k] == name) d.target = static_cast<DispatchTarget>(k);
  KILN_CHECK(d.target.has_value(), "dispatch: no backend named '{}' (built: {})", name, dispatch::built_names());
  if (colon != std::string_view::npos) {
    const std::string_view number = text.substr(colon + 1);
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), d.index);
    KILN_CHECK(error == std::errc() && end == number.data() + number.size() && d.index >= 0,
               "dispatch: '{}' is not a device (a backend, then optionally ':' and a device index)", text);
  }
  return d;
}

Dispatch::Device Dispatch::default_device() {
  const std::lock_guard lock(dispatch::default_mutex);
  if (!dispatch::default_device) {
    const char* env = std::getenv("KILN_BACKEND");
    DispatchDevice d{DispatchTarget::cpu};
    if (env != nullptr && *env != '\0') {
      d = DispatchDevice::parse(env);
      KILN_CHECK(d.target.has_value(), "KILN_BACKEND={}: name a backend (built: {})", env, dispatch::built_names());
    }
    dispatch::default_device = d;
  }
  return *dispatch::default_device;
}

void Dispatch::set_default_device(const Device& device) {
  KILN_CHECK(device.target.has_value(), "Dispatch::set_default_device: name a backend, got the default itself");
  const std::lock_guard lock(dispatch::default_mutex);
  dispatch::default_device = device;
}

Dispatch::Device Dispatch::resolve(const Device& device) { return device.target ? device : default_device(); }

Dispatch::Device Dispatch::device(const Primitive& p) {
  return on(target("device", {&p}), [&]<class B>() {
    DispatchDevice d{p.target};
    if constexpr (!std::is_same_v<typename B::Device, CpuDevice>) d.index = B::device(unwrap<B>(p)).index;
    return d;
  });
}

Dispatch::Primitive Dispatch::from_data(const TensorData& data, const Device& device) {
  return dispatch::on_device(device, [&]<class B>(const typename B::Device& d) { return wrap<B>(B::from_data(data, d)); });
}
TensorData Dispatch::into_data(const Primitive& p) {
  return on(target("into_data", {&p}), [&]<class B>() { return B::into_data(unwrap<B>(p)); });
}
Dispatch::Primitive Dispatch::full(const Shape& shape, double value, DType dtype, const Device& device) {
  return dispatch::on_device(device, [&]<class B>(const typename B::Device& d) {
    return wrap<B>(provided::full<B>(shape, value, dtype, d));
  });
}
Dispatch::Primitive Dispatch::random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                                     const Device& device) {
  return dispatch::on_device(device, [&]<class B>(const typename B::Device& d) {
    return wrap<B>(provided::random<B>(shape, distribution, stream, dtype, d));
  });
}
Dispatch::Primitive Dispatch::to_device(const Primitive& p, const Device& device) {
  const Device to = resolve(device);
  if (*to.target == target("to_device", {&p})) {
    return on(p.target, [&]<class B>() { return wrap<B>(B::to_device(unwrap<B>(p), dispatch::device_of<B>(to))); });
  }
  return from_data(into_data(p), to);
}
Dispatch::Primitive Dispatch::cast(const Primitive& p, DType dtype) {
  return on(target("cast", {&p}), [&]<class B>() { return wrap<B>(B::cast(unwrap<B>(p), dtype)); });
}

std::vector<Dispatch::Primitive> Dispatch::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                                       std::span<const double> params) {
  return on(target("elementwise", inputs), [&]<class B>() {
    const auto in = unwrap_all<B>(inputs);
    return wrap_all<B>(B::elementwise(program, in, params));
  });
}

#define KILN_DISPATCH_UNARY(op, call)                                                         \
  return on(target(#op, {&x}), [&]<class B>() { const auto& ux = unwrap<B>(x); return wrap<B>(call); })

Dispatch::Primitive Dispatch::reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) {
  KILN_DISPATCH_UNARY(reduce, B::reduce(ux, op, dim));
}
Dispatch::Primitive Dispatch::reduce_all(const Primitive& x, ops::ReduceOp op) {
  KILN_DISPATCH_UNARY(reduce_all, provided::reduce_all<B>(ux, op));
}
Dispatch::Primitive Dispatch::arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
  KILN_DISPATCH_UNARY(arg_reduce, B::arg_reduce(ux, op, dim));
}
Dispatch::Primitive Dispatch::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
  KILN_DISPATCH_UNARY(cumulative, B::cumulative(ux, op, dim));
}
std::pair<Dispatch::Primitive, Dispatch::Primitive> Dispatch::sort(const Primitive& x, std::int64_t dim, bool descending) {
  return on(target("sort", {&x}), [&]<class B>() {
    auto [values, indices] = B::sort(unwrap<B>(x), dim, descending);
    return std::pair{wrap<B>(std::move(values)), wrap<B>(std::move(indices))};
  });
}
Dispatch::Primitive Dispatch::matmul(const Primitive& a, const Primitive& b) {
  return on(target("matmul", {&a, &b}), [&]<class B>() { return wrap<B>(B::matmul(unwrap<B>(a), unwrap<B>(b))); });
}

Dispatch::Primitive Dispatch::reshape(const Primitive& x, const Shape& shape) {
  KILN_DISPATCH_UNARY(reshape, B::reshape(ux, shape));
}
Dispatch::Primitive Dispatch::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  KILN_DISPATCH_UNARY(permute, B::permute(ux, dims));
}
Dispatch::Primitive Dispatch::expand(const Primitive& x, const Shape& shape) {
  KILN_DISPATCH_UNARY(expand, B::expand(ux, shape));
}
Dispatch::Primitive Dispatch::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  KILN_DISPATCH_UNARY(slice, B::slice(ux, ranges));
}
Dispatch::Primitive Dispatch::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
                                           const Primitive& value) {
  return on(target("slice_assign", {&x, &value}),
            [&]<class B>() { return wrap<B>(B::slice_assign(unwrap<B>(x), ranges, unwrap<B>(value))); });
}
Dispatch::Primitive Dispatch::flip(const Primitive& x, std::span<const std::int64_t> dims) {
  KILN_DISPATCH_UNARY(flip, provided::flip<B>(ux, dims));
}
Dispatch::Primitive Dispatch::cat(std::span<const Primitive> xs, std::int64_t dim) {
  return on(target("cat", xs), [&]<class B>() {
    const auto in = unwrap_all<B>(xs);
    return wrap<B>(provided::cat<B>(in, dim));
  });
}
Dispatch::Primitive Dispatch::gather(const Primitive& x, std::int64_t dim, const Primitive& index) {
  return on(target("gather", {&x, &index}),
            [&]<class B>() { return wrap<B>(B::gather(unwrap<B>(x), dim, unwrap<B>(index))); });
}
Dispatch::Primitive Dispatch::scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                                      ops::ScatterMode mode) {
  return on(target("scatter", {&x, &index, &src}), [&]<class B>() {
    return wrap<B>(B::scatter(unwrap<B>(x), dim, unwrap<B>(index), unwrap<B>(src), mode));
  });
}
Dispatch::Primitive Dispatch::index_select(const Primitive& x, std::int64_t dim, const Primitive& index) {
  return on(target("index_select", {&x, &index}),
            [&]<class B>() { return wrap<B>(provided::index_select<B>(unwrap<B>(x), dim, unwrap<B>(index))); });
}
Dispatch::Primitive Dispatch::index_add(const Primitive& x, std::int64_t dim, const Primitive& index,
                                        const Primitive& values) {
  return on(target("index_add", {&x, &index, &values}), [&]<class B>() {
    return wrap<B>(provided::index_add<B>(unwrap<B>(x), dim, unwrap<B>(index), unwrap<B>(values)));
  });
}

std::array<Dispatch::Primitive, 3> Dispatch::adam_step(Primitive&& param, const Primitive& grad, Primitive&& m,
                                                       Primitive&& v, const ops::AdamStep& options) {
  return on(target("adam_step", {&param, &grad, &m, &v}), [&]<class B>() {
    // A handle nothing else holds lets go of its primitive, which the backend may then write
    // over as the only holder of its buffer; the handles are filled again if it throws.
    const std::array<Primitive*, 3> given{&param, &m, &v};
    std::array<typename B::Primitive, 3> values{unwrap<B>(param), unwrap<B>(m), unwrap<B>(v)};
    for (Primitive* h : given)
      if (h->value.use_count() == 1) h->value.reset();
    try {
      auto [p, m2, v2] = dispatch::adam_step_of<B>(std::move(values[0]), unwrap<B>(grad), std::move(values[1]),
                                                   std::move(values[2]), options);
      return std::array<Primitive, 3>{wrap<B>(std::move(p)), wrap<B>(std::move(m2)), wrap<B>(std::move(v2))};
    } catch (...) {
      for (std::size_t k = 0; k < 3; ++k)
        if (!given[k]->value) *given[k] = wrap<B>(std::move(values[k]));
      throw;
    }
  });
}

Dispatch::Primitive Dispatch::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                                     const ops::Conv2dOptions& options) {
  return on(target("conv2d", {&x, &weight, bias ? &*bias : nullptr}), [&]<class B>() {
    std::optional<typename B::Primitive> b;
    if (bias) b = unwrap<B>(*bias);
    return wrap<B>(B::conv2d(unwrap<B>(x), unwrap<B>(weight), b, options));
  });
}
Dispatch::Primitive Dispatch::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                                    const ops::Conv2dOptions& options) {
  return on(target("conv2d_backward_input", {&dy, &weight}), [&]<class B>() {
    return wrap<B>(B::conv2d_backward_input(unwrap<B>(dy), unwrap<B>(weight), x_shape, options));
  });
}
Dispatch::Primitive Dispatch::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                                     const ops::Conv2dOptions& options) {
  return on(target("conv2d_backward_weight", {&x, &dy}), [&]<class B>() {
    return wrap<B>(B::conv2d_backward_weight(unwrap<B>(x), unwrap<B>(dy), weight_shape, options));
  });
}
std::pair<Dispatch::Primitive, Dispatch::Primitive> Dispatch::max_pool2d(const Primitive& x,
                                                                         const ops::Pool2dOptions& options) {
  return on(target("max_pool2d", {&x}), [&]<class B>() {
    auto [out, indices] = B::max_pool2d(unwrap<B>(x), options);
    return std::pair{wrap<B>(std::move(out)), wrap<B>(std::move(indices))};
  });
}
Dispatch::Primitive Dispatch::max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                                  const ops::Pool2dOptions& options) {
  return on(target("max_pool2d_backward", {&x, &dy, &indices}), [&]<class B>() {
    return wrap<B>(provided::max_pool2d_backward<B>(unwrap<B>(x), unwrap<B>(dy), unwrap<B>(indices), options));
  });
}
Dispatch::Primitive Dispatch::avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  KILN_DISPATCH_UNARY(avg_pool2d, provided::avg_pool2d<B>(ux, options));
}
Dispatch::Primitive Dispatch::avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& options) {
  return on(target("avg_pool2d_backward", {&x, &dy}), [&]<class B>() {
    return wrap<B>(provided::avg_pool2d_backward<B>(unwrap<B>(x), unwrap<B>(dy), options));
  });
}
Dispatch::Primitive Dispatch::linear(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                                     ops::LinearActivation activation) {
  return on(target("linear", {&x, &weight, bias ? &*bias : nullptr}), [&]<class B>() {
    std::optional<typename B::Primitive> b;
    if (bias) b = unwrap<B>(*bias);
    return wrap<B>(provided::linear<B>(unwrap<B>(x), unwrap<B>(weight), b, activation));
  });
}
Dispatch::Primitive Dispatch::layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                                const std::optional<Primitive>& bias, std::int64_t dims, double eps) {
  return on(target("layer_norm", {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr}), [&]<class B>() {
    std::optional<typename B::Primitive> w, b;
    if (weight) w = unwrap<B>(*weight);
    if (bias) b = unwrap<B>(*bias);
    return wrap<B>(provided::layer_norm_affine<B>(unwrap<B>(x), w, b, dims, eps));
  });
}
LayerNormGradients<Dispatch::Primitive> Dispatch::layer_norm_affine_backward(const Primitive& x,
                                                                              const std::optional<Primitive>& weight,
                                                                              const Primitive& dy, std::int64_t dims,
                                                                              double eps, bool bias) {
  return on(target("layer_norm_backward", {&x, weight ? &*weight : nullptr, &dy}), [&]<class B>() {
    std::optional<typename B::Primitive> w;
    if (weight) w = unwrap<B>(*weight);
    LayerNormGradients<typename B::Primitive> g =
        provided::layer_norm_affine_backward<B>(unwrap<B>(x), w, unwrap<B>(dy), dims, eps, bias);
    LayerNormGradients<Primitive> out{wrap<B>(std::move(g.dx)), std::nullopt, std::nullopt};
    if (g.dweight) out.dweight = wrap<B>(std::move(*g.dweight));
    if (g.dbias) out.dbias = wrap<B>(std::move(*g.dbias));
    return out;
  });
}
Dispatch::Primitive Dispatch::adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size) {
  KILN_DISPATCH_UNARY(adaptive_avg_pool2d, provided::adaptive_avg_pool2d<B>(ux, output_size));
}
Dispatch::Primitive Dispatch::adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy) {
  return on(target("adaptive_avg_pool2d_backward", {&x, &dy}), [&]<class B>() {
    return wrap<B>(provided::adaptive_avg_pool2d_backward<B>(unwrap<B>(x), unwrap<B>(dy)));
  });
}
Dispatch::Primitive Dispatch::interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                                          const ops::InterpolateOptions& options) {
  KILN_DISPATCH_UNARY(interpolate, provided::interpolate<B>(ux, output_size, options));
}
Dispatch::Primitive Dispatch::interpolate_backward(const Primitive& x, const Primitive& dy,
                                                   const ops::InterpolateOptions& options) {
  return on(target("interpolate_backward", {&x, &dy}), [&]<class B>() {
    return wrap<B>(provided::interpolate_backward<B>(unwrap<B>(x), unwrap<B>(dy), options));
  });
}

Dispatch::Primitive Dispatch::softmax(const Primitive& x, std::int64_t dim, bool log) {
  KILN_DISPATCH_UNARY(softmax, dispatch::softmax_of<B>(ux, dim, log));
}
Dispatch::Primitive Dispatch::softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log) {
  return on(target("softmax_backward", {&y, &dy}), [&]<class B>() {
    return wrap<B>(dispatch::softmax_backward_of<B>(unwrap<B>(y), unwrap<B>(dy), dim, log));
  });
}
Dispatch::Primitive Dispatch::layer_norm(const Primitive& x, std::int64_t dims, double eps) {
  KILN_DISPATCH_UNARY(layer_norm, dispatch::layer_norm_of<B>(ux, dims, eps));
}
Dispatch::Primitive Dispatch::layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps) {
  return on(target("layer_norm_backward", {&x, &dy}), [&]<class B>() {
    return wrap<B>(dispatch::layer_norm_backward_of<B>(unwrap<B>(x), unwrap<B>(dy), dims, eps));
  });
}

void Dispatch::retain(const Primitive& p) {
  if (p.value == nullptr) return;
  on(p.target, [&]<class B>() {
    if constexpr (requires { B::retain(unwrap<B>(p)); }) B::retain(unwrap<B>(p));
  });
}

#undef KILN_DISPATCH_UNARY

}  // namespace kiln
