// Autodiff<B>: reverse-mode differentiation as a backend decorator. Autodiff<B> is itself
// a Backend: each primitive runs the op on B and, when an input is tracked and grad mode
// is on, records a node whose backward rule is written in B's primitives. Elementwise
// rules come from the op catalogue (grad, grad_lhs, grad_rhs); the rules of the other
// primitives are below, one per primitive. Composite ops (softmax, var, pad...) need no
// rule: they differentiate through the primitives they are built from.
#pragma once

#include "kiln/autodiff/graph.hpp"
#include "kiln/backend/backend.hpp"

#include <array>
#include <concepts>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

template <Backend B> struct Autodiff {
  using Inner = B;
  using InnerPrimitive = typename B::Primitive;
  using Node = autodiff::Node<InnerPrimitive>;
  using Sink = autodiff::GradSink<InnerPrimitive>;
  using Gradients = kiln::Gradients<InnerPrimitive>;
  using Device = typename B::Device;

  // The inner value and, when a gradient flows through it, its node.
  struct Primitive {
    InnerPrimitive value;
    std::shared_ptr<Node> node;
  };
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;
  static constexpr std::string_view name = kiln::detail::DecoratedName<"autodiff_", B>::value;

  // ================================================================ the autodiff API
  // A leaf that requires grad (a fresh node), or the value detached from any graph.
  static Primitive set_require_grad(const Primitive& p, bool require);
  static bool is_require_grad(const Primitive& p) { return p.node != nullptr; }
  static Primitive detach(const Primitive& p) { return {p.value, nullptr}; }
  static const InnerPrimitive& inner(const Primitive& p) { return p.value; }
  static Primitive from_inner(InnerPrimitive p) { return {std::move(p), nullptr}; }

  // Gradients of `root` (seeded with ones, whatever its shape) for every leaf it depends on.
  static Gradients backward(const Primitive& root);
  static std::optional<InnerPrimitive> grad(const Primitive& p, const Gradients& grads) {
    if (!p.node) return std::nullopt;
    return grads.get(p.node->id);
  }
  static std::optional<InnerPrimitive> grad_remove(const Primitive& p, Gradients& grads) {
    if (!p.node) return std::nullopt;
    return grads.remove(p.node->id);
  }

  // ================================================================ creation and host transfer
  static Primitive from_data(const TensorData& data, const Device& device) {
    return from_inner(B::from_data(data, device));
  }
  static TensorData into_data(const Primitive& p) { return B::into_data(p.value); }
  static Primitive full(const Shape& shape, double value, DType dtype, const Device& device);
  static Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                          const Device& device);
  static Shape shape(const Primitive& p) { return B::shape(p.value); }
  static DType dtype(const Primitive& p) { return B::dtype(p.value); }
  static Device device(const Primitive& p) { return B::device(p.value); }
  static Primitive to_device(const Primitive& p, const Device& device);
  // Float to float casts carry the gradient back in the input's dtype; casts to Int or Bool end the graph.
  static Primitive cast(const Primitive& p, DType dtype);

  // ================================================================ elementwise
  // A program runs on the inner backend; its inputs must not require grad, since Autodiff
  // differentiates the catalogue's ops (below), not arbitrary programs.
  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);

  // The catalogue's ops, recorded with their gradient rules (overrides of the provided ones).
  template <class Op> static Primitive unary(const Primitive& x);

  template <class Op> static Primitive binary(const Primitive& a, const Primitive& b);

  template <class Op> static Primitive binary_scalar(const Primitive& a, double scalar);

  static Primitive where(const Primitive& cond, const Primitive& a, const Primitive& b);

  // Gradient formulas are evaluated, not differentiated: second-order gradients are not supported.
  template <class Op>
  static Primitive unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy);
  template <class Op>
  static Primitive binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
                                   ops::Operand operand);

  // ================================================================ reductions, scans, sorting
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim);

  static Primitive reduce_all(const Primitive& x, ops::ReduceOp op);

  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
    return from_inner(B::arg_reduce(x.value, op, dim));
  }

  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim);

  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending);

  // ================================================================ fused composites (when B has them)
  static Primitive softmax(const Primitive& x, std::int64_t dim, bool log) requires FusedSoftmax<B>;
  static Primitive softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log)
    requires FusedSoftmax<B>;
  static Primitive layer_norm(const Primitive& x, std::int64_t dims, double eps) requires FusedLayerNorm<B>;
  static Primitive layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps)
    requires FusedLayerNorm<B>;
  // One node for the whole attention (q, k, v its inputs; the mask takes no gradient) whose
  // backward is B's fused backward: the [L, S] weights are never kept for it. lse is returned
  // untracked.
  static std::pair<Primitive, Primitive> attention(const Primitive& q, const Primitive& k, const Primitive& v,
                                                   const std::optional<Primitive>& mask, bool causal, double scale)
    requires FusedAttention<B>;
  static std::array<Primitive, 3> attention_backward(const Primitive& q, const Primitive& k, const Primitive& v,
                                                     const std::optional<Primitive>& mask, const Primitive& out,
                                                     const Primitive& lse, const Primitive& dout, bool causal,
                                                     double scale) requires FusedAttention<B>;

  // One node for layer norm with its weight and bias (x, weight and bias its inputs), B's
  // layer_norm_affine and its backward (one pass each on the CPU), the statistics recomputed
  // from x.
  static Primitive layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                     const std::optional<Primitive>& bias, std::int64_t dims, double eps);

  // ================================================================ linear algebra
  static Primitive matmul(const Primitive& a, const Primitive& b);
  // One node for a linear layer (x, weight and bias its inputs), computed by B's linear (one
  // GEMM with its epilogue where B has it). The backward takes the gradient before the
  // activation from the output alone (relu's needs no more), then dx = dz W, dW = dzᵀ x over
  // x's rows folded into one matrix, and the bias's as dz summed over the rows.
  static Primitive linear(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          ops::LinearActivation activation);

  // ================================================================ layout
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

  // ================================================================ neural-network ops
  static Primitive conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& o);
  // The input gradient of a convolution is linear in dy and in the weight, and is the
  // forward pass of the transposed convolution: its own rule maps back through conv2d.
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                         const ops::Conv2dOptions& o);
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                          const ops::Conv2dOptions& o);
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& o);
  static Primitive max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                       const ops::Pool2dOptions& o);
  static Primitive avg_pool2d(const Primitive& x, const ops::Pool2dOptions& o);
  static Primitive avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& o);
  static Primitive adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size);
  static Primitive adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy);
  static Primitive interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                               const ops::InterpolateOptions& o);
  static Primitive interpolate_backward(const Primitive& x, const Primitive& dy, const ops::InterpolateOptions& o);

 private:
  // A value a backward rule keeps to read later: B is told where it listens (B::retain:
  // Fusion<B> then computes nothing that value needs inside an epilogue, which would not
  // write it).
  static InnerPrimitive keep(InnerPrimitive v) {
    if constexpr (requires { B::retain(v); }) B::retain(v);
    return v;
  }
  // `value` as the result of `op` over inputs with these nodes (null: not tracked), whose
  // gradients `rule` computes. Nothing is recorded under NoGradGuard, when no input is
  // tracked, or when the result is not a float tensor; then nothing is allocated either
  // (the inputs arrive as an initializer list, and become the node's vector only when a
  // node is made), since most ops of an inference or optimizer step track nothing.
  template <class Rule>
  static Primitive record(std::string_view op, InnerPrimitive value, std::initializer_list<std::shared_ptr<Node>> inputs,
                          Rule&& rule) {
    if (!should_record(inputs, value)) return from_inner(std::move(value));
    return make_node(op, std::move(value), std::vector<std::shared_ptr<Node>>(inputs), std::forward<Rule>(rule));
  }
  // The same for a run-time number of inputs (cat).
  template <class Rule>
  static Primitive record(std::string_view op, InnerPrimitive value, std::vector<std::shared_ptr<Node>> inputs,
                          Rule&& rule) {
    if (!should_record(inputs, value)) return from_inner(std::move(value));
    return make_node(op, std::move(value), std::move(inputs), std::forward<Rule>(rule));
  }
  template <class Nodes> static bool should_record(const Nodes& inputs, const InnerPrimitive& value) {
    if (!autodiff::grad_mode()) return false;
    bool tracked = false;
    for (const auto& n : inputs) tracked = tracked || n != nullptr;
    return tracked && is_float(B::dtype(value));
  }
  template <class Rule>
  static Primitive make_node(std::string_view op, InnerPrimitive value, std::vector<std::shared_ptr<Node>> inputs,
                             Rule&& rule) {
    auto node = std::make_shared<Node>(op, B::shape(value));
    node->inputs = std::move(inputs);
    node->backward = std::forward<Rule>(rule);
    return {std::move(value), std::move(node)};
  }

  // w @ v as one attention node, where B deferred w as attention weights and computes the
  // product with its fused attention (B::attention_of: Fusion<B>, as torch.compile rewrites
  // the composition) and w's node is the softmax of a product, or of a product times a
  // scalar: the node's inputs are the product's operands (q and kᵀ) and v, and its backward
  // is B's fused one, so that neither the [L, S] weights nor their gradient is ever made.
  // w's own node stays for any other reader of w. Only for weights of 8M elements or more
  // (their f32 bytes past a last-level cache); nullopt otherwise.
  static std::optional<Primitive> attention_of_weights(const Primitive& w, const Primitive& v);
  // An attention node: `out` and `lse` computed by B's attention from q, k, v (and the mask),
  // its inputs the nodes given, its backward B's fused one. Where k_transposed, the second
  // input is kᵀ (a product's right operand) and takes dk transposed.
  struct AttentionSaved {
    InnerPrimitive q, k, v;
    std::optional<InnerPrimitive> mask;
    InnerPrimitive out, lse;
    bool causal = false;
    double scale = 1;
  };
  static Primitive record_attention(std::vector<std::shared_ptr<Node>> inputs, bool k_transposed, AttentionSaved saved)
    requires FusedAttention<B>;

  static void reject_tracked(std::string_view op, std::initializer_list<const Primitive*> inputs) {
    if (!autodiff::grad_mode()) return;
    for (const Primitive* p : inputs)
      KILN_CHECK(p->node == nullptr,
                 "{}: an input requires grad, but Autodiff does not differentiate gradient formulas "
                 "(second-order gradients are not supported); detach() the inputs or use NoGradGuard",
                 op);
  }

  static InnerPrimitive zeros_like(const InnerPrimitive& x) {
    return provided::full<B>(B::shape(x), 0.0, B::dtype(x), B::device(x));
  }

  // Sums a gradient of a broadcast result back to the shape of the operand that was broadcast.
  static InnerPrimitive sum_to(InnerPrimitive g, const Shape& target) {
    Shape s = B::shape(g);
    if (s == target) return g;
    const std::size_t lead = s.rank() - target.rank();
    if (lead > 0) {  // the leading dims the operand lacked: fold them into one and sum it
      std::vector<std::int64_t> dims{-1};
      std::int64_t count = 1;
      for (std::size_t d = 0; d < lead; ++d) count *= s[d];
      dims[0] = count;
      for (std::size_t d = lead; d < s.rank(); ++d) dims.push_back(s[d]);
      g = B::reduce(B::reshape(g, Shape(dims)), ops::ReduceOp::sum, 0);
      s = B::shape(g);
    }
    const std::size_t offset = s.rank() - target.rank();
    for (std::size_t d = 0; d < target.rank(); ++d) {
      if (target[d] == 1 && s[d + offset] != 1)
        g = B::reduce(g, ops::ReduceOp::sum, static_cast<std::int64_t>(d + offset));
    }
    return B::reshape(g, target);
  }

  // d(a @ b)/db. When b is one matrix shared by a batch of a's (x @ W in a linear layer),
  // the batch folds into the GEMM's inner dim: [k, batch·m] @ [batch·m, n] is one product,
  // where a product per batch element followed by a sum would write batch × k × n floats.
  static InnerPrimitive matmul_grad_rhs(const InnerPrimitive& a, const InnerPrimitive& b, const InnerPrimitive& dy) {
    const Shape as = B::shape(a), bs = B::shape(b), ys = B::shape(dy);
    const std::size_t ra = as.rank(), rb = bs.rank(), ry = ys.rank();
    std::int64_t b_batch = 1;
    for (std::size_t d = 0; d + 2 < rb; ++d) b_batch *= bs[d];
    bool a_full_batch = ra == ry;  // a is not broadcast against dy's batch
    for (std::size_t d = 0; a_full_batch && d + 2 < ry; ++d) a_full_batch = as[d] == ys[d];
    if (ry > 2 && b_batch == 1 && a_full_batch) {
      std::int64_t rows = 1;  // batch · m
      for (std::size_t d = 0; d + 1 < ra; ++d) rows *= as[d];
      const InnerPrimitive a2 = B::reshape(a, Shape({rows, as[ra - 1]}));
      const InnerPrimitive dy2 = B::reshape(dy, Shape({rows, ys[ry - 1]}));
      return B::reshape(transposed_product(a2, dy2), bs);
    }
    if (ry == 2) return transposed_product(a, dy);
    return sum_to(B::matmul(transpose_last(a), dy), bs);
  }

  // aᵀ dy for a matrix shared by the whole batch (a weight), computed as (dyᵀ a)ᵀ (a
  // transposed view) when that product has fewer rows than columns. A weight's gradient is a
  // long product (K = the batch's rows) into a small matrix, and oneDNN runs the wide
  // orientation faster: on a 2-core Xeon VM, [1024, 4096] · [4096, 256] took 8.9 ms and
  // [256, 4096] · [4096, 1024] 7.4 ms (2 threads). Batched products keep aᵀ dy: attention's
  // value gradient wᵀ dy taken the other way made the 2048-key composition's forward +
  // backward on Autodiff<Fusion<Cpu>> slower (131 -> 145 ms).
  static InnerPrimitive transposed_product(const InnerPrimitive& a, const InnerPrimitive& dy) {
    const Shape as = B::shape(a), ys = B::shape(dy);
    if (as[as.rank() - 1] > ys[ys.rank() - 1]) return transpose_last(B::matmul(transpose_last(dy), a));
    return B::matmul(transpose_last(a), dy);
  }

  static InnerPrimitive transpose_last(const InnerPrimitive& x) {
    std::vector<std::int64_t> order(B::shape(x).rank());
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[order.size() - 2], order[order.size() - 1]);
    return B::permute(x, order);
  }

  // The whole of `shape` except [start, start + size) along dim.
  static std::vector<ops::SliceRange> along(const Shape& shape, std::int64_t dim, std::int64_t start,
                                            std::int64_t size) {
    std::vector<ops::SliceRange> r;
    for (std::size_t d = 0; d < shape.rank(); ++d) r.push_back({0, shape[d], 1});
    r[static_cast<std::size_t>(dim)] = {start, size, 1};
    return r;
  }

  static InnerPrimitive reverse_cumsum(const InnerPrimitive& x, std::int64_t dim) {
    const std::array<std::int64_t, 1> d{dim};
    return provided::flip<B>(B::cumulative(provided::flip<B>(x, d), ops::CumulativeOp::sum, dim), d);
  }

  // For each element, the product of the other elements along dim, exact when some are zero:
  // (product of those before) * (product of those after), from two cumulative products.
  static InnerPrimitive product_of_others(const InnerPrimitive& x, std::int64_t dim) {
    const Shape xs = B::shape(x);
    const std::int64_t n = xs[static_cast<std::size_t>(dim)];
    if (n <= 1) return provided::full<B>(xs, 1.0, B::dtype(x), B::device(x));
    const std::array<std::int64_t, 1> d{dim};
    std::vector<std::int64_t> one_dims = xs.to_vector();
    one_dims[static_cast<std::size_t>(dim)] = 1;
    const InnerPrimitive ones = provided::full<B>(Shape(one_dims), 1.0, B::dtype(x), B::device(x));
    const InnerPrimitive before = B::cumulative(x, ops::CumulativeOp::prod, dim);
    const InnerPrimitive after = provided::flip<B>(B::cumulative(provided::flip<B>(x, d), ops::CumulativeOp::prod, dim), d);
    const std::array<InnerPrimitive, 2> left{ones, B::slice(before, along(xs, dim, 0, n - 1))};
    const std::array<InnerPrimitive, 2> right{B::slice(after, along(xs, dim, 1, n - 1)), ones};
    return provided::binary<B, ops::Mul>(provided::cat<B>(left, dim), provided::cat<B>(right, dim));
  }
};

