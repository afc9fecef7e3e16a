// Autodiff<B>'s backward rules for the neural-network primitives (included by
// kiln/autodiff/backend.hpp, which declares them): the fused composites (softmax, layer norm,
// attention, with the composition of attention that a lazy B defers recorded as one
// attention node), matmul and linear, convolution, pooling and interpolation.
#pragma once

#include "kiln/autodiff/backend.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace kiln {

template <Backend B>
auto Autodiff<B>::softmax(const Primitive& x, std::int64_t dim, bool log) -> Primitive requires FusedSoftmax<B> {
  InnerPrimitive y = B::softmax(x.value, dim, log);
  InnerPrimitive saved = y;
  return record(log ? "log_softmax" : "softmax", std::move(y), {x.node},
                [y = keep(std::move(saved)), dim, log](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, B::softmax_backward(y, dy, dim, log));
                });
}

template <Backend B>
auto Autodiff<B>::softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim,
    bool log) -> Primitive requires FusedSoftmax<B> {
  reject_tracked("softmax_backward", {&y, &dy});
  return from_inner(B::softmax_backward(y.value, dy.value, dim, log));
}

template <Backend B>
auto Autodiff<B>::layer_norm(const Primitive& x, std::int64_t dims,
    double eps) -> Primitive requires FusedLayerNorm<B> {
  return record("layer_norm", B::layer_norm(x.value, dims, eps), {x.node},
                [x = keep(x.value), dims, eps](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, B::layer_norm_backward(x, dy, dims, eps));
                });
}

template <Backend B>
auto Autodiff<B>::layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims,
    double eps) -> Primitive requires FusedLayerNorm<B> {
  reject_tracked("layer_norm_backward", {&x, &dy});
  return from_inner(B::layer_norm_backward(x.value, dy.value, dims, eps));
}

template <Backend B>
auto Autodiff<B>::attention(const Primitive& q, const Primitive& k, const Primitive& v,
    const std::optional<Primitive>& mask, bool causal, double scale) -> std::pair<Primitive, Primitive>
    requires FusedAttention<B> {
  std::optional<InnerPrimitive> m;
  if (mask) m = mask->value;
  auto [out, lse] = B::attention(q.value, k.value, v.value, m, causal, scale);
  InnerPrimitive untracked_lse = lse;
  Primitive y = record_attention(
      {q.node, k.node, v.node}, false,
      {q.value, k.value, v.value, std::move(m), std::move(out), std::move(lse), causal, scale});
  return {std::move(y), from_inner(std::move(untracked_lse))};
}

template <Backend B>
auto Autodiff<B>::record_attention(std::vector<std::shared_ptr<Node>> inputs, bool k_transposed,
    AttentionSaved saved) -> Primitive requires FusedAttention<B> {
  InnerPrimitive out = saved.out;
  for (const InnerPrimitive* kept : {&saved.q, &saved.k, &saved.v, &saved.out, &saved.lse}) keep(*kept);
  return record("attention", std::move(out), std::move(inputs),
                [a = std::move(saved), k_transposed](const InnerPrimitive& dy, Sink& s) {
                  auto [dq, dk, dv] = B::attention_backward(a.q, a.k, a.v, a.mask, a.out, a.lse, dy, a.causal, a.scale);
                  if (s.needs(0)) s.put(0, std::move(dq));
                  const std::vector<std::int64_t> swap{0, 1, 3, 2};
                  if (s.needs(1)) s.put(1, k_transposed ? B::permute(dk, swap) : std::move(dk));
                  if (s.needs(2)) s.put(2, std::move(dv));
                });
}

template <Backend B>
auto Autodiff<B>::attention_backward(const Primitive& q, const Primitive& k, const Primitive& v,
    const std::optional<Primitive>& mask, const Primitive& out, const Primitive& lse, const Primitive& dout,
    bool causal, double scale) -> std::array<Primitive, 3> requires FusedAttention<B> {
  reject_tracked("attention_backward", {&q, &k, &v, &out, &dout});
  std::optional<InnerPrimitive> m;
  if (mask) m = mask->value;
  auto [dq, dk, dv] = B::attention_backward(q.value, k.value, v.value, m, out.value, lse.value, dout.value, causal, scale);
  return {from_inner(std::move(dq)), from_inner(std::move(dk)), from_inner(std::move(dv))};
}

