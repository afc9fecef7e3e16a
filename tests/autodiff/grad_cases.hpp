// The gradient cases: one function per differentiable op (or composite), each paired by
// name with a case of tests/golden/grad.golden written by tests/golden/gen_grad.py.
//
// A case reads its float inputs x0, x1... (f64, from the fixture) through GradInputs and
// returns its result flattened. gradcheck_test.cpp differentiates sum(result * dy) and
// checks the gradients against torch.autograd's (g0, g1... in the fixture) and against
// central finite differences, with the inputs given contiguous and as non-contiguous views.
#pragma once

#include "golden.hpp"

#include <kiln/tensor.hpp>
#include <kiln/tensor/einsum.hpp>
#include <kiln/tensor/linalg.hpp>
#include <kiln/tensor/numeric.hpp>
#include <kiln/tensor/order.hpp>
#include <kiln/tensor/rearrange.hpp>
#include <kiln/tensor/select.hpp>
#include <kiln/tensor/unfold.hpp>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kiln::test {

template <class AD> class GradInputs {
 public:
  GradInputs(const GoldenCase& golden, const std::vector<Tensor<AD, 1>>& leaves, bool noncontiguous)
      : golden_(golden), leaves_(leaves), noncontiguous_(noncontiguous) {}

  // Float input i (fixture tensor "x<i>") with its fixture shape. In the non-contiguous
  // pass, inputs of rank >= 2 arrive as transposed views of transposed copies.
  Tensor<AD, 1> x1(std::size_t i) const { return input<1>(i); }
  Tensor<AD, 2> x2(std::size_t i) const { return input<2>(i); }
  Tensor<AD, 3> x3(std::size_t i) const { return input<3>(i); }
  Tensor<AD, 4> x4(std::size_t i) const { return input<4>(i); }
  // Integer input i (fixture tensor "i<i>"), e.g. the indices of gather.
  Tensor<AD, 1, Int> i1(std::size_t i) const { return index<1>(i); }
  Tensor<AD, 2, Int> i2(std::size_t i) const { return index<2>(i); }
  Tensor<AD, 3, Int> i3(std::size_t i) const { return index<3>(i); }
  // Bool input i (fixture tensor "m<i>"), e.g. a mask.
  Tensor<AD, 2, Bool> m2(std::size_t i) const {
    return Tensor<AD, 2, Bool>::from_data(golden_["m" + std::to_string(i)]);
  }

 private:
  template <std::size_t D> Tensor<AD, D> input(std::size_t i) const {
    const Shape s = golden_["x" + std::to_string(i)].shape();
    KILN_CHECK(s.rank() == D, "grad case {}: x{} has rank {}, the case reads it as rank {}", golden_.name, i, s.rank(),
               D);
    std::array<std::int64_t, D> dims;
    for (std::size_t d = 0; d < D; ++d) dims[d] = s[d];
    Tensor<AD, D> t = leaves_.at(i).template reshape<D>(dims);
    if constexpr (D >= 2) {
      if (noncontiguous_) t = (t.transpose() * 1.0).transpose();
    }
    return t;
  }
  template <std::size_t D> Tensor<AD, D, Int> index(std::size_t i) const {
    return Tensor<AD, D, Int>::from_data(golden_["i" + std::to_string(i)]);
  }

  const GoldenCase& golden_;
  const std::vector<Tensor<AD, 1>>& leaves_;
  bool noncontiguous_;
};

// Any tensor as rank 1, so that cases of every rank share one signature.
template <class B, std::size_t D> Tensor<B, 1> flat(const Tensor<B, D>& t) { return t.template reshape<1>({-1}); }

enum class GradCheck {
  all,           // torch golden gradients and finite differences
  golden_only,   // at a kink on purpose (ties, zeros): finite differences do not apply
};

template <class AD> struct GradCase {
  std::string name;
  std::function<Tensor<AD, 1>(const GradInputs<AD>&)> fn;
  GradCheck check = GradCheck::all;
};