// Every member with a rule or a check is defined out of the class, so that it is compiled
// once for Autodiff over each backend (kiln/autodiff/instances.hpp) and not in every file
// that calls it: GCC compiles in-class members wherever they are called, extern template or
// not. The accessors stay in the class, to be inlined.

template <Backend B>
auto Autodiff<B>::set_require_grad(const Primitive& p, bool require) -> Primitive {
  if (!require) return detach(p);
  if (p.node) return p;
  KILN_CHECK(is_float(B::dtype(p.value)), "require_grad: only float tensors have gradients, got {} {}",
             B::shape(p.value), B::dtype(p.value));
  return {p.value, std::make_shared<Node>("leaf", B::shape(p.value))};
}

template <Backend B>
auto Autodiff<B>::backward(const Primitive& root) -> Gradients {
  KILN_CHECK(root.node != nullptr,
             "backward: this tensor of shape {} does not require grad (no input of the ops that made it "
             "requires grad, or it was computed under NoGradGuard)",
             B::shape(root.value));
  InnerPrimitive seed = provided::full<B>(B::shape(root.value), 1.0, B::dtype(root.value), B::device(root.value));
  return autodiff::run_backward<InnerPrimitive>(
      root.node, std::move(seed), [](InnerPrimitive&& a, InnerPrimitive&& b) {
        return provided::binary<B, ops::Add>(std::move(a), std::move(b));
      },
      [](const InnerPrimitive& g) { return B::shape(g); });
}

