// Fusion<B>: lazy elementwise work as a backend decorator. Fusion<B> is itself a Backend:
// an elementwise program does not run when it is called; its result is a pending tensor
// whose value is the program's scalar tree over the materialised tensors it reads (its
// leaves). An elementwise program whose inputs are pending grows their trees into one, so
// that a chain of ops becomes one program: `gelu(x * a + b) * sigmoid(x)` reads x, a and b
// once and writes the result once, in one B::elementwise call. A pending tensor is
// materialised (flushed) when its value is needed: read to the host, or handed to any
// primitive that is not elementwise (matmul, a reduction, a layout op...), which then runs
// on B. A tensor that is dropped while pending is never computed.
//
// What fuses today: elementwise programs of one computation type (f32, f64, the integers;
// masks and `where` included), with broadcasting and scalar parameters, into trees of at
// most kMaxLeaves materialised inputs, kMaxParams parameters and kMaxNodes nodes (beyond that the input is
// materialised first and read as a leaf). A pending f16 / bf16 result is materialised
// before another op reads it, since fusing would skip its rounding to 16 bits. Where B runs
// row programs (RowPrograms: the CPU and Vulkan), a sum, mean, max or min over the last dim of an f32 /
// f64 tensor fuses too: the elementwise work before it and after it (broadcast back over the
// rows, or per row) joins one row program, so RMS norm, the losses' row sums, and softmax or
// layer norm composed of primitives are one kernel each. A view (reshape, permute, expand,
// slice) of a pending tensor stays pending: its tree reads the source's leaves through the
// view, so `(x * 2).transpose() + y` is one program; a non-elementwise op that takes the view
// gets the view of the materialised source. A cast that changes no computation type (f32
// stored as f16 / bf16, a mask as numbers) fuses; other casts and other reductions do not
// yet: they materialise their inputs. Where B runs matmul or conv programs (MatmulPrograms,
// ConvPrograms: the CPU), an f32 matmul or convolution is deferred, and the elementwise
// program that reads its result as the only holder runs as its epilogue (a bias add and
// relu inside the GEMM, relu inside the convolution).
//
// An intermediate that two pending tensors both read is computed once where that pays: the
// program that materialises one of them writes it as a second output when the other still
// reads it, and a program whose tree holds an intermediate materialised since reads it
// instead of computing it again (Fusion::launch_plan says when). An intermediate that only a
// handle refers to is not written: a C++ temporary looks the same, and writing every
// temporary of `((x * 2).exp() + 1).into_data()` would cost more than it saves.
// Threads: every pending tensor has a mutex; recording reads an
// input's state under its lock and materialising holds the tensor's own lock, so tensors
// recorded on several threads at once, and read on any thread, give the same values.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/backend/strided.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/nn.hpp"
#include "kiln/ops/optim.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln {

// A backend Fusion can decorate: any backend that runs elementwise programs and records no
// gradients (fusion goes under Autodiff: Autodiff<Fusion<B>>, not over it).
template <class B>
concept FusionTarget = Backend<B> && !AutodiffBackend<B> && !requires { typename B::FusionInner; };