template <Backend B>
auto Autodiff<B>::attention_of_weights(const Primitive& w, const Primitive& v) -> std::optional<Primitive> {
  if constexpr (requires { B::attention_of(w.value, v.value); }) {
    // Below 32 MiB of weights (8 heads of 1024 x 1024 f32) the composition's backward, whose
    // [L, S] tensors stay in cache, was as fast or faster: a forward and backward pass over
    // 8 heads of 64 took 1.3x as long rewritten at 512 x 512 on a 2-core Xeon, as long at
    // 1024, and 0.8-0.9x at 2048 (docs/benchmarks.md).
    constexpr std::int64_t kMinWeights = std::int64_t{8} << 20;
    if (!w.node || w.node->op != "softmax" || w.node->shape.numel() < kMinWeights ||
        !should_record(std::array{w.node, v.node}, w.value))
      return std::nullopt;
    const Node* product = w.node->inputs[0].get();
    if (product && product->op == "mul" && product->inputs.size() == 1) product = product->inputs[0].get();
    if (!product || product->op != "matmul") return std::nullopt;
    auto attention = B::attention_of(w.value, v.value);
    if (!attention) return std::nullopt;
    return record_attention({product->inputs[0], product->inputs[1], v.node}, true,
                            {std::move(attention->q), std::move(attention->k), v.value, std::nullopt,
                             std::move(attention->out), std::move(attention->lse), false, attention->scale});
  } else {
    return std::nullopt;
  }
}

template <Backend B>
auto Autodiff<B>::matmul(const Primitive& a, const Primitive& b) -> Primitive {
  if (auto attention = attention_of_weights(a, b)) return *std::move(attention);
  return record("matmul", B::matmul(a.value, b.value), {a.node, b.node},
                [a = keep(a.value), b = keep(b.value)](const InnerPrimitive& dy, Sink& s) {
                  // Transposes are views: the GEMM reads them in place.
                  if (s.needs(0)) s.put(0, sum_to(B::matmul(dy, transpose_last(b)), B::shape(a)));
                  if (s.needs(1)) s.put(1, matmul_grad_rhs(a, b, dy));
                });
}

template <Backend B>
auto Autodiff<B>::layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
    const std::optional<Primitive>& bias, std::int64_t dims, double eps) -> Primitive {
  std::optional<InnerPrimitive> w, b;
  if (weight) w = keep(weight->value);
  if (bias) b = bias->value;
  InnerPrimitive y = provided::layer_norm_affine<B>(x.value, w, b, dims, eps);
  return record("layer_norm", std::move(y), {x.node, weight ? weight->node : nullptr, bias ? bias->node : nullptr},
                [x = keep(x.value), w = std::move(w), dims, eps](const InnerPrimitive& dy, Sink& s) {
                  LayerNormGradients<InnerPrimitive> g =
                      provided::layer_norm_affine_backward<B>(x, w, dy, dims, eps, s.needs(2));
                  if (s.needs(0)) s.put(0, std::move(g.dx));
                  if (s.needs(1)) s.put(1, std::move(*g.dweight));
                  if (s.needs(2)) s.put(2, std::move(*g.dbias));
                });
}

template <Backend B>
auto Autodiff<B>::linear(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
    ops::LinearActivation activation) -> Primitive {
  std::optional<InnerPrimitive> b;
  if (bias) b = bias->value;
  InnerPrimitive y = provided::linear<B>(x.value, weight.value, b, activation);
  const bool relu = activation == ops::LinearActivation::relu;
  std::optional<InnerPrimitive> saved_y;
  if (relu) saved_y = keep(y);
  return record("linear", std::move(y), {x.node, weight.node, bias ? bias->node : nullptr},
                [x = keep(x.value), w = keep(weight.value), y = std::move(saved_y)](InnerPrimitive&& dy, Sink& s) {
                  const Shape xs = B::shape(x), ws = B::shape(w);
                  const std::int64_t out = ws[0], in = ws[1];
                  std::int64_t rows = 1;
                  for (std::size_t d = 0; d + 1 < xs.rank(); ++d) rows *= xs[d];
                  const InnerPrimitive dz = B::reshape(
                      y ? provided::unary_backward<B, ops::Relu>(*y, *y, std::move(dy)) : dy, Shape({rows, out}));
                  if (s.needs(0)) s.put(0, B::reshape(B::matmul(dz, w), xs));
                  if (s.needs(1)) {
                    // dzᵀ x, or (xᵀ dz)ᵀ where that has fewer rows (transposed_product's reason).
                    const InnerPrimitive x2 = B::reshape(x, Shape({rows, in}));
                    s.put(1, out <= in ? B::matmul(transpose_last(dz), x2)
                                       : transpose_last(B::matmul(transpose_last(x2), dz)));
                  }
                  if (s.needs(2)) s.put(2, B::reshape(B::reduce(dz, ops::ReduceOp::sum, 0), Shape({out})));
                });
}