template <Backend B>
auto Autodiff<B>::full(const Shape& shape, double value, DType dtype, const Device& device) -> Primitive {
  return from_inner(provided::full<B>(shape, value, dtype, device));
}

template <Backend B>
auto Autodiff<B>::random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
    const Device& device) -> Primitive {
  return from_inner(provided::random<B>(shape, distribution, stream, dtype, device));
}

template <Backend B>
auto Autodiff<B>::to_device(const Primitive& p, const Device& device) -> Primitive {
  const Device from = B::device(p.value);
  return record("to_device", B::to_device(p.value, device), {p.node},
                [from](const InnerPrimitive& dy, Sink& s) { s.put(0, B::to_device(dy, from)); });
}

template <Backend B>
auto Autodiff<B>::cast(const Primitive& p, DType dtype) -> Primitive {
  const DType from = B::dtype(p.value);
  return record("cast", B::cast(p.value, dtype), {p.node},
                [from](const InnerPrimitive& dy, Sink& s) { s.put(0, B::cast(dy, from)); });
}

template <Backend B>
auto Autodiff<B>::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
    std::span<const double> params) -> std::vector<Primitive> {
  std::vector<InnerPrimitive> values;
  values.reserve(inputs.size());
  for (const Primitive& x : inputs) {
    KILN_CHECK(!autodiff::grad_mode() || x.node == nullptr,
               "elementwise: an input requires grad, but Autodiff differentiates the catalogue's ops, not "
               "programs ({}); detach() the inputs or use NoGradGuard",
               program.key());
    values.push_back(x.value);
  }
  std::vector<Primitive> out;
  for (InnerPrimitive& y : B::elementwise(program, values, params)) out.push_back(from_inner(std::move(y)));
  return out;
}

