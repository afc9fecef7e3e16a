// The Backend concept: what a type must provide to run Kiln tensors. Read it as the
// contract's documentation; `static_assert(kiln::Backend<MyBackend>)` next to a backend
// proves it complete.
//
// A new backend's author writes the required primitives below first: with them alone,
// every op of Kiln runs. The provided primitives (kiln/backend/provided.hpp: the
// catalogue's elementwise ops and gradient formulas as one-op programs, full, random,
// reduce_all, index_select, index_add, flip, cat, max_pool2d_backward, interpolate,
// avg_pool2d, adaptive_avg_pool2d and their backwards, a linear layer's linear, layer norm
// with its weight and bias and its backward) have
// default implementations built from the required ones; a backend defines a static member
// of the same name and signature only to make one faster, and the conformance suite tests
// the default against it (tests/backend/provided_test.cpp). The fused composites below
// (FusedSoftmax, FusedLayerNorm, FusedAttention) work the same way.
//
// A backend has one cheap-to-copy, reference-counted handle type, `B::Primitive`, which
// carries its own shape and dtype. Float, Int and Bool tensors share it (the aliases
// FloatTensor/IntTensor/BoolTensor name the roles); the tensor layer enforces kinds at
// compile time, the backend checks dtypes at run time. Ops take and return handles and
// never modify their inputs: "assign" ops return a new handle.
#pragma once

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/backend/provided.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/layout.hpp"
#include "kiln/ops/nn.hpp"
#include "kiln/ops/reduce.hpp"

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