template <Backend B>
auto Autodiff<B>::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
    const ops::Conv2dOptions& o) -> Primitive {
  std::optional<InnerPrimitive> b;
  if (bias) b = bias->value;
  return record("conv2d", B::conv2d(x.value, weight.value, b, o), {x.node, weight.node, bias ? bias->node : nullptr},
                [x = keep(x.value), w = keep(weight.value), o](const InnerPrimitive& dy, Sink& s) {
                  if (s.needs(0)) s.put(0, B::conv2d_backward_input(dy, w, B::shape(x), o));
                  if (s.needs(1)) s.put(1, B::conv2d_backward_weight(x, dy, B::shape(w), o));
                  if (s.needs(2)) {
                    const std::int64_t channels = B::shape(w)[0];
                    s.put(2, B::reshape(sum_to(dy, Shape{1, channels, 1, 1}), Shape{channels}));
                  }
                });
}

template <Backend B>
auto Autodiff<B>::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
    const ops::Conv2dOptions& o) -> Primitive {
  return record("conv2d_backward_input", B::conv2d_backward_input(dy.value, weight.value, x_shape, o),
                {dy.node, weight.node},
                [g = keep(dy.value), w = keep(weight.value), o](const InnerPrimitive& dz, Sink& s) {
                  if (s.needs(0)) s.put(0, B::conv2d(dz, w, std::nullopt, o));
                  if (s.needs(1)) s.put(1, B::conv2d_backward_weight(dz, g, B::shape(w), o));
                });
}

template <Backend B>
auto Autodiff<B>::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
    const ops::Conv2dOptions& o) -> Primitive {
  return record("conv2d_backward_weight", B::conv2d_backward_weight(x.value, dy.value, weight_shape, o),
                {x.node, dy.node},
                [x = keep(x.value), g = keep(dy.value), o](const InnerPrimitive& dw, Sink& s) {
                  if (s.needs(0)) s.put(0, B::conv2d_backward_input(g, dw, B::shape(x), o));
                  if (s.needs(1)) s.put(1, B::conv2d(x, dw, std::nullopt, o));
                });
}

template <Backend B>
auto Autodiff<B>::max_pool2d(const Primitive& x, const ops::Pool2dOptions& o) -> std::pair<Primitive, Primitive> {
  std::pair<InnerPrimitive, InnerPrimitive> pooled = B::max_pool2d(x.value, o);  // see sort
  InnerPrimitive& indices = pooled.second;
  Primitive values = record("max_pool2d", std::move(pooled.first), {x.node},
                            [x = keep(x.value), indices, o](const InnerPrimitive& dy, Sink& s) {
                              s.put(0, provided::max_pool2d_backward<B>(x, dy, indices, o));
                            });
  return {std::move(values), from_inner(std::move(indices))};
}

template <Backend B>
auto Autodiff<B>::max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
    const ops::Pool2dOptions& o) -> Primitive {
  reject_tracked("max_pool2d_backward", {&x, &dy});
  return from_inner(provided::max_pool2d_backward<B>(x.value, dy.value, indices.value, o));
}

template <Backend B>
auto Autodiff<B>::avg_pool2d(const Primitive& x, const ops::Pool2dOptions& o) -> Primitive {
  return record("avg_pool2d", provided::avg_pool2d<B>(x.value, o), {x.node},
                [x = keep(x.value), o](const InnerPrimitive& dy, Sink& s) { s.put(0, provided::avg_pool2d_backward<B>(x, dy, o)); });
}

template <Backend B>
auto Autodiff<B>::avg_pool2d_backward(const Primitive& x, const Primitive& dy,
    const ops::Pool2dOptions& o) -> Primitive {
  reject_tracked("avg_pool2d_backward", {&x, &dy});
  return from_inner(provided::avg_pool2d_backward<B>(x.value, dy.value, o));
}

template <Backend B>
auto Autodiff<B>::adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size) -> Primitive {
  return record("adaptive_avg_pool2d", provided::adaptive_avg_pool2d<B>(x.value, output_size), {x.node},
                [x = keep(x.value)](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, provided::adaptive_avg_pool2d_backward<B>(x, dy));
                });
}

template <Backend B>
auto Autodiff<B>::adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy) -> Primitive {
  reject_tracked("adaptive_avg_pool2d_backward", {&x, &dy});
  return from_inner(provided::adaptive_avg_pool2d_backward<B>(x.value, dy.value));
}

template <Backend B>
auto Autodiff<B>::interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
    const ops::InterpolateOptions& o) -> Primitive {
  return record("interpolate", provided::interpolate<B>(x.value, output_size, o), {x.node},
                [x = keep(x.value), o](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, provided::interpolate_backward<B>(x, dy, o));
                });
}

template <Backend B>
auto Autodiff<B>::interpolate_backward(const Primitive& x, const Primitive& dy,
    const ops::InterpolateOptions& o) -> Primitive {
  reject_tracked("interpolate_backward", {&x, &dy});
  return from_inner(provided::interpolate_backward<B>(x.value, dy.value, o));
}

}  // namespace kiln