template <Backend B>
auto Autodiff<B>::where(const Primitive& cond, const Primitive& a, const Primitive& b) -> Primitive {
  return record("where", provided::where<B>(cond.value, a.value, b.value), {nullptr, a.node, b.node},
                [c = keep(cond.value), sa = B::shape(a.value), sb = B::shape(b.value)](const InnerPrimitive& dy, Sink& s) {
                  const InnerPrimitive zero = provided::full<B>(Shape{}, 0.0, B::dtype(dy), B::device(dy));
                  if (s.needs(1)) s.put(1, sum_to(provided::where<B>(c, dy, zero), sa));
                  if (s.needs(2)) s.put(2, sum_to(provided::where<B>(c, zero, dy), sb));
                });
}

template <Backend B>
template <class Op>
auto Autodiff<B>::unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy) -> Primitive {
  reject_tracked(Op::name, {&x, &y, &dy});
  return from_inner(provided::unary_backward<B, Op>(x.value, y.value, dy.value));
}

template <Backend B>
template <class Op>
auto Autodiff<B>::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
    ops::Operand operand) -> Primitive {
  reject_tracked(Op::name, {&a, &b, &y, &dy});
  return from_inner(provided::binary_backward<B, Op>(a.value, b.value, y.value, dy.value, operand));
}