namespace fusion::detail {


// What Fusion did, for tests and logs: programs recorded (pending tensors made), and
// kernels launched (B::elementwise calls, each one fused program).
// `compiled` and `cached` split the launches: a program whose structure this Fusion<B> had
// not launched before (a backend that compiles kernels compiles it now), or one it had
// (found by its structure, whatever its sizes and scalar values). `written` counts the
// buffers the launches wrote.
// `reused` counts the intermediates a launch read as materialised leaves instead of computing
// them again; `epilogues` the launches that were a matmul with its program as the epilogue
// (B::matmul_program: the product is not written, and is not counted in `written`);
// `attentions` the compositions softmax(q kᵀ · scale) @ v run as B's fused attention.
struct Counters {
  std::atomic<std::uint64_t> recorded{0}, launched{0}, compiled{0}, cached{0}, written{0}, reused{0}, epilogues{0},
      attentions{0};
};

// Whether KILN_FUSION_LOG is set to something other than 0 (read once).
bool log_enabled();
// One line on stderr for a launched program: the backend, the program's id, whether it
// was new, its inputs, outputs and code, and the steps the backend runs it as where it says
// (Cpu::program_steps: catalogue formulas run as one compiled step each).
void log_launch(std::string_view backend, const codegen::Program& program, bool compiled,
                std::span<const Shape> input_shapes, std::span<const Shape> output_shapes,
                std::span<const std::string> runs);

// The program ids one Fusion<B> has launched: first(id) says whether id is new to it.
struct SeenPrograms {
  std::mutex mutex;
  std::unordered_set<std::uint64_t> ids;
  bool first(std::uint64_t id) {
    const std::lock_guard lock(mutex);
    return ids.insert(id).second;
  }
};

// A pending tensor that another one's tree grew from: the tensor (while it lives) and the node
// of the other tree that computes it.
template <class Tensor> struct Source {
  std::weak_ptr<Tensor> tensor;
  codegen::NodePtr root;
};

// A pending tensor's value: `root` over `leaves` (input i of the tree is leaves[i]) with
// parameter values `params`, computed in `type`.
template <class Tensor> struct Pending {
  codegen::NodePtr root;
  // The pending tensors whose trees are inside this one, with their roots in it.
  std::vector<Source<Tensor>> sources;
  std::vector<std::shared_ptr<Tensor>> leaves;
  std::vector<double> params;
  std::vector<std::uint64_t> param_ids;  // each parameter's identity (new_param_id)
  codegen::ScalarType type = codegen::ScalarType::f32;
  std::size_t nodes = 1;  // an upper bound on the tree's size (shared subtrees count twice)
  // Where the tree reduces along rows (a row program): the shape its leaves are read over,
  // whose last dim the reductions run along. The tensor is that shape, or that shape with
  // its last dim 1 (per row). Without row reductions: the tensor's own shape.
  Shape domain;
  bool reduces = false;
};

// A new parameter's identity: a parameter that two pending trees share (both read one
// recorded op's scalar) is one parameter of the program that joins them, so the subtrees
// reading it stay equal and the program computes them once.
inline std::uint64_t new_param_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// `root` with input i replaced by inputs[i] and parameter j by parameter params[j].
inline codegen::NodePtr substitute(const codegen::NodePtr& root, std::span<const codegen::NodePtr> inputs,
                                   std::span<const int> params, std::unordered_map<const codegen::Node*, codegen::NodePtr>& done) {
  if (auto it = done.find(root.get()); it != done.end()) return it->second;
  codegen::NodePtr out;
  if (root->kind == codegen::Kind::input) {
    out = inputs[static_cast<std::size_t>(root->index)];
  } else if (root->kind == codegen::Kind::param) {
    out = codegen::make_param(params[static_cast<std::size_t>(root->index)]);
  } else if (root->kind == codegen::Kind::constant) {
    out = root;
  } else {
    std::vector<codegen::NodePtr> args;
    for (const codegen::NodePtr& a : root->args) args.push_back(substitute(a, inputs, params, done));
    out = codegen::make_node(root->kind, std::move(args));
  }
  done.emplace(root.get(), out);
  return out;
}

// Tree work of Fusion::launch_plan that does not depend on B, compiled once in libkiln_core
// (src/core/fusion.cpp) rather than in every file that instantiates Fusion<B>.
// Whether a subtree is worth reading from memory where it is materialised, rather than
// computing it again from its leaves: it computes more than arithmetic (a function, a
// division, a row reduction) or reads two leaves or more, so reading it saves a read or more
// than a few instructions per element.
bool worth_storing(const codegen::Node& root);
bool has_row_reduction(const codegen::NodePtr& root);
// `root` with each node that `with` maps replaced by what it maps to.
codegen::NodePtr replace_nodes(const codegen::NodePtr& root,
                               const std::unordered_map<const codegen::Node*, codegen::NodePtr>& with);
// `root` with input i read as input index[i].
codegen::NodePtr renumber_inputs(const codegen::NodePtr& root, std::span<const int> index);

}  // namespace fusion::detail