template <class AD> std::vector<GradCase<AD>> grad_cases() {
  using In = GradInputs<AD>;
  using ops::Slice;
  namespace F = kiln::functional;
  using Bias = std::optional<Tensor<AD, 1>>;
  constexpr double inf = std::numeric_limits<double>::infinity();
  return {
      // ---- elementwise, unary (inputs off the kinks; floor/ceil/round/sign have zero gradient)
      {"exp", [](const In& in) { return flat(in.x2(0).exp()); }},
      {"log", [](const In& in) { return flat(in.x2(0).log()); }},
      {"log1p", [](const In& in) { return flat(in.x2(0).log1p()); }},
      {"expm1", [](const In& in) { return flat(in.x2(0).expm1()); }},
      {"sqrt", [](const In& in) { return flat(in.x2(0).sqrt()); }},
      {"rsqrt", [](const In& in) { return flat(in.x2(0).rsqrt()); }},
      {"recip", [](const In& in) { return flat(in.x2(0).recip()); }},
      {"sin", [](const In& in) { return flat(in.x2(0).sin()); }},
      {"cos", [](const In& in) { return flat(in.x2(0).cos()); }},
      {"tan", [](const In& in) { return flat(in.x2(0).tan()); }},
      {"tanh", [](const In& in) { return flat(in.x2(0).tanh()); }},
      {"erf", [](const In& in) { return flat(in.x2(0).erf()); }},
      {"floor", [](const In& in) { return flat(in.x2(0).floor()); }},
      {"ceil", [](const In& in) { return flat(in.x2(0).ceil()); }},
      {"round", [](const In& in) { return flat(in.x2(0).round()); }},
      {"sign", [](const In& in) { return flat(in.x2(0).sign()); }},
      {"neg", [](const In& in) { return flat(-in.x2(0)); }},
      {"abs", [](const In& in) { return flat(in.x2(0).abs()); }},
      // ---- activations, square, softmax
      {"sigmoid", [](const In& in) { return flat(in.x2(0).sigmoid()); }},
      {"silu", [](const In& in) { return flat(in.x2(0).silu()); }},
      {"softplus", [](const In& in) { return flat(in.x2(0).softplus()); }},
      {"softplus_beta_threshold", [](const In& in) { return flat(in.x2(0).softplus(2.0, 1.0)); }},
      {"hard_sigmoid", [](const In& in) { return flat(in.x2(0).hard_sigmoid()); }},
      {"gelu", [](const In& in) { return flat(in.x2(0).gelu()); }},
      {"gelu_tanh", [](const In& in) { return flat(in.x2(0).gelu(true)); }},
      {"relu", [](const In& in) { return flat(in.x2(0).relu()); }},
      {"leaky_relu", [](const In& in) { return flat(in.x2(0).leaky_relu()); }},
      {"leaky_relu_slope", [](const In& in) { return flat(in.x2(0).leaky_relu(0.2)); }},
      {"elu", [](const In& in) { return flat(in.x2(0).elu()); }},
      {"elu_alpha", [](const In& in) { return flat(in.x2(0).elu(0.7)); }},
      {"selu", [](const In& in) { return flat(in.x2(0).selu()); }},
      {"celu", [](const In& in) { return flat(in.x2(0).celu(1.5)); }},
      {"hardtanh", [](const In& in) { return flat(in.x2(0).hardtanh()); }},
      {"hardtanh_range", [](const In& in) { return flat(in.x2(0).hardtanh(-0.5, 2.0)); }},
      {"relu6", [](const In& in) { return flat(in.x2(0).relu6()); }},
      {"hardswish", [](const In& in) { return flat(in.x2(0).hardswish()); }},
      {"mish", [](const In& in) { return flat(in.x2(0).mish()); }},
      {"log_sigmoid", [](const In& in) { return flat(in.x2(0).log_sigmoid()); }},
      {"softsign", [](const In& in) { return flat(in.x2(0).softsign()); }},
      {"tanhshrink", [](const In& in) { return flat(in.x2(0).tanhshrink()); }},
      {"hardshrink", [](const In& in) { return flat(in.x2(0).hardshrink()); }},
      {"hardshrink_lambd", [](const In& in) { return flat(in.x2(0).hardshrink(1.2)); }},
      {"softshrink", [](const In& in) { return flat(in.x2(0).softshrink()); }},
      {"softshrink_lambd", [](const In& in) { return flat(in.x2(0).softshrink(1.2)); }},
      {"threshold", [](const In& in) { return flat(in.x2(0).threshold(0.3, -2.0)); }},
      {"softmin", [](const In& in) { return flat(in.x2(0).softmin(1)); }},
      {"softmin_dim0", [](const In& in) { return flat(in.x2(0).softmin(0)); }},
      {"glu", [](const In& in) { return flat(in.x2(0).glu()); }},
      {"glu_dim0", [](const In& in) { return flat(in.x2(0).glu(0)); }},
      {"swiglu", [](const In& in) { return flat(in.x2(0).swiglu()); }},
      {"rrelu_eval", [](const In& in) { return flat(in.x2(0).rrelu(0.1, 0.3)); }},
      {"elu_kinks", [](const In& in) { return flat(in.x2(0).elu()); }, GradCheck::golden_only},
      {"hardtanh_kinks", [](const In& in) { return flat(in.x2(0).hardtanh()); }, GradCheck::golden_only},
      {"relu6_kinks", [](const In& in) { return flat(in.x2(0).relu6()); }, GradCheck::golden_only},
      {"hardshrink_kinks", [](const In& in) { return flat(in.x2(0).hardshrink()); }, GradCheck::golden_only},
      {"softshrink_kinks", [](const In& in) { return flat(in.x2(0).softshrink()); }, GradCheck::golden_only},
      {"threshold_kinks", [](const In& in) { return flat(in.x2(0).threshold(0.3, -2.0)); }, GradCheck::golden_only},
      {"square", [](const In& in) { return flat(in.x2(0).square()); }},
      {"softmax", [](const In& in) { return flat(in.x2(0).softmax(1)); }},
      {"softmax_dim0", [](const In& in) { return flat(in.x3(0).softmax(0)); }},
      {"log_softmax", [](const In& in) { return flat(in.x2(0).log_softmax(1)); }},
      {"log_softmax_dim0", [](const In& in) { return flat(in.x2(0).log_softmax(0)); }},
      // ---- elementwise, binary (with broadcasting)
      {"add_broadcast", [](const In& in) { return flat(in.x2(0) + in.x2(1)); }},
      {"add_broadcast_3d", [](const In& in) { return flat(in.x3(0) + in.x3(1)); }},
      {"sub_broadcast", [](const In& in) { return flat(in.x2(0) - in.x2(1)); }},
      {"mul_broadcast", [](const In& in) { return flat(in.x2(0) * in.x2(1)); }},
      {"div_broadcast", [](const In& in) { return flat(in.x2(0) / in.x2(1)); }},
      {"rem_broadcast", [](const In& in) { return flat(in.x2(0) % in.x2(1)); }},
      {"pow_broadcast", [](const In& in) { return flat(in.x2(0).pow(in.x2(1))); }},
      {"maximum_broadcast", [](const In& in) { return flat(in.x2(0).maximum(in.x2(1))); }},
      {"atan2_broadcast", [](const In& in) { return flat(in.x2(0).atan2(in.x2(1))); }},
      {"minimum_broadcast", [](const In& in) { return flat(in.x2(0).minimum(in.x2(1))); }},
      // Ties send half the gradient to each side, as torch does.
      {"maximum_ties", [](const In& in) { return flat(in.x2(0).maximum(in.x2(1))); }, GradCheck::golden_only},
      {"minimum_ties", [](const In& in) { return flat(in.x2(0).minimum(in.x2(1))); }, GradCheck::golden_only},
      // ---- elementwise, with a scalar
      {"add_scalar", [](const In& in) { return flat(in.x2(0) + 1.5); }},
      {"sub_scalar", [](const In& in) { return flat(in.x2(0) - 0.7); }},
      {"mul_scalar", [](const In& in) { return flat(in.x2(0) * -2.5); }},
      {"div_scalar", [](const In& in) { return flat(in.x2(0) / 3.0); }},
      {"rem_scalar", [](const In& in) { return flat(in.x2(0) % 0.75); }},
      {"pow_scalar", [](const In& in) { return flat(in.x2(0).pow(2.5)); }},
      {"pow_scalar_negative_base", [](const In& in) { return flat(in.x2(0).pow(3.0)); }},
      {"maximum_scalar", [](const In& in) { return flat(in.x2(0).maximum(0.3)); }},
      {"atan2_scalar", [](const In& in) { return flat(in.x2(0).atan2(0.8)); }},
      {"asin", [](const In& in) { return flat(in.x2(0).asin()); }},
      {"acos", [](const In& in) { return flat(in.x2(0).acos()); }},
      {"atan", [](const In& in) { return flat(in.x2(0).atan()); }},
      {"sinh", [](const In& in) { return flat(in.x2(0).sinh()); }},
      {"cosh", [](const In& in) { return flat(in.x2(0).cosh()); }},
      {"asinh", [](const In& in) { return flat(in.x2(0).asinh()); }},
      {"acosh", [](const In& in) { return flat(in.x2(0).acosh()); }},
      {"atanh", [](const In& in) { return flat(in.x2(0).atanh()); }},
      {"log2", [](const In& in) { return flat(in.x2(0).log2()); }},
      {"log10", [](const In& in) { return flat(in.x2(0).log10()); }},
      {"exp2", [](const In& in) { return flat(in.x2(0).exp2()); }},
      {"trunc", [](const In& in) { return flat(in.x2(0).trunc()); }},
      {"frac", [](const In& in) { return flat(in.x2(0).frac()); }},
      {"hypot_broadcast", [](const In& in) { return flat(in.x2(0).hypot(in.x2(1))); }},
      {"hypot_scalar", [](const In& in) { return flat(in.x2(0).hypot(0.8)); }},
      {"copysign_broadcast", [](const In& in) { return flat(in.x2(0).copysign(in.x2(1))); }},
      {"copysign_scalar", [](const In& in) { return flat(in.x2(0).copysign(-0.8)); }},
      {"logaddexp_broadcast", [](const In& in) { return flat(in.x2(0).logaddexp(in.x2(1))); }},
      {"logaddexp_scalar", [](const In& in) { return flat(in.x2(0).logaddexp(0.8)); }},
      {"minimum_scalar", [](const In& in) { return flat(in.x2(0).minimum(-0.2)); }},
      {"rsub_scalar", [](const In& in) { return flat(2.0 - in.x2(0)); }},
      {"rdiv_scalar", [](const In& in) { return flat(2.0 / in.x2(0)); }},
      {"clamp", [](const In& in) { return flat(in.x2(0).clamp(-0.5, 0.8)); }},
      {"clamp_min", [](const In& in) { return flat(in.x2(0).clamp_min(0.2)); }},
      {"clamp_max", [](const In& in) { return flat(in.x2(0).clamp_max(-0.1)); }},
      // ---- selection by a mask
      {"where", [](const In& in) { return flat(kiln::where(in.m2(0), in.x2(0), in.x2(1))); }},
      {"mask_where", [](const In& in) { return flat(in.x2(0).mask_where(in.m2(0), in.x2(1))); }},
      {"mask_fill", [](const In& in) { return flat(in.x2(0).mask_fill(in.m2(0), 0.5)); }},
      // ---- reductions over all elements
      {"sum", [](const In& in) { return in.x2(0).sum(); }},
      {"mean", [](const In& in) { return in.x2(0).mean(); }},
      {"prod", [](const In& in) { return in.x2(0).prod(); }},
      {"prod_zero", [](const In& in) { return in.x2(0).prod(); }},  // exact with a zero: FD applies
      {"max", [](const In& in) { return in.x2(0).max(); }},
      {"min", [](const In& in) { return in.x2(0).min(); }},
      // Ties share the gradient evenly, as torch.max(x) does.
      {"max_ties", [](const In& in) { return in.x2(0).max(); }, GradCheck::golden_only},
      {"min_ties", [](const In& in) { return in.x2(0).min(); }, GradCheck::golden_only},
      // ---- reductions along a dim (kept)
      {"sum_dim", [](const In& in) { return flat(in.x3(0).sum_dim(1)); }},
      {"mean_dim", [](const In& in) { return flat(in.x2(0).mean_dim(0)); }},
      {"prod_dim", [](const In& in) { return flat(in.x2(0).prod_dim(1)); }},
      {"prod_dim_zeros", [](const In& in) { return flat(in.x2(0).prod_dim(1)); }},  // rows with one and two zeros
      {"max_dim", [](const In& in) { return flat(in.x2(0).max_dim(0)); }},
      {"max_dim_3d", [](const In& in) { return flat(in.x3(0).max_dim(2)); }},
      {"min_dim", [](const In& in) { return flat(in.x2(0).min_dim(1)); }},
      // Ties: the gradient goes to the index the arg-reduction picks, as torch.max(x, dim).
      {"max_dim_ties", [](const In& in) { return flat(in.x2(0).max_dim(1)); }, GradCheck::golden_only},
      {"min_dim_ties", [](const In& in) { return flat(in.x2(0).min_dim(1)); }, GradCheck::golden_only},
      // ---- composite reductions
      {"var", [](const In& in) { return flat(in.x2(0).var(1)); }},
      {"var_correction0", [](const In& in) { return flat(in.x2(0).var(0, 0)); }},
      {"std", [](const In& in) { return flat(in.x2(0).std(1)); }},
      {"std_correction0", [](const In& in) { return flat(in.x2(0).std(0, 0)); }},
      {"norm_dim_p1", [](const In& in) { return flat(in.x2(0).norm_dim(1.0, 1)); }},
      {"norm_dim_p2", [](const In& in) { return flat(in.x2(0).norm_dim(2.0, 1)); }},
      {"norm_dim_p3", [](const In& in) { return flat(in.x2(0).norm_dim(3.0, 1)); }},
      {"norm_dim_pinf", [](const In& in) { return flat(in.x2(0).norm_dim(inf, 1)); }},
      {"norm_dim_pneginf", [](const In& in) { return flat(in.x2(0).norm_dim(-inf, 0)); }},
      {"norm", [](const In& in) { return in.x2(0).norm(); }},
      {"norm_p3", [](const In& in) { return in.x2(0).norm(3.0); }},
      {"logsumexp", [](const In& in) { return flat(in.x2(0).logsumexp(1)); }},
      // ---- scans and sorting (no zeros for cumprod, no ties for sorting)
      {"cumsum", [](const In& in) { return flat(in.x2(0).cumsum(1)); }},
      {"cumsum_dim0", [](const In& in) { return flat(in.x3(0).cumsum(0)); }},
      {"cumprod", [](const In& in) { return flat(in.x2(0).cumprod(1)); }},
      {"sort", [](const In& in) { return flat(in.x2(0).sort(1)); }},
      {"sort_descending", [](const In& in) { return flat(in.x2(0).sort(0, true)); }},
      {"topk", [](const In& in) { return flat(in.x2(0).topk(2, 1)); }},
      // ---- matmul
      {"matmul", [](const In& in) { return flat(in.x2(0).matmul(in.x2(1))); }},
      {"matmul_batch_broadcast", [](const In& in) { return flat(in.x3(0).matmul(in.x3(1))); }},
      // ---- layout: views and broadcasting
      {"reshape", [](const In& in) { return flat(in.x2(0).template reshape<3>({2, -1, 3})); }},
      {"flatten", [](const In& in) { return flat(in.x3(0).template flatten<2>(1, 2)); }},
      {"unsqueeze", [](const In& in) { return flat(in.x2(0).template unsqueeze<4>()); }},
      {"unsqueeze_dim", [](const In& in) { return flat(in.x2(0).unsqueeze_dim(1)); }},
      {"squeeze_dim", [](const In& in) { return flat(in.x3(0).squeeze_dim(1)); }},
      {"permute", [](const In& in) { return flat(in.x3(0).permute({2, 0, 1})); }},
      {"swap_dims", [](const In& in) { return flat(in.x3(0).swap_dims(0, 2)); }},
      {"transpose", [](const In& in) { return flat(in.x3(0).transpose()); }},
      {"expand", [](const In& in) { return flat(in.x2(0).expand({2, 3, 4})); }},
      {"expand_as", [](const In& in) { return flat(in.x2(0).expand_as(Shape{3, 4})); }},
      {"repeat", [](const In& in) { return flat(in.x2(0).repeat({2, 3})); }},
      // ---- layout: slicing, joining, splitting
      {"slice", [](const In& in) { return flat(in.x2(0).slice({Slice(1, std::nullopt, 2), Slice(-4, -1)})); }},
      {"slice_index", [](const In& in) { return flat(in.x2(0).slice({Slice(-1), Slice(2)})); }},
      {"slice_3d",
       [](const In& in) { return flat(in.x3(0).slice({Slice(), Slice(0, 3, 2), Slice(1, std::nullopt, 3)})); }},
      {"slice_assign",
       [](const In& in) { return flat(in.x2(0).slice_assign({Slice(0, 4, 2), Slice(-4, -2)}, in.x2(1))); }},
      {"narrow", [](const In& in) { return flat(in.x2(0).narrow(1, -4, 3)); }},
      {"cat", [](const In& in) { return flat(kiln::cat(std::vector{in.x2(0), in.x2(1), in.x2(2)}, 1)); }},
      {"stack", [](const In& in) { return flat(kiln::stack(std::vector{in.x2(0), in.x2(1), in.x2(2)}, 1)); }},
      // Pieces put back in another order (and scaled) so that each one reaches the result.
      {"split",
       [](const In& in) {
         const auto p = in.x2(0).split(2, 0);
         return flat(kiln::cat(std::vector{p[2], p[1], p[0] * 2.0}, 0));
       }},
      {"split_sizes",
       [](const In& in) {
         const auto p = in.x2(0).split_sizes({1, 3, 2}, 1);
         return flat(kiln::cat(std::vector{p[2], p[0] * p[0], p[1]}, 1));
       }},
      {"chunk",
       [](const In& in) {
         const auto p = in.x2(0).chunk(3, 1);
         return flat(p[0] * p[1] + p[2]);
       }},
      {"flip", [](const In& in) { return flat(in.x3(0).flip({0, 2})); }},
      {"roll", [](const In& in) { return flat(in.x2(0).roll(2, 1).roll(-1, 0)); }},
      {"pad_constant", [](const In& in) { return flat(in.x2(0).pad({1, 2, 2, 0}, ops::PadMode::constant, 0.5)); }},
      {"pad_reflect", [](const In& in) { return flat(in.x4(0).pad({1, 2, 2, 1}, ops::PadMode::reflect)); }},
      {"pad_reflect_1d", [](const In& in) { return flat(in.x3(0).pad({2, 1}, ops::PadMode::reflect)); }},
      {"pad_replicate", [](const In& in) { return flat(in.x4(0).pad({1, 2, 3, 1}, ops::PadMode::replicate)); }},
      {"tril", [](const In& in) { return flat(in.x2(0).tril()); }},
      {"triu", [](const In& in) { return flat(in.x2(0).triu(1)); }},
      {"tril_batched", [](const In& in) { return flat(in.x3(0).tril(-1)); }},
      // ---- indexing (scatter: no duplicate index; scatter_add and index_add: duplicates)
      {"gather", [](const In& in) { return flat(in.x2(0).gather(1, in.i2(0))); }},
      {"scatter", [](const In& in) { return flat(in.x2(0).scatter(1, in.i2(0), in.x2(1))); }},
      {"scatter_src_larger", [](const In& in) { return flat(in.x2(0).scatter(1, in.i2(0), in.x2(1))); }},
      {"scatter_add", [](const In& in) { return flat(in.x2(0).scatter_add(0, in.i2(0), in.x2(1))); }},
      {"scatter_add_src_larger", [](const In& in) { return flat(in.x2(0).scatter_add(0, in.i2(0), in.x2(1))); }},
      {"index_select", [](const In& in) { return flat(in.x2(0).index_select(0, in.i1(0))); }},
      {"index_select_dim1", [](const In& in) { return flat(in.x2(0).index_select(1, in.i1(0))); }},
      {"index_add", [](const In& in) { return flat(in.x2(0).index_add(0, in.i1(0), in.x2(1))); }},
      {"index_add_dim1", [](const In& in) { return flat(in.x2(0).index_add(1, in.i1(0), in.x2(1))); }},
      // ---- dtype and device
      {"cast_f64", [](const In& in) { return flat(in.x2(0).cast(DType::f64)); }},
      {"to_float_f64", [](const In& in) { return flat(in.x2(0).to_float(DType::f64)); }},
      {"to_device", [](const In& in) { return flat(in.x2(0).to_device(in.x2(0).device())); }},
      // Through f32 and back, on values (and dy) that f32 holds exactly; a step of 1e-6 would
      // be lost in f32, so finite differences do not apply.
      {"cast_f32_round_trip",
       [](const In& in) { return flat(in.x2(0).cast(DType::f32).cast(DType::f64) * 3.0); }, GradCheck::golden_only},
      // ---- convolution
      {"conv1d",
       [](const In& in) {
         return flat(F::conv1d(in.x3(0), in.x3(1), Bias(in.x1(2)), ops::Conv1dOptions{2, 1, 2, 2}));
       }},
      {"conv1d_plain", [](const In& in) { return flat(F::conv1d(in.x3(0), in.x3(1))); }},
      {"conv2d",
       [](const In& in) {
         return flat(F::conv2d(in.x4(0), in.x4(1), Bias(in.x1(2)), ops::Conv2dOptions{{1, 1}, {1, 1}}));
       }},
      {"conv2d_strided_grouped",
       [](const In& in) {
         return flat(F::conv2d(in.x4(0), in.x4(1), Bias(), ops::Conv2dOptions{{2, 1}, {1, 0}, {1, 2}, 2}));
       }},
      {"conv_transpose1d",
       [](const In& in) {
         return flat(F::conv_transpose1d(in.x3(0), in.x3(1), Bias(in.x1(2)),
                                         ops::ConvTranspose1dOptions{2, 1, 1}));
       }},
      {"conv_transpose2d",
       [](const In& in) {
         return flat(F::conv_transpose2d(in.x4(0), in.x4(1), Bias(in.x1(2)),
                                         ops::ConvTranspose2dOptions{{2, 2}, {1, 1}, {1, 1}}));
       }},
      // output_padding 1 >= stride 1 along the height (allowed by the dilation of 2): the other path.
      {"conv_transpose2d_grouped_dilated",
       [](const In& in) {
         return flat(F::conv_transpose2d(in.x4(0), in.x4(1), Bias(),
                                         ops::ConvTranspose2dOptions{{1, 2}, {0, 1}, {1, 1}, {2, 1}, 2}));
       }},
      // ---- pooling (Pool*Options: kernel, stride, padding, dilation, ceil_mode, count_include_pad)
      {"max_pool1d",
       [](const In& in) { return flat(F::max_pool1d(in.x3(0), ops::Pool1dOptions{3, 2, 1, 1, true})); }},
      {"max_pool1d_dilation",
       [](const In& in) { return flat(F::max_pool1d(in.x3(0), ops::Pool1dOptions{2, 1, 1, 3, false})); }},
      {"max_pool2d",
       [](const In& in) { return flat(F::max_pool2d(in.x4(0), ops::Pool2dOptions{{2, 2}, {2, 2}})); }},
      {"max_pool2d_unbatched",
       [](const In& in) { return flat(F::max_pool2d(in.x3(0), ops::Pool2dOptions{{2, 2}, {1, 1}})); }},
      {"max_pool2d_overlap",
       [](const In& in) {
         return flat(F::max_pool2d(in.x4(0), ops::Pool2dOptions{{3, 2}, {2, 1}, {1, 1}, {1, 2}, true}));
       }},
      {"avg_pool1d",
       [](const In& in) { return flat(F::avg_pool1d(in.x3(0), ops::Pool1dOptions{3, 2, 1, 1, false, true})); }},
      {"avg_pool1d_exclude_pad_ceil",
       [](const In& in) { return flat(F::avg_pool1d(in.x3(0), ops::Pool1dOptions{3, 2, 1, 1, true, false})); }},
      {"avg_pool1d_unbatched",
       [](const In& in) { return flat(F::avg_pool1d(in.x2(0), ops::Pool1dOptions{2, 2})); }},
      {"avg_pool2d",
       [](const In& in) {
         return flat(F::avg_pool2d(in.x4(0), ops::Pool2dOptions{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true}));
       }},
      {"avg_pool2d_exclude_pad",
       [](const In& in) {
         return flat(F::avg_pool2d(in.x4(0), ops::Pool2dOptions{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false}));
       }},
      {"avg_pool2d_ceil",
       [](const In& in) {
         return flat(F::avg_pool2d(in.x4(0), ops::Pool2dOptions{{3, 2}, {2, 2}, {1, 0}, {1, 1}, true, true}));
       }},
      {"adaptive_avg_pool1d", [](const In& in) { return flat(F::adaptive_avg_pool1d(in.x3(0), 3)); }},
      {"adaptive_avg_pool2d", [](const In& in) { return flat(F::adaptive_avg_pool2d(in.x4(0), {3, 2})); }},
      {"adaptive_avg_pool2d_up", [](const In& in) { return flat(F::adaptive_avg_pool2d(in.x4(0), {4, 5})); }},
      // ---- resampling
      {"interpolate_nearest", [](const In& in) { return flat(F::interpolate(in.x4(0), {7, 3})); }},
      {"interpolate_bilinear",
       [](const In& in) {
         return flat(F::interpolate(in.x4(0), {6, 7}, ops::InterpolateOptions{ops::InterpolateMode::bilinear, false}));
       }},
      {"interpolate_bilinear_align",
       [](const In& in) {
         return flat(F::interpolate(in.x4(0), {3, 7}, ops::InterpolateOptions{ops::InterpolateMode::bilinear, true}));
       }},
      {"interpolate_bicubic",
       [](const In& in) {
         return flat(F::interpolate(in.x4(0), {6, 3}, ops::InterpolateOptions{ops::InterpolateMode::bicubic, false}));
       }},
      {"interpolate_bicubic_align",
       [](const In& in) {
         return flat(F::interpolate(in.x4(0), {5, 7}, ops::InterpolateOptions{ops::InterpolateMode::bicubic, true}));
       }},
      {"interpolate_nearest_1d", [](const In& in) { return flat(F::interpolate(in.x3(0), 11)); }},
      {"interpolate_linear_1d",
       [](const In& in) {
         return flat(F::interpolate(in.x3(0), 7, ops::InterpolateOptions{ops::InterpolateMode::bilinear, false}));
       }},
      {"interpolate_linear_1d_align",
       [](const In& in) {
         return flat(F::interpolate(in.x3(0), 8, ops::InterpolateOptions{ops::InterpolateMode::bilinear, true}));
       }},
      // ---- free-function tensor ops (kiln/tensor/rearrange.hpp, linalg.hpp)
      {"movedim", [](const In& in) { return flat(movedim(in.x3(0), {0, 1}, {2, 0})); }},
      {"squeeze_all", [](const In& in) { return flat(squeeze<2>(in.x4(0))); }},
      {"repeat_interleave", [](const In& in) { return flat(repeat_interleave(in.x2(0), 3, 1)); }},
      {"diagonal", [](const In& in) { return flat(diagonal(in.x3(0), 1, 2, 0)); }},
      {"diag_of_matrix", [](const In& in) { return flat(diag(in.x2(0), -1)); }},
      {"diag_of_vector", [](const In& in) { return flat(diag(in.x1(0), 2)); }},
      {"trace", [](const In& in) { return flat(trace(in.x2(0))); }},
      {"outer", [](const In& in) { return flat(outer(in.x1(0), in.x1(1))); }},
      {"cross", [](const In& in) { return flat(cross(in.x3(0), in.x3(1), 0)); }},
      // ---- order statistics and selection (kiln/tensor/order.hpp, select.hpp)
      {"cummax", [](const In& in) { return flat(cummax(in.x2(0), 1).first); }},
      {"cummin", [](const In& in) { return flat(cummin(in.x2(0), 0).first); }},
      {"median_dim", [](const In& in) { return flat(median(in.x2(0), 1)); }},
      {"quantile", [](const In& in) { return flat(quantile(in.x2(0), 0.3, 1)); }},
      {"masked_select", [](const In& in) { return masked_select(in.x2(0), in.m2(0)); }},
      // ---- einsum and sliding windows (kiln/tensor/einsum.hpp, unfold.hpp)
      {"einsum_batched", [](const In& in) { return flat(einsum<3>("bij,bjk->ikb", in.x3(0), in.x3(1))); }},
      {"einsum_diagonal", [](const In& in) { return flat(einsum<2>("ii,ij->ij", in.x2(0), in.x2(1))); }},
      {"einsum_chain", [](const In& in) { return flat(einsum<2>("bjk,j,bj->bk", in.x3(0), in.x1(1), in.x2(2))); }},
      {"unfold", [](const In& in) { return flat(F::unfold(in.x4(0), {3, 2}, {{2, 1}, {1, 2}, {2, 3}})); }},
      {"fold", [](const In& in) { return flat(F::fold(in.x3(0), {4, 5}, {2, 3}, {{1, 1}, {1, 0}, {1, 1}})); }},
      {"pixel_shuffle", [](const In& in) { return flat(F::pixel_shuffle(in.x4(0), 2)); }},
      {"pixel_unshuffle", [](const In& in) { return flat(F::pixel_unshuffle(in.x4(0), 2)); }},
      // ---- small numeric ops (kiln/tensor/numeric.hpp)
      {"lerp", [](const In& in) { return flat(lerp(in.x2(0), in.x2(1), in.x2(2))); }},
      {"fmod", [](const In& in) { return flat(fmod(in.x2(0), in.x2(1))); }},
      {"diff", [](const In& in) { return flat(diff(in.x2(0), 2, 0)); }},
      {"dot", [](const In& in) { return dot(in.x1(0), in.x1(1)); }},
      {"logcumsumexp", [](const In& in) { return flat(logcumsumexp(in.x2(0), 1)); }},
      {"kthvalue", [](const In& in) { return flat(kthvalue(in.x2(0), 2, 1).first); }},
      {"normalize", [](const In& in) { return flat(F::normalize(in.x3(0), 2.0, 1)); }},
      {"nan_to_num", [](const In& in) { return flat(nan_to_num(in.x2(0))); }},
  };
}

}  // namespace kiln::test