template <Backend B>
auto Autodiff<B>::reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) -> Primitive {
  InnerPrimitive y = B::reduce(x.value, op, dim);
  const Shape xs = B::shape(x.value);
  switch (op) {
    case ops::ReduceOp::sum:
      return record("sum_dim", std::move(y), {x.node},
                    [xs](const InnerPrimitive& dy, Sink& s) { s.put(0, B::expand(dy, xs)); });
    case ops::ReduceOp::mean:
      return record("mean_dim", std::move(y), {x.node}, [xs, dim](const InnerPrimitive& dy, Sink& s) {
        const auto n = static_cast<double>(xs[static_cast<std::size_t>(dim)]);
        s.put(0, B::expand(provided::binary_scalar<B, ops::Div>(dy, n), xs));
      });
    case ops::ReduceOp::max:
    case ops::ReduceOp::min:
      // Like torch.max(x, dim): the gradient goes to the index the arg-reduction picks (the first of ties).
      return record(ops::reduce_name(op), std::move(y), {x.node},
                    [x = keep(x.value), op, dim](const InnerPrimitive& dy, Sink& s) {
                      const auto arg = op == ops::ReduceOp::max ? ops::ArgReduceOp::argmax : ops::ArgReduceOp::argmin;
                      const InnerPrimitive index = B::arg_reduce(x, arg, dim);
                      s.put(0, B::scatter(zeros_like(x), dim, index, dy, ops::ScatterMode::add));
                    });
    case ops::ReduceOp::prod:
      return record("prod_dim", std::move(y), {x.node}, [x = keep(x.value), dim](const InnerPrimitive& dy, Sink& s) {
        s.put(0, provided::binary<B, ops::Mul>(B::expand(dy, B::shape(x)), product_of_others(x, dim)));
      });
  }
  KILN_FAIL("reduce: unknown reduction");
}

template <Backend B>
auto Autodiff<B>::reduce_all(const Primitive& x, ops::ReduceOp op) -> Primitive {
  InnerPrimitive y = provided::reduce_all<B>(x.value, op);
  const Shape xs = B::shape(x.value);
  const Shape ones(std::vector<std::int64_t>(xs.rank(), 1));
  switch (op) {
    case ops::ReduceOp::sum:
      return record("sum", std::move(y), {x.node},
                    [xs, ones](const InnerPrimitive& dy, Sink& s) { s.put(0, B::expand(B::reshape(dy, ones), xs)); });
    case ops::ReduceOp::mean:
      return record("mean", std::move(y), {x.node}, [xs, ones](const InnerPrimitive& dy, Sink& s) {
        const auto n = static_cast<double>(xs.numel());
        s.put(0, B::expand(B::reshape(provided::binary_scalar<B, ops::Div>(dy, n), ones), xs));
      });
    case ops::ReduceOp::max:
    case ops::ReduceOp::min: {
      // Like torch.max(x): the gradient is shared evenly among the elements equal to the result
      // (NaN elements, when the result is NaN: a NaN result means some element is NaN).
      InnerPrimitive saved = y;
      return record(ops::reduce_name(op), std::move(y), {x.node},
                    [x = keep(x.value), y = keep(std::move(saved)), ones](const InnerPrimitive& dy, Sink& s) {
                      const InnerPrimitive hit = provided::binary<B, ops::LogicalOr>(
                          provided::binary<B, ops::Equal>(x, B::reshape(y, ones)), provided::unary<B, ops::IsNan>(x));
                      const InnerPrimitive mask = B::cast(hit, B::dtype(x));
                      const InnerPrimitive count = B::reshape(provided::reduce_all<B>(mask, ops::ReduceOp::sum), ones);
                      const InnerPrimitive share =
                          provided::binary<B, ops::Div>(B::reshape(dy, ones), count);
                      s.put(0, provided::binary<B, ops::Mul>(mask, share));
                    });
    }
    case ops::ReduceOp::prod:
      return record("prod", std::move(y), {x.node}, [x = keep(x.value), ones](const InnerPrimitive& dy, Sink& s) {
        const Shape xs = B::shape(x);
        const InnerPrimitive flat = B::reshape(x, Shape{xs.numel()});
        const InnerPrimitive others = B::reshape(product_of_others(flat, 0), xs);
        s.put(0, provided::binary<B, ops::Mul>(B::expand(B::reshape(dy, ones), xs), others));
      });
  }
  KILN_FAIL("reduce_all: unknown reduction");
}