namespace detail {
// A string literal as a template argument.
template <std::size_t N> struct Literal {
  char text[N]{};
  constexpr Literal(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};
// Prefix followed by the backend B's name, as a constant string: the name of a decorator
// over B ("autodiff_cpu", "fusion_vulkan"), which test output uses.
template <Literal Prefix, class B> struct DecoratedName {
  static constexpr std::size_t prefix_size = sizeof(Prefix.text) - 1;
  static constexpr auto storage = [] {
    std::array<char, prefix_size + B::name.size()> s{};
    for (std::size_t i = 0; i < prefix_size; ++i) s[i] = Prefix.text[i];
    for (std::size_t i = 0; i < B::name.size(); ++i) s[prefix_size + i] = B::name[i];
    return s;
  }();
  static constexpr std::string_view value{storage.data(), storage.size()};
};
}  // namespace detail

template <class B>
concept Backend = requires(const typename B::Primitive& p,
                           const std::optional<typename B::Primitive>& maybe, const TensorData& data,
                           const typename B::Device& device, const Shape& shape, DType dtype,
                           std::span<const std::int64_t> dims, std::span<const ops::SliceRange> ranges,
                           std::int64_t dim, bool flag,
                           const ops::Conv2dOptions& conv, const ops::Pool2dOptions& pool,
                           const codegen::Program& program, std::span<const typename B::Primitive> inputs,
                           std::span<const double> params) {
  typename B::Device;
  typename B::Primitive;
  { B::name } -> std::convertible_to<std::string_view>;
  requires std::copyable<typename B::Primitive>;

  // --- creation and host transfer
  { B::from_data(data, device) } -> std::same_as<typename B::Primitive>;
  { B::into_data(p) } -> std::same_as<TensorData>;
  { B::shape(p) } -> std::same_as<Shape>;
  { B::dtype(p) } -> std::same_as<DType>;
  { B::device(p) } -> std::same_as<typename B::Device>;
  { B::to_device(p, device) } -> std::same_as<typename B::Primitive>;
  { B::cast(p, dtype) } -> std::same_as<typename B::Primitive>;

  // --- elementwise: one primitive runs every elementwise program (kiln/codegen/program.hpp):
  // the inputs (of the program's input dtypes, any shapes and layouts) broadcast together,
  // NumPy style; params are the values of its scalar parameters; one new tensor per output,
  // of the broadcast shape. The catalogue's ops and gradient formulas are one-op programs
  // (provided::unary, binary, binary_scalar, where, unary_backward, binary_backward).
  { B::elementwise(program, inputs, params) } -> std::same_as<std::vector<typename B::Primitive>>;

  // --- reductions (the reduced dim is kept with size 1), scans, sorting
  { B::reduce(p, ops::ReduceOp::sum, dim) } -> std::same_as<typename B::Primitive>;
  { B::arg_reduce(p, ops::ArgReduceOp::argmax, dim) } -> std::same_as<typename B::Primitive>;  // i64
  { B::cumulative(p, ops::CumulativeOp::sum, dim) } -> std::same_as<typename B::Primitive>;
  // stable sort along dim: {values, i64 indices}
  { B::sort(p, dim, flag) } -> std::same_as<std::pair<typename B::Primitive, typename B::Primitive>>;

  // --- linear algebra: [..., m, k] @ [..., k, n] with broadcast batch dims
  { B::matmul(p, p) } -> std::same_as<typename B::Primitive>;

  // --- layout (dims and ranges arrive validated and normalized)
  { B::reshape(p, shape) } -> std::same_as<typename B::Primitive>;
  { B::permute(p, dims) } -> std::same_as<typename B::Primitive>;
  { B::expand(p, shape) } -> std::same_as<typename B::Primitive>;
  { B::slice(p, ranges) } -> std::same_as<typename B::Primitive>;
  { B::slice_assign(p, ranges, p) } -> std::same_as<typename B::Primitive>;
  { B::gather(p, dim, p) } -> std::same_as<typename B::Primitive>;
  { B::scatter(p, dim, p, p, ops::ScatterMode::add) } -> std::same_as<typename B::Primitive>;

  // --- neural-network ops, in 2-d NCHW form
  { B::conv2d(p, p, maybe, conv) } -> std::same_as<typename B::Primitive>;
  { B::conv2d_backward_input(p, p, shape, conv) } -> std::same_as<typename B::Primitive>;   // (dy, weight, x shape)
  { B::conv2d_backward_weight(p, p, shape, conv) } -> std::same_as<typename B::Primitive>;  // (x, dy, weight shape)
  { B::max_pool2d(p, pool) } -> std::same_as<std::pair<typename B::Primitive, typename B::Primitive>>;  // {out, i64 flat hw index}
};

// Fused composites a backend may provide for speed. The tensor API and nn use them when
// they exist and fall back to the composition of primitives otherwise (that composition
// stays the reference the fused kernels are tested against).
// - softmax(x, dim, log): softmax (log = false) or log-softmax along dim;
//   softmax_backward(y, dy, dim, log) is its gradient from the output y.
template <class B>
concept FusedSoftmax = requires(const typename B::Primitive& p, std::int64_t dim, bool log) {
  { B::softmax(p, dim, log) } -> std::same_as<typename B::Primitive>;
  { B::softmax_backward(p, p, dim, log) } -> std::same_as<typename B::Primitive>;  // (y, dy)
};
// - layer_norm(x, dims, eps): (x - mean) / sqrt(var + eps) over the last `dims` dims
//   together (biased variance, no affine part); layer_norm_backward(x, dy, dims, eps) is
//   its gradient, recomputing the statistics from x.
template <class B>
concept FusedLayerNorm = requires(const typename B::Primitive& p, std::int64_t dims, double eps) {
  { B::layer_norm(p, dims, eps) } -> std::same_as<typename B::Primitive>;
  { B::layer_norm_backward(p, p, dims, eps) } -> std::same_as<typename B::Primitive>;  // (x, dy)
};

// - attention(q, k, v, mask, causal, scale): scaled-dot-product attention,
//   softmax(q kᵀ · scale) v over q [N, H, L, D], k [N, H, S, D], v [N, H, S, Dv]
//   (kiln/ops/attention.hpp's rule), where the optional bool mask (broadcasting to
//   [N, H, L, S]) is true where a query may not attend to a key, and causal hides key j from
//   query i when j > i. Returns {out [N, H, L, Dv], lse [N, H, L]}: lse is each query's
//   log Σ exp(scores) over the keys it sees, in a float dtype the backend chooses, read only
//   by its own attention_backward(q, k, v, mask, out, lse, dout, causal, scale), which
//   returns {dq, dk, dv} without the [L, S] weights (flash-attention form, where the backend
//   has the kernels).
template <class B>
concept FusedAttention = requires(const typename B::Primitive& p, const std::optional<typename B::Primitive>& mask,
                                  bool causal, double scale) {
  { B::attention(p, p, p, mask, causal, scale) } -> std::same_as<std::pair<typename B::Primitive, typename B::Primitive>>;
  { B::attention_backward(p, p, p, mask, p, p, p, causal, scale) } -> std::same_as<std::array<typename B::Primitive, 3>>;
};

// - row_program(program, inputs, params, domain): runs a row program (an elementwise
//   program with reductions along rows, kiln/codegen/program.hpp) over `domain`, one
//   kernel: softmax, layer norm and the like, with the elementwise work around them.
//   Fusion<B> fuses reductions over the last dim into such programs where B has it.
template <class B>
concept RowPrograms = requires(const codegen::Program& program, std::span<const typename B::Primitive> inputs,
                               std::span<const double> params, const Shape& domain) {
  { B::row_program(program, inputs, params, domain) } -> std::same_as<std::vector<typename B::Primitive>>;
};

// - matmul_program(a, b, program, inputs, params): a @ b with an elementwise program as its
//   epilogue, one kernel: the program's input 0 is the product, its inputs 1.. are
//   `inputs` (each broadcasting to the product's shape), and the result is the program's
//   outputs. The product itself is not returned (a GEMM epilogue never writes it). A backend
//   takes the programs it has kernels for (a bias add and an activation, say) and returns
//   an empty vector for the others, which the caller then runs as a matmul and a program.
//   Fusion<B> fuses the elementwise work after a matmul this way where B has it.
template <class B>
concept MatmulPrograms = requires(const typename B::Primitive& p, const codegen::Program& program,
                                  std::span<const typename B::Primitive> inputs, std::span<const double> params) {
  { B::matmul_program(p, p, program, inputs, params) } -> std::same_as<std::vector<typename B::Primitive>>;
};

// - conv2d_program(x, weight, bias, options, program, inputs, params): conv2d with an
//   elementwise program as its epilogue, as matmul_program (the program's input 0 is the
//   convolution's output).
template <class B>
concept ConvPrograms = requires(const typename B::Primitive& p, const std::optional<typename B::Primitive>& bias,
                                const ops::Conv2dOptions& options, const codegen::Program& program,
                                std::span<const typename B::Primitive> inputs, std::span<const double> params) {
  { B::conv2d_program(p, p, bias, options, program, inputs, params) } -> std::same_as<std::vector<typename B::Primitive>>;
};

// A backend that records gradients (Autodiff<B>): it wraps an inner backend, whose
// primitives hold the values and the gradients.
template <class B>
concept AutodiffBackend =
    Backend<B> && Backend<typename B::Inner> &&
    requires(const typename B::Primitive& p, const typename B::Inner::Primitive& inner,
             typename B::Gradients& grads, bool flag) {
      { B::set_require_grad(p, flag) } -> std::same_as<typename B::Primitive>;
      { B::is_require_grad(p) } -> std::same_as<bool>;
      { B::detach(p) } -> std::same_as<typename B::Primitive>;
      { B::inner(p) } -> std::convertible_to<typename B::Inner::Primitive>;
      { B::from_inner(inner) } -> std::same_as<typename B::Primitive>;
      { B::backward(p) } -> std::same_as<typename B::Gradients>;
      { B::grad(p, grads) } -> std::same_as<std::optional<typename B::Inner::Primitive>>;
      { B::grad_remove(p, grads) } -> std::same_as<std::optional<typename B::Inner::Primitive>>;
    };

}  // namespace kiln
