// One Adam / AdamW update of a parameter tensor and its two moment tensors, on the inner
// (non-autodiff) backend. A backend may fuse the step into one pass by providing
// B::adam_step (the CPU backend does); otherwise it is built from tensor ops here, which
// is also the reference the fused kernels are tested against.
//
// The parameter and the moments may be given up (std::move): a fused step then writes the
// results over their buffers wherever nothing else holds them, as torch.optim updates in
// place, and saves a pass of memory traffic per tensor. Tensors passed as they are stay
// unchanged, and so do given-up ones when the step throws.
#pragma once

#include "kiln/ops/optim.hpp"
#include "kiln/tensor/tensor.hpp"

#include <array>

namespace kiln::optim {

// B::adam_step(param, grad, m, v, options) -> {param, m, v}, param, m and v given up
// (rvalues): the backend may write over their buffers, and leaves them whole if it throws.
template <class B>
concept FusesAdamStep = requires(typename B::Primitive p, const ops::AdamStep& options) {
  { B::adam_step(std::move(p), p, std::move(p), std::move(p), options) }
      -> std::same_as<std::array<typename B::Primitive, 3>>;
};

template <class B, std::size_t D> struct AdamState {
  Tensor<B, D> param, m, v;
};

// Returns the updated parameter and moments; m and v start as zeros (step 1). This overload
// takes param, m and v given up (see above).
template <Backend B, std::size_t D>
AdamState<B, D> adam_step(Tensor<B, D>&& param, const Tensor<B, D>& grad, Tensor<B, D>&& m, Tensor<B, D>&& v,
                          const ops::AdamStep& options) {
  KILN_CHECK(param.shape() == grad.shape() && param.shape() == m.shape() && param.shape() == v.shape(),
             "adam_step: param {}, grad {}, m {} and v {} must have one shape", param.shape(), grad.shape(),
             m.shape(), v.shape());
  KILN_CHECK(options.step >= 1, "adam_step: step must count from 1, got {}", options.step);
  if constexpr (FusesAdamStep<B>) {
    // The tensors' own primitives go to the backend, so that they are the only holders of
    // their buffers; they are put back if it throws (it then leaves them whole).
    typename B::Primitive p0 = std::move(param).into_primitive(), m0 = std::move(m).into_primitive(),
                          v0 = std::move(v).into_primitive();
    try {
      auto [p, m2, v2] = B::adam_step(std::move(p0), grad.primitive(), std::move(m0), std::move(v0), options);
      return {Tensor<B, D>(std::move(p)), Tensor<B, D>(std::move(m2)), Tensor<B, D>(std::move(v2))};
    } catch (...) {
      param = Tensor<B, D>(std::move(p0));
      m = Tensor<B, D>(std::move(m0));
      v = Tensor<B, D>(std::move(v0));
      throw;
    }
  } else {
    const auto c = options.constants();
    Tensor<B, D> g = grad;
    if (c.l2) g = g + param * c.weight_decay;
    const Tensor<B, D> p = c.param_scale == 1.0 ? param : param * c.param_scale;
    Tensor<B, D> m2 = m * c.beta1 + g * (1.0 - c.beta1);
    Tensor<B, D> v2 = v * c.beta2 + g * g * (1.0 - c.beta2);
    const Tensor<B, D> denom = v2.sqrt() * c.inv_sqrt_bias2 + c.eps;
    return {p - m2 * c.step_size / denom, std::move(m2), std::move(v2)};
  }
}

// The same with param, m and v left as they are: the step writes fresh tensors.
template <Backend B, std::size_t D>
AdamState<B, D> adam_step(const Tensor<B, D>& param, const Tensor<B, D>& grad, const Tensor<B, D>& m,
                          const Tensor<B, D>& v, const ops::AdamStep& options) {
  return adam_step(Tensor<B, D>(param), grad, Tensor<B, D>(m), Tensor<B, D>(v), options);
}

}  // namespace kiln::optim