template <FusionTarget B> struct Fusion {
  using FusionInner = B;
  using InnerPrimitive = typename B::Primitive;
  using Device = typename B::Device;
  static constexpr std::string_view name = kiln::detail::DecoratedName<"fusion_", B>::value;

  // The most materialised tensors one fused program reads (B's max_program_inputs where it
  // says, else 8), its most parameters (B's max_program_params where it says, else no limit
  // but the nodes'), and the most nodes in its tree.
  static constexpr std::size_t kMaxLeaves = [] {
    if constexpr (requires { B::max_program_inputs; }) return std::size_t{B::max_program_inputs};
    else return std::size_t{8};
  }();
  static constexpr std::size_t kMaxParams = [] {
    if constexpr (requires { B::max_program_params; }) return std::size_t{B::max_program_params};
    else return std::numeric_limits<std::size_t>::max();
  }();
  static constexpr std::size_t kMaxNodes = 512;
  // The most outputs of one launch: the tensor materialised and the intermediates it writes
  // beside it (see launch_plan).
  static constexpr std::size_t kMaxOutputs = 4;

  // How a deferred op is computed: on its own, or with an elementwise program as its epilogue
  // (the program's input 0 is the op's result; `inputs` are its inputs 1..), which gives
  // nothing where B has no kernel for that program.
  struct Deferred {
    std::function<InnerPrimitive()> compute;
    std::function<std::vector<InnerPrimitive>(const codegen::Program&, std::span<const InnerPrimitive>,
                                              std::span<const double>)>
        with_epilogue;
    // A matmul's operands (Fusion::matmul), so that a softmax over its product can become
    // attention weights.
    std::optional<std::array<InnerPrimitive, 2>> product;
    // Attention weights: softmax(a @ b · scale) along the last dim, a deferred softmax
    // (Fusion::softmax) that a matmul by v runs as B's fused attention.
    struct Weights {
      InnerPrimitive q, k_transposed;
      double scale = 1;
    };
    std::optional<Weights> weights;
  };

  // A tensor: materialised (`value`) or pending; shape, dtype and device are known either way.
  struct Tensor {
    Shape shape;
    DType dtype = DType::f32;
    Device device{};
    std::mutex mutex;
    std::optional<InnerPrimitive> value;
    // Immutable once made, so that a program growing from it shares it instead of copying.
    std::shared_ptr<const fusion::detail::Pending<Tensor>> pending;
    // A view (reshape, permute, expand, slice) of a pending tensor: `pending` reads the
    // source's leaves through the view, so elementwise work on it fuses with the source's;
    // where a non-elementwise op needs its value, `view` takes the view of the source's value
    // on B instead (a matmul reads a transpose in place, as without fusion).
    std::function<InnerPrimitive()> view;
    // An op not computed yet whose elementwise successor may run as its epilogue (a matmul,
    // a convolution: Deferred): elementwise programs read it as a leaf, and the one that
    // materialises first may compute it with its program as the epilogue.
    std::shared_ptr<const Deferred> deferred;
    // The pending tensors recorded from this one while it was pending (their trees hold
    // its tree), while they live; guarded by `mutex`.
    std::vector<std::weak_ptr<Tensor>> readers;
    // Whether `value` is set (read without the lock: set once, never unset).
    std::atomic<bool> done{false};
    // Whether something will read this tensor later (retain: Autodiff's saved values), so that
    // no epilogue computes a deferred op it needs without writing it.
    std::atomic<bool> retained{false};
  };
  struct Primitive {
    std::shared_ptr<Tensor> node;
  };
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;

  static fusion::detail::Counters& counters() {
    static fusion::detail::Counters c;
    return c;
  }

  // ================================================================ materialising
  // The value of p, computed now if it is pending (one B::elementwise call).
  static InnerPrimitive value(const Primitive& p);
  // The value of an optional input (a mask, a weight), where it is given.
  static std::optional<InnerPrimitive> value(const std::optional<Primitive>& p) {
    if (!p) return std::nullopt;
    return value(*p);
  }
  static Primitive wrap(InnerPrimitive v) {
    auto t = std::make_shared<Tensor>();
    t->shape = B::shape(v);
    t->dtype = B::dtype(v);
    t->device = B::device(v);
    t->value = std::move(v);
    t->done = true;
    return {std::move(t)};
  }
  // Marks p as read later (Autodiff<Fusion<B>> calls it for the values its backward rules
  // keep): a deferred op that p's tree needs is then not computed inside an epilogue.
  static void retain(const Primitive& p) {
    KILN_CHECK(p.node != nullptr, "{}: an empty tensor handle", name);
    p.node->retained = true;
  }
  static bool is_pending(const Primitive& p) {
    const std::lock_guard lock(p.node->mutex);
    return !p.node->value.has_value();
  }

  // ================================================================ creation and host transfer
  static Primitive from_data(const TensorData& data, const Device& device) { return wrap(B::from_data(data, device)); }
  static TensorData into_data(const Primitive& p) { return B::into_data(value(p)); }
  static Shape shape(const Primitive& p) { return p.node->shape; }
  static DType dtype(const Primitive& p) { return p.node->dtype; }
  static Device device(const Primitive& p) { return p.node->device; }
  static Primitive to_device(const Primitive& p, const Device& device) { return wrap(B::to_device(value(p), device)); }
  // A cast fuses where it changes no computation type (cast_pending); others run on B.
  static Primitive cast(const Primitive& p, DType dtype) {
    if (auto fused = cast_pending(p, dtype)) return *fused;
    return wrap(B::cast(value(p), dtype));
  }

  // ================================================================ elementwise: recorded, not run
  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);

  // ================================================================ everything else runs on B
  // A sum, mean, max or min over the last dim of a float tensor fuses where B runs row
  // programs: the result is pending, its tree a row reduction of x's, and the elementwise
  // work after it (softmax's exp(x - max) / sum, layer norm's scaling) joins the same program.
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) {
    if constexpr (RowPrograms<B>) {
      if (auto fused = reduce_rows(x, op, dim)) return *fused;
    }
    return wrap(B::reduce(value(x), op, dim));
  }
  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
    return wrap(B::arg_reduce(value(x), op, dim));
  }
  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
    return wrap(B::cumulative(value(x), op, dim));
  }
  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending) {
    auto [values, indices] = B::sort(value(x), dim, descending);
    return {wrap(std::move(values)), wrap(std::move(indices))};
  }
  // Where B runs matmul programs, an f32 product is not computed here: the elementwise work
  // after it (a bias add, an activation, a residual add) becomes its epilogue where B takes
  // it (see epilogue_leaf), else it is computed when first needed.
  static Primitive matmul(const Primitive& a, const Primitive& b) {
    if constexpr (MatmulPrograms<B>) {
      if (a.node->dtype == DType::f32 && b.node->dtype == DType::f32) {
        if constexpr (FusedAttention<B>) {
          if (auto out = attention_of_weights(a, b)) return *out;
        }
        const ops::MatmulShape shape = ops::matmul_shape(a.node->shape, a.node->dtype, b.node->shape, b.node->dtype);
        const InnerPrimitive va = value(a), vb = value(b);
        auto deferred = std::make_shared<Deferred>();
        deferred->product = std::array{va, vb};
        deferred->compute = [a = va, b = vb] { return B::matmul(a, b); };
        deferred->with_epilogue = [a = va, b = vb](const codegen::Program& program,
                                                   std::span<const InnerPrimitive> inputs,
                                                   std::span<const double> params) {
          return B::matmul_program(a, b, program, inputs, params);
        };
        return defer(shape.out(), a.node->device, std::move(deferred));
      }
    }
    return wrap(B::matmul(value(a), value(b)));
  }
  // Views of a pending tensor stay pending (see Tensor::view): reshape where each leaf has
  // the tensor's shape or is one element, permute, expand and slice always.
  static Primitive reshape(const Primitive& x, const Shape& shape) {
    KILN_CHECK(shape.numel() == x.node->shape.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)",
               x.node->shape, x.node->shape.numel(), shape, shape.numel());
    const auto leaf = [&](const InnerPrimitive& l) -> std::optional<InnerPrimitive> {
      if (B::shape(l).numel() == 1) return B::reshape(l, Shape{1});
      if (B::shape(l) != x.node->shape) return std::nullopt;
      return B::reshape(l, shape);
    };
    if (auto v = pending_view(x, shape, leaf, [shape](const InnerPrimitive& p) { return B::reshape(p, shape); })) return *v;
    return wrap(B::reshape(value(x), shape));
  }
  static Primitive permute(const Primitive& x, std::span<const std::int64_t> dims) {
    const std::vector<std::int64_t> order(dims.begin(), dims.end());
    const Shape shape = strided::permute(shape_view(x), dims).shape;  // checks dims as B does
    const Shape from = x.node->shape;
    const auto leaf = [&](const InnerPrimitive& l) -> std::optional<InnerPrimitive> {
      return B::permute(B::shape(l) == from ? l : B::expand(l, from), order);
    };
    if (auto v = pending_view(x, shape, leaf, [order](const InnerPrimitive& p) { return B::permute(p, order); })) return *v;
    return wrap(B::permute(value(x), dims));
  }
  static Primitive expand(const Primitive& x, const Shape& shape) {
    (void)strided::broadcast(shape_view(x), shape);  // checks the shapes as B does
    const auto leaf = [&](const InnerPrimitive& l) -> std::optional<InnerPrimitive> { return B::expand(l, shape); };
    if (auto v = pending_view(x, shape, leaf, [shape](const InnerPrimitive& p) { return B::expand(p, shape); })) return *v;
    return wrap(B::expand(value(x), shape));
  }
  static Primitive slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
    const std::vector<ops::SliceRange> kept(ranges.begin(), ranges.end());
    const Shape shape = strided::slice(shape_view(x), ranges).shape;  // checks the ranges as B does
    const Shape from = x.node->shape;
    const auto leaf = [&](const InnerPrimitive& l) -> std::optional<InnerPrimitive> {
      return B::slice(B::shape(l) == from ? l : B::expand(l, from), kept);
    };
    if (auto v = pending_view(x, shape, leaf, [kept](const InnerPrimitive& p) { return B::slice(p, kept); })) return *v;
    return wrap(B::slice(value(x), ranges));
  }
  static Primitive slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& v) {
    return wrap(B::slice_assign(value(x), ranges, value(v)));
  }
  static Primitive gather(const Primitive& x, std::int64_t dim, const Primitive& index) {
    return wrap(B::gather(value(x), dim, value(index)));
  }
  static Primitive scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                           ops::ScatterMode mode) {
    return wrap(B::scatter(value(x), dim, value(index), value(src), mode));
  }
  // Where B runs conv programs, an f32 convolution is deferred as a matmul is (the activation
  // after it becomes its epilogue); its operands are checked here, as B checks them.
  static Primitive conv2d(const Primitive& x, const Primitive& w, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& o) {
    std::optional<InnerPrimitive> b;
    if (bias) b = value(*bias);
    if constexpr (ConvPrograms<B>) {
      if (x.node->dtype == DType::f32 && w.node->dtype == DType::f32 && (!b || B::dtype(*b) == DType::f32)) {
        const Shape shape = ops::conv_output_shape("conv2d", x.node->shape, w.node->shape, o.stride, o.padding,
                                                   o.dilation, o.groups);
        ops::check_conv_dtypes("conv2d", x.node->shape, x.node->dtype, w.node->shape, w.node->dtype,
                               b ? std::optional(std::pair{B::shape(*b), B::dtype(*b)}) : std::nullopt, w.node->shape[0]);
        const InnerPrimitive vx = value(x), vw = value(w);
        auto deferred = std::make_shared<Deferred>();
        deferred->compute = [x = vx, w = vw, b, o] { return B::conv2d(x, w, b, o); };
        deferred->with_epilogue = [x = vx, w = vw, b, o](const codegen::Program& program,
                                                         std::span<const InnerPrimitive> inputs,
                                                         std::span<const double> params) {
          return B::conv2d_program(x, w, b, o, program, inputs, params);
        };
        return defer(shape, x.node->device, std::move(deferred));
      }
    }
    return wrap(B::conv2d(value(x), value(w), b, o));
  }
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& w, const Shape& x_shape,
                                         const ops::Conv2dOptions& o) {
    return wrap(B::conv2d_backward_input(value(dy), value(w), x_shape, o));
  }
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& w_shape,
                                          const ops::Conv2dOptions& o) {
    return wrap(B::conv2d_backward_weight(value(x), value(dy), w_shape, o));
  }
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& o) {
    auto [out, indices] = B::max_pool2d(value(x), o);
    return {wrap(std::move(out)), wrap(std::move(indices))};
  }
  // B's overrides of provided primitives, where it has them, on materialised inputs: without
  // them Fusion<B> would run the provided defaults instead of B's faster kernels.
  static Primitive full(const Shape& shape, double v, DType dtype, const Device& device)
    requires provided::detail::HasFull<B> {
    return wrap(B::full(shape, v, dtype, device));
  }
  static Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                          const Device& device) requires provided::detail::HasRandom<B> {
    return wrap(B::random(shape, distribution, stream, dtype, device));
  }
  static Primitive reduce_all(const Primitive& x, ops::ReduceOp op) requires provided::detail::HasReduceAll<B> {
    return wrap(B::reduce_all(value(x), op));
  }
  static Primitive index_select(const Primitive& x, std::int64_t dim, const Primitive& index)
    requires provided::detail::HasIndexSelect<B> {
    return wrap(B::index_select(value(x), dim, value(index)));
  }
  static Primitive index_add(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& values)
    requires provided::detail::HasIndexAdd<B> {
    return wrap(B::index_add(value(x), dim, value(index), value(values)));
  }
  static Primitive flip(const Primitive& x, std::span<const std::int64_t> dims) requires provided::detail::HasFlip<B> {
    return wrap(B::flip(value(x), dims));
  }
  static Primitive cat(std::span<const Primitive> xs, std::int64_t dim) requires provided::detail::HasCat<B> {
    std::vector<InnerPrimitive> inner;
    for (const Primitive& x : xs) inner.push_back(value(x));
    return wrap(B::cat(inner, dim));
  }
  static Primitive max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                       const ops::Pool2dOptions& o) requires provided::detail::HasMaxPool2dBackward<B> {
    return wrap(B::max_pool2d_backward(value(x), value(dy), value(indices), o));
  }
  static Primitive avg_pool2d(const Primitive& x, const ops::Pool2dOptions& o) requires provided::detail::HasAvgPool2d<B> {
    return wrap(B::avg_pool2d(value(x), o));
  }
  static Primitive avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& o)
    requires provided::detail::HasAvgPool2dBackward<B> {
    return wrap(B::avg_pool2d_backward(value(x), value(dy), o));
  }
  static Primitive adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> size)
    requires provided::detail::HasAdaptiveAvgPool2d<B> {
    return wrap(B::adaptive_avg_pool2d(value(x), size));
  }
  static Primitive adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy)
    requires provided::detail::HasAdaptiveAvgPool2dBackward<B> {
    return wrap(B::adaptive_avg_pool2d_backward(value(x), value(dy)));
  }
  static Primitive interpolate(const Primitive& x, std::span<const std::int64_t> size, const ops::InterpolateOptions& o)
    requires provided::detail::HasInterpolate<B> {
    return wrap(B::interpolate(value(x), size, o));
  }
  static Primitive interpolate_backward(const Primitive& x, const Primitive& dy, const ops::InterpolateOptions& o)
    requires provided::detail::HasInterpolateBackward<B> {
    return wrap(B::interpolate_backward(value(x), value(dy), o));
  }
  // param, m and v are given up as B's are: a handle nothing else holds (no other handle,
  // no pending program reading it) passes its value on as the only holder of the buffer.
  static std::array<Primitive, 3> adam_step(Primitive&& param, const Primitive& grad, Primitive&& m, Primitive&& v,
                                            const ops::AdamStep& options)
    requires requires(InnerPrimitive p) { B::adam_step(std::move(p), p, std::move(p), std::move(p), options); } {
    const std::array<Primitive*, 3> given{&param, &m, &v};
    std::array<InnerPrimitive, 3> values{value(param), value(m), value(v)};
    const InnerPrimitive g = value(grad);
    std::array<Primitive, 3> taken;
    for (std::size_t k = 0; k < 3; ++k)
      if (given[k]->node.use_count() == 1) taken[k] = std::move(*given[k]);
    for (Primitive& t : taken) t.node.reset();
    try {
      auto [p, m2, v2] = B::adam_step(std::move(values[0]), g, std::move(values[1]), std::move(values[2]), options);
      return {wrap(std::move(p)), wrap(std::move(m2)), wrap(std::move(v2))};
    } catch (...) {  // B left the values whole
      for (std::size_t k = 0; k < 3; ++k)
        if (!given[k]->node) *given[k] = wrap(std::move(values[k]));
      throw;
    }
  }

  // B's hand-fused kernels, where it has them: they read materialised inputs. Softmax and
  // layer norm are not recorded as row programs where B has these: on the CPU the hand-fused
  // kernels are 1.8x to 3x (softmax) and about 4x (layer norm) faster than the same work as a row program
  // (docs/benchmarks.md), more than the pass over the input that materialising it costs.
  // A B without them gets the tensor API's compositions, whose reductions fuse.
  // softmax(q kᵀ · scale) along the last dim, where q kᵀ is a deferred f32 product and the
  // scale (if any) multiplies it or q, stays deferred where B has fused attention: a matmul
  // of it by v then runs B::attention (see attention_weights), as torch.compile rewrites the
  // same composition. Anything else that reads it computes the softmax.
  static Primitive softmax(const Primitive& x, std::int64_t dim, bool log) requires FusedSoftmax<B> {
    if constexpr (FusedAttention<B> && MatmulPrograms<B>) {
      if (auto weights = attention_weights(x, dim, log)) return *weights;
    }
    return wrap(B::softmax(value(x), dim, log));
  }
  static Primitive softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log)
    requires FusedSoftmax<B> {
    return wrap(B::softmax_backward(value(y), value(dy), dim, log));
  }
  static Primitive layer_norm(const Primitive& x, std::int64_t dims, double eps) requires FusedLayerNorm<B> {
    return wrap(B::layer_norm(value(x), dims, eps));
  }
  static Primitive layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps)
    requires FusedLayerNorm<B> {
    return wrap(B::layer_norm_backward(value(x), value(dy), dims, eps));
  }
  // The affine layer norm and its backward as B's one-pass kernels, on materialised inputs.
  // Recorded as the provided default instead (the fused layer norm, then the weight and the
  // bias as a program), the forward takes a pass more, and the backward recomputes the
  // normalised rows and sums the weight's and the bias's gradients in passes of their own.
  static Primitive layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                     const std::optional<Primitive>& bias, std::int64_t dims, double eps)
    requires provided::detail::HasLayerNormAffine<B> {
    return wrap(B::layer_norm_affine(value(x), value(weight), value(bias), dims, eps));
  }
  static LayerNormGradients<Primitive> layer_norm_affine_backward(const Primitive& x,
                                                                  const std::optional<Primitive>& weight,
                                                                  const Primitive& dy, std::int64_t dims, double eps,
                                                                  bool bias)
    requires provided::detail::HasLayerNormAffineBackward<B> {
    auto grads = B::layer_norm_affine_backward(value(x), value(weight), value(dy), dims, eps, bias);
    const auto wrap_given = [](std::optional<InnerPrimitive>& g) -> std::optional<Primitive> {
      if (!g) return std::nullopt;
      return wrap(std::move(*g));
    };
    return {wrap(std::move(grads.dx)), wrap_given(grads.dweight), wrap_given(grads.dbias)};
  }
  // Attention: the stream flushes (value) and B's fused kernel runs on the materialised
  // q, k, v; its [L, S] scores never exist to fuse into.
  static std::pair<Primitive, Primitive> attention(const Primitive& q, const Primitive& k, const Primitive& v,
                                                   const std::optional<Primitive>& mask, bool causal, double scale)
    requires FusedAttention<B> {
    auto [out, lse] = B::attention(value(q), value(k), value(v), value(mask), causal, scale);
    return {wrap(std::move(out)), wrap(std::move(lse))};
  }
  static std::array<Primitive, 3> attention_backward(const Primitive& q, const Primitive& k, const Primitive& v,
                                                     const std::optional<Primitive>& mask, const Primitive& out,
                                                     const Primitive& lse, const Primitive& dout, bool causal,
                                                     double scale) requires FusedAttention<B> {
    auto [dq, dk, dv] = B::attention_backward(value(q), value(k), value(v), value(mask), value(out), value(lse),
                                              value(dout), causal, scale);
    return {wrap(std::move(dq)), wrap(std::move(dk)), wrap(std::move(dv))};
  }

  // w @ v as B's fused attention, where w is attention weights this Fusion<B> deferred
  // (softmax of a product, see attention_weights) and has not computed, and q [N, H, L, D],
  // kᵀ [N, H, D, S] and v [N, H, S, Dv] agree without broadcasting; nullopt otherwise. With
  // the output come what a backward pass needs: the log-sum-exp, and q, k and the scale the
  // kernel ran with (q the product's left operand). Retained weights are rewritten too:
  // Autodiff<Fusion<B>> records one attention node with this, and its softmax node computes
  // the weights only if a backward pass reaches it through another reader.
  struct DeferredAttention {
    Primitive out, lse, q, k;
    double scale = 1;
  };
  static std::optional<DeferredAttention> attention_of(const Primitive& w, const Primitive& v)
    requires FusedAttention<B> {
    const Tensor& t = *w.node;
    if (!t.deferred || !t.deferred->weights || t.done) return std::nullopt;
    const auto& weights = *t.deferred->weights;
    const Shape q = B::shape(weights.q), kt = B::shape(weights.k_transposed), vs = v.node->shape;
    if (q.rank() != 4 || kt.rank() != 4 || vs.rank() != 4 || v.node->dtype != DType::f32) return std::nullopt;
    if (q[0] != kt[0] || q[0] != vs[0] || q[1] != kt[1] || q[1] != vs[1] || q[3] != kt[2] || kt[3] != vs[2])
      return std::nullopt;
    const std::vector<std::int64_t> swap{0, 1, 3, 2};
    InnerPrimitive k = B::permute(weights.k_transposed, swap);
    auto [out, lse] = B::attention(weights.q, k, value(v), std::nullopt, false, weights.scale);
    ++counters().attentions;
    return DeferredAttention{wrap(std::move(out)), wrap(std::move(lse)), wrap(weights.q), wrap(std::move(k)),
                             weights.scale};
  }

 private:
  struct LaunchPlan;

  static void set_value(Tensor& t, InnerPrimitive v) {
    t.value = std::move(v);
    t.pending.reset();
    t.view = nullptr;
    t.deferred.reset();
    t.done = true;
  }

  // Counts a launch of `program` (new to this Fusion<B> or found by its structure) reading
  // `leaves` and writing outputs of `output_shapes`, and logs it where KILN_FUSION_LOG says.
  static void note_launch(const codegen::Program& program, std::span<const std::shared_ptr<Tensor>> leaves,
                          std::span<const Shape> output_shapes, bool epilogue);

  // A deferred op's result, of `shape` (f32): a tensor that elementwise programs read as a leaf.
  static Primitive defer(Shape shape, const Device& device, std::shared_ptr<const Deferred> deferred) {
    auto t = std::make_shared<Tensor>();
    t->shape = std::move(shape);
    t->dtype = DType::f32;
    t->device = device;
    t->deferred = std::move(deferred);
    ++counters().recorded;
    return {std::move(t)};
  }

  // The attention weights softmax(x) over the last dim, deferred, where x [N, H, L, S] is a
  // deferred product a @ b not computed yet, or such a product times a scalar (one pending
  // multiply), and nothing keeps x for later (retained); nullopt otherwise.
  static std::optional<Primitive> attention_weights(const Primitive& x, std::int64_t dim, bool log) {
    const Tensor& t = *x.node;
    if (log || t.shape.rank() != 4 || (dim != 3 && dim != -1) || t.dtype != DType::f32 || t.retained || t.done)
      return std::nullopt;
    const Tensor* scores = &t;
    double scale = 1;
    if (!t.deferred) {
      if (t.view || !t.pending) return std::nullopt;
      const fusion::detail::Pending<Tensor>& p = *t.pending;
      const codegen::Node& root = *p.root;
      if (p.reduces || p.leaves.size() != 1 || root.kind != codegen::Kind::mul || root.args.size() != 2)
        return std::nullopt;
      const codegen::Node& l = *root.args[0];
      const codegen::Node& r = *root.args[1];
      const codegen::Node* param = l.kind == codegen::Kind::param ? &l : r.kind == codegen::Kind::param ? &r : nullptr;
      const codegen::Node* input = param == &l ? &r : &l;
      if (param == nullptr || input->kind != codegen::Kind::input || input->index != 0) return std::nullopt;
      scores = p.leaves[0].get();
      if (scores->shape != t.shape || scores->retained || scores->done) return std::nullopt;
      scale = p.params[static_cast<std::size_t>(param->index)];
    }
    if (!scores->deferred || !scores->deferred->product) return std::nullopt;
    auto deferred = std::make_shared<Deferred>();
    deferred->weights = typename Deferred::Weights{(*scores->deferred->product)[0], (*scores->deferred->product)[1], scale};
    deferred->compute = [x] { return B::softmax(value(x), 3, false); };
    deferred->with_epilogue = [](const codegen::Program&, std::span<const InnerPrimitive>, std::span<const double>) {
      return std::vector<InnerPrimitive>{};  // not an epilogue's op: computed apart
    };
    return defer(t.shape, t.device, std::move(deferred));
  }

  // w @ v as B::attention, where w is attention weights (attention_weights) not computed yet
  // and not retained; nullopt otherwise.
  static std::optional<Primitive> attention_of_weights(const Primitive& w, const Primitive& v)
    requires FusedAttention<B> {
    if (w.node->retained) return std::nullopt;
    auto attention = attention_of(w, v);
    if (!attention) return std::nullopt;
    return std::move(attention->out);
  }

  // The leaf of t's launch that is a deferred op not computed yet (a matmul, a convolution)
  // and can be computed with t's program as its epilogue: t's program is elementwise with one
  // output (no intermediate written beside t), the op's result has t's shape, and nothing
  // will read the op's result later, since an epilogue does not write it: no pending tensor
  // reads it but t and t's sources (the pending tensors t grew from: `x.matmul(w) + b` in
  // `(x.matmul(w) + b).relu()`), and neither it nor a source holding it is retained (kept by
  // Autodiff for its backward pass). Handles are not counted: C++ keeps the temporaries of
  // `pool(conv(x).relu())` alive while the pool reads the relu, and they look like any
  // handle. A handle that does read the op's result (or a source over it) later computes the
  // op again, as an unwritten intermediate is computed again (docs/fusion.md).
  static std::optional<std::size_t> epilogue_leaf(const Tensor& t, const fusion::detail::Pending<Tensor>& pending,
                                                  const LaunchPlan& plan);

  // Materialises t by computing the deferred op plan.leaves[k] with t's program as its
  // epilogue (the op's result is program input 0); false where B does not take the program,
  // which then runs apart.
  static bool run_epilogue(Tensor& t, const fusion::detail::Pending<Tensor>& pending, const LaunchPlan& plan,
                           std::size_t k);

  // Registers each tensor of `readers` as a reader of every source of `pending`
  // and of every deferred op among its leaves (epilogue_leaf reads them).
  static void add_reader(std::span<const Primitive> readers, const fusion::detail::Pending<Tensor>& pending) {
    // (A few sources: scans, not sets, which would allocate on every op recorded.)
    std::vector<const Tensor*> seen;
    const auto add = [&](const std::shared_ptr<Tensor>& s) {
      if (!s || s->done || std::find(seen.begin(), seen.end(), s.get()) != seen.end()) return;
      seen.push_back(s.get());
      const std::lock_guard lock(s->mutex);
      if (s->value) return;
      if (s->readers.size() >= 16)
        std::erase_if(s->readers, [](const std::weak_ptr<Tensor>& r) { return r.expired(); });
      if (s->readers.empty()) s->readers.reserve(4);
      for (const Primitive& r : readers) s->readers.push_back(r.node);
    };
    for (const auto& source : pending.sources) add(source.tensor.lock());
    for (const auto& leaf : pending.leaves)
      if (!leaf->done) add(leaf);  // a deferred op (leaves are materialised or deferred)
  }

  // What the launch materialising t computes: its tree over `leaves` (a row program where
  // `reduces`), and the intermediates it writes beside t (`extra`: each tensor and its root).
  struct LaunchPlan {
    codegen::NodePtr root;
    std::vector<std::shared_ptr<Tensor>> leaves;
    bool reduces = false;
    std::vector<std::pair<std::shared_ptr<Tensor>, codegen::NodePtr>> extra;
    std::uint64_t reused = 0;
  };

  // t's tree, where its sources (the pending tensors it grew from, still alive) make it
  // better:
  // - a source materialised since t was recorded is read as a leaf instead of computed
  //   again, where its subtree is worth storing (fusion::detail::worth_storing) and a leaf is
  //   free (a row program whose reductions all become leaves runs as an elementwise one);
  // - a source still pending is written as an extra output, up to kMaxOutputs in all, where
  //   its subtree is worth storing, it has the program's domain (or is one value per row of a
  //   row program), and a pending tensor outside this launch still reads it: that one's
  //   program then reads it instead of computing it again.
  // Leaves that nothing reads any more are dropped.
  static LaunchPlan launch_plan(const Tensor& t, const fusion::detail::Pending<Tensor>& pending);

  // A contiguous view of x's shape, for the strided:: checks and shapes of views.
  static StridedView shape_view(const Primitive& x) {
    StridedView v;
    v.shape = x.node->shape;
    v.strides = v.shape.contiguous_strides();
    v.dtype = x.node->dtype;
    return v;
  }

  // The view of a pending x (no row reductions) as a pending tensor of `shape`: x's tree
  // over its leaves taken through `leaf` (nullopt: this view does not fold), and `whole` to
  // take the view of x's value where it is materialised. nullopt where x is materialised.
  template <class Leaf, class Whole>
  static std::optional<Primitive> pending_view(const Primitive& x, const Shape& shape, const Leaf& leaf, Whole whole) {
    std::shared_ptr<const fusion::detail::Pending<Tensor>> source;
    {
      const std::lock_guard lock(x.node->mutex);
      if (x.node->value || !x.node->pending) return std::nullopt;
      source = x.node->pending;
    }
    // A view of a tree that reads a product not computed yet is taken of x's value: x is
    // then materialised, its product computed with x's program as its epilogue.
    if (source->reduces || std::any_of(source->leaves.begin(), source->leaves.end(), [](const auto& l) { return !l->done; }))
      return std::nullopt;
    auto pending = std::make_shared<fusion::detail::Pending<Tensor>>(*source);
    pending->leaves.clear();
    // Its tree reads the sources' leaves through the view: it computes the view of each
    // source, not the source. It reads x (where it is materialised, through `view`).
    pending->sources.clear();
    pending->domain = shape;
    for (const auto& l : source->leaves) {  // materialised before they became leaves
      std::optional<InnerPrimitive> v = leaf(*l->value);
      if (!v) return std::nullopt;
      pending->leaves.push_back(wrap(std::move(*v)).node);
    }
    auto t = std::make_shared<Tensor>();
    t->shape = shape;
    t->dtype = x.node->dtype;
    t->device = x.node->device;
    t->pending = std::move(pending);
    t->view = [x, whole = std::move(whole)] { return whole(value(x)); };
    ++counters().recorded;
    Primitive out{std::move(t)};
    fusion::detail::Pending<Tensor> reads;
    reads.sources.push_back({x.node, nullptr});
    add_reader(std::span(&out, 1), reads);
    return out;
  }

  // Whether a pending input with row reductions can join a program of shape `shape` whose
  // tree so far is `into`: its rows are the program's (the program is the rows' shape or
  // one value per row), and the rows of any reduction already in it.
  static bool rows_fit(const fusion::detail::Pending<Tensor>& p, const Shape& shape,
                       const fusion::detail::Pending<Tensor>& into) {
    if (!p.reduces) return true;
    if (into.reduces && into.domain != p.domain) return false;
    return shape == p.domain || shape == ops::keep_dim(p.domain, p.domain.rank() - 1);
  }

  // A cast of a pending elementwise tensor as a pending tensor, where it changes no
  // computation type: an f32 result stored as f16 / bf16 (the program rounds its output,
  // and the result is materialised before another op reads it, as any 16-bit result), and
  // a mask (from a program computing in numbers) as numbers of that type: where(mask, 1, 0).
  static std::optional<Primitive> cast_pending(const Primitive& p, DType dtype);

  // x reduced along its last dim as a pending row reduction, where it fuses (see reduce).
  static std::optional<Primitive> reduce_rows(const Primitive& x, ops::ReduceOp op, std::int64_t dim);

  // Whether a pending input's tree can grow into the program being recorded (`into`, with
  // the leaves, parameters and nodes gathered so far, and `later_inputs` inputs and
  // `later_params` parameters still to come): the same computation type, a result that its
  // dtype holds exactly (not f16 / bf16, which round), and room for its leaves, its
  // parameters and its nodes beside them.
  static bool fusable(const fusion::detail::Pending<Tensor>& p, DType dtype, const fusion::detail::Pending<Tensor>& into,
                      std::size_t later_inputs, std::size_t later_params) {
    if (p.type != into.type) return false;
    if (dtype != DType::boolean && (dtype == DType::f16 || dtype == DType::bf16 || codegen::scalar_type_of(dtype) != p.type))
      return false;
    // The leaves and parameters p would add: those `into` does not have already.
    std::size_t leaves = into.leaves.size() + later_inputs, params = into.params.size() + later_params;
    for (const auto& leaf : p.leaves)
      leaves += std::find(into.leaves.begin(), into.leaves.end(), leaf) == into.leaves.end() ? 1 : 0;
    for (const std::uint64_t id : p.param_ids)
      params += std::find(into.param_ids.begin(), into.param_ids.end(), id) == into.param_ids.end() ? 1 : 0;
    return leaves <= kMaxLeaves && params <= kMaxParams && into.nodes + p.nodes <= kMaxNodes;
  }
};

}  // namespace kiln

// The members that record elementwise programs and that launch them, defined out of the class.
#include "kiln/fusion/record.hpp"
#include "kiln/fusion/launch.hpp"