template <Backend B>
auto Autodiff<B>::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) -> Primitive {
  InnerPrimitive y = B::cumulative(x.value, op, dim);
  if (op == ops::CumulativeOp::sum) {
    return record("cumsum", std::move(y), {x.node},
                  [dim](const InnerPrimitive& dy, Sink& s) { s.put(0, reverse_cumsum(dy, dim)); });
  }
  // d/dx_k of sum_i dy_i y_i = (sum_{i >= k} dy_i y_i) / x_k: defined where x_k != 0.
  InnerPrimitive saved = y;
  return record("cumprod", std::move(y), {x.node},
                [x = keep(x.value), y = keep(std::move(saved)), dim](const InnerPrimitive& dy, Sink& s) {
                  const InnerPrimitive weighted = reverse_cumsum(provided::binary<B, ops::Mul>(dy, y), dim);
                  s.put(0, provided::binary<B, ops::Div>(weighted, x));
                });
}

template <Backend B>
auto Autodiff<B>::sort(const Primitive& x, std::int64_t dim, bool descending) -> std::pair<Primitive, Primitive> {
  // Not a structured binding: lambdas capture those only from C++20 compilers on (Clang 16).
  std::pair<InnerPrimitive, InnerPrimitive> sorted_pair = B::sort(x.value, dim, descending);
  InnerPrimitive& indices = sorted_pair.second;
  Primitive sorted = record("sort", std::move(sorted_pair.first), {x.node},
                            [indices, xs = B::shape(x.value), dim](const InnerPrimitive& dy, Sink& s) {
                              const InnerPrimitive zeros = provided::full<B>(xs, 0.0, B::dtype(dy), B::device(dy));
                              s.put(0, B::scatter(zeros, dim, indices, dy, ops::ScatterMode::assign));
                            });
  return {std::move(sorted), from_inner(std::move(indices))};
}

template <Backend B>
auto Autodiff<B>::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) -> Primitive {
  std::vector<ops::SliceRange> r(ranges.begin(), ranges.end());
  return record("slice", B::slice(x.value, ranges), {x.node},
                [r, xs = B::shape(x.value)](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, B::slice_assign(provided::full<B>(xs, 0.0, B::dtype(dy), B::device(dy)), r, dy));
                });
}

template <Backend B>
auto Autodiff<B>::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
    const Primitive& value) -> Primitive {
  std::vector<ops::SliceRange> r(ranges.begin(), ranges.end());
  return record("slice_assign", B::slice_assign(x.value, ranges, value.value), {x.node, value.node},
                [r, vs = B::shape(value.value)](const InnerPrimitive& dy, Sink& s) {
                  if (s.needs(0)) s.put(0, B::slice_assign(dy, r, provided::full<B>(vs, 0.0, B::dtype(dy), B::device(dy))));
                  if (s.needs(1)) s.put(1, B::slice(dy, r));
                });
}

template <Backend B>
auto Autodiff<B>::flip(const Primitive& x, std::span<const std::int64_t> dims) -> Primitive {
  std::vector<std::int64_t> d(dims.begin(), dims.end());
  return record("flip", provided::flip<B>(x.value, dims), {x.node},
                [d](const InnerPrimitive& dy, Sink& s) { s.put(0, provided::flip<B>(dy, d)); });
}

template <Backend B>
auto Autodiff<B>::cat(std::span<const Primitive> xs, std::int64_t dim) -> Primitive {
  std::vector<InnerPrimitive> values;
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<std::int64_t> sizes;
  for (const Primitive& x : xs) {
    values.push_back(x.value);
    nodes.push_back(x.node);
    sizes.push_back(B::shape(x.value)[static_cast<std::size_t>(dim)]);
  }
  return record("cat", provided::cat<B>(values, dim), std::move(nodes), [sizes, dim](const InnerPrimitive& dy, Sink& s) {
    std::int64_t start = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (s.needs(i)) s.put(i, B::slice(dy, along(B::shape(dy), dim, start, sizes[i])));
      start += sizes[i];
    }
  });
}

template <Backend B>
auto Autodiff<B>::gather(const Primitive& x, std::int64_t dim, const Primitive& index) -> Primitive {
  return record("gather", B::gather(x.value, dim, index.value), {x.node, nullptr},
                [xs = B::shape(x.value), dim, index = keep(index.value)](const InnerPrimitive& dy, Sink& s) {
                  const InnerPrimitive zeros = provided::full<B>(xs, 0.0, B::dtype(dy), B::device(dy));
                  s.put(0, B::scatter(zeros, dim, index, dy, ops::ScatterMode::add));
                });
}

template <Backend B>
auto Autodiff<B>::scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
    ops::ScatterMode mode) -> Primitive {
  return record("scatter", B::scatter(x.value, dim, index.value, src.value, mode), {x.node, nullptr, src.node},
                [index = keep(index.value), ss = B::shape(src.value), dim, mode](const InnerPrimitive& dy, Sink& s) {
                  // Assigned positions lose their old value, so their gradient is zero.
                  if (s.needs(0)) {
                    if (mode == ops::ScatterMode::add) {
                      s.put(0, dy);
                    } else {
                      const InnerPrimitive zeros = provided::full<B>(ss, 0.0, B::dtype(dy), B::device(dy));
                      s.put(0, B::scatter(dy, dim, index, zeros, ops::ScatterMode::assign));
                    }
                  }
                  if (s.needs(2)) {
                    // Only the index-shaped corner of src is scattered; the rest gets zero.
                    const InnerPrimitive g = B::gather(dy, dim, index);
                    const Shape is = B::shape(index);
                    if (is == ss) {
                      s.put(2, g);
                    } else {
                      std::vector<ops::SliceRange> corner;
                      for (std::size_t d = 0; d < is.rank(); ++d) corner.push_back({0, is[d], 1});
                      s.put(2, B::slice_assign(provided::full<B>(ss, 0.0, B::dtype(dy), B::device(dy)), corner, g));
                    }
                  }
                });
}

template <Backend B>
auto Autodiff<B>::index_select(const Primitive& x, std::int64_t dim, const Primitive& index) -> Primitive {
  return record("index_select", provided::index_select<B>(x.value, dim, index.value), {x.node, nullptr},
                [xs = B::shape(x.value), dim, index = keep(index.value)](const InnerPrimitive& dy, Sink& s) {
                  s.put(0, provided::index_add<B>(provided::full<B>(xs, 0.0, B::dtype(dy), B::device(dy)), dim, index, dy));
                });
}

template <Backend B>
auto Autodiff<B>::index_add(const Primitive& x, std::int64_t dim, const Primitive& index,
    const Primitive& values) -> Primitive {
  return record("index_add", provided::index_add<B>(x.value, dim, index.value, values.value), {x.node, nullptr, values.node},
                [dim, index = keep(index.value)](const InnerPrimitive& dy, Sink& s) {
                  if (s.needs(0)) s.put(0, dy);
                  if (s.needs(2)) s.put(2, provided::index_select<B>(dy, dim, index));
                });
}

template <Backend B>
template <class Op>
typename Autodiff<B>::Primitive Autodiff<B>::unary(const Primitive& x) {
  InnerPrimitive y = provided::unary<B, Op>(x.value);
  if constexpr (!ops::DifferentiableUnary<Op>) {
    return from_inner(std::move(y));
  } else if constexpr (std::same_as<Op, ops::Neg>) {
    return record(Op::name, std::move(y), {x.node},
                  [](InnerPrimitive&& dy, Sink& s) { s.put(0, provided::unary<B, ops::Neg>(std::move(dy))); });
  } else {
    InnerPrimitive saved = y;
    // Where Op's gradient does not read x (relu's reads y), y stands in for it (same shape
    // and dtype, never read), so that the backward pass does not keep x alive: less memory,
    // and under Fusion<B> nothing then holds x's tree, whose work can fuse into a matmul.
    static const bool reads_x = []() -> bool {
      const codegen::NodePtr grad = codegen::trace_unary_grad<Op>(codegen::ScalarType::f32);
      return codegen::inputs_read(std::span(&grad, 1), 3)[0];
    }();
    InnerPrimitive kept = reads_x ? x.value : saved;
    return record(Op::name, std::move(y), {x.node},
                  [x = keep(std::move(kept)), y = keep(std::move(saved))](InnerPrimitive&& dy, Sink& s) {
                    s.put(0, provided::unary_backward<B, Op>(x, y, std::move(dy)));
                  });
  }
}

template <Backend B>
template <class Op>
typename Autodiff<B>::Primitive Autodiff<B>::binary(const Primitive& a, const Primitive& b) {
  InnerPrimitive y = provided::binary<B, Op>(a.value, b.value);
  if constexpr (!ops::DifferentiableBinary<Op>) {
    return from_inner(std::move(y));
  } else if constexpr (std::same_as<Op, ops::Add> || std::same_as<Op, ops::Sub>) {
    // Linear: dy passes through (negated for the subtrahend), summed to each operand's shape.
    return record(Op::name, std::move(y), {a.node, b.node},
                  [sa = B::shape(a.value), sb = B::shape(b.value)](const InnerPrimitive& dy, Sink& s) {
                    if (s.needs(0)) s.put(0, sum_to(dy, sa));
                    if (!s.needs(1)) return;
                    if constexpr (std::same_as<Op, ops::Sub>) s.put(1, sum_to(provided::unary<B, ops::Neg>(dy), sb));
                    else s.put(1, sum_to(dy, sb));
                  });
  } else if constexpr (std::same_as<Op, ops::Mul>) {
    return record(Op::name, std::move(y), {a.node, b.node},
                  [a = keep(a.value), b = keep(b.value)](InnerPrimitive&& dy, Sink& s) {
                    // dy is given up to the last product that reads it; the kept operand goes
                    // as a copy of its handle, which the product never writes over.
                    if (s.needs(0)) {
                      InnerPrimitive d = s.needs(1) ? dy : std::move(dy);
                      s.put(0, sum_to(provided::binary<B, ops::Mul>(std::move(d), InnerPrimitive(b)), B::shape(a)));
                    }
                    if (s.needs(1))
                      s.put(1, sum_to(provided::binary<B, ops::Mul>(std::move(dy), InnerPrimitive(a)), B::shape(b)));
                  });
  } else {
    InnerPrimitive saved = y;
    return record(Op::name, std::move(y), {a.node, b.node},
                  [a = keep(a.value), b = keep(b.value), y = keep(std::move(saved))](InnerPrimitive&& dy, Sink& s) {
                    if (s.needs(0)) {  // dy is given up to the last gradient that reads it
                      InnerPrimitive d = s.needs(1) ? dy : std::move(dy);
                      s.put(0, sum_to(provided::binary_backward<B, Op>(a, b, y, std::move(d), ops::Operand::lhs),
                                      B::shape(a)));
                    }
                    if (s.needs(1))
                      s.put(1, sum_to(provided::binary_backward<B, Op>(a, b, y, std::move(dy), ops::Operand::rhs),
                                      B::shape(b)));
                  });
  }
}

template <Backend B>
template <class Op>
typename Autodiff<B>::Primitive Autodiff<B>::binary_scalar(const Primitive& a, double scalar) {
  InnerPrimitive y = provided::binary_scalar<B, Op>(a.value, scalar);
  if constexpr (!ops::DifferentiableBinary<Op>) {
    return from_inner(std::move(y));
  } else if constexpr (std::same_as<Op, ops::Add> || std::same_as<Op, ops::Sub>) {
    return record(Op::name, std::move(y), {a.node}, [](const InnerPrimitive& dy, Sink& s) { s.put(0, dy); });
  } else if constexpr (std::same_as<Op, ops::Mul> || std::same_as<Op, ops::Div>) {
    return record(Op::name, std::move(y), {a.node}, [scalar](InnerPrimitive&& dy, Sink& s) {
      s.put(0, provided::binary_scalar<B, Op>(std::move(dy), scalar));
    });
  } else {
    InnerPrimitive saved = y;
    return record(Op::name, std::move(y), {a.node},
                  [a = keep(a.value), scalar, y = keep(std::move(saved))](InnerPrimitive&& dy, Sink& s) {
                    // The scalar as a one-element tensor that broadcasts against a.
                    const InnerPrimitive b =
                        provided::full<B>(Shape(std::vector<std::int64_t>(B::shape(a).rank(), 1)), scalar, B::dtype(a),
                                B::device(a));
                    s.put(0, provided::binary_backward<B, Op>(a, b, y, std::move(dy), ops::Operand::lhs));
                  });
  }
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::reshape(const Primitive& x, const Shape& shape) {
  return record("reshape", B::reshape(x.value, shape), {x.node},
                [xs = B::shape(x.value)](const InnerPrimitive& dy, Sink& s) { s.put(0, B::reshape(dy, xs)); });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  std::vector<std::int64_t> inverse(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) inverse[static_cast<std::size_t>(dims[i])] = static_cast<std::int64_t>(i);
  return record("permute", B::permute(x.value, dims), {x.node},
                [inverse](const InnerPrimitive& dy, Sink& s) { s.put(0, B::permute(dy, inverse)); });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::expand(const Primitive& x, const Shape& shape) {
  return record("expand", B::expand(x.value, shape), {x.node},
                [xs = B::shape(x.value)](const InnerPrimitive& dy, Sink& s) { s.put(0, sum_to(dy, xs)); });
}

}  // namespace kiln

// The rules of the neural-network primitives: the fused composites, matmul, linear,
// convolution, pooling and interpolation.
#include "kiln/autodiff/nn.hpp"
