// The gradient API of Tensor on an autodiff backend (Autodiff<B>): require_grad,
// backward, grad, detach, and the way to and from the inner backend. On other backends
// the mixin is empty, so these methods do not exist there.
#pragma once

#include "kiln/tensor/fwd.hpp"

#include <optional>

namespace kiln {

template <class B, std::size_t D, class K> class AutodiffApi {};

template <class B, std::size_t D, class K>
  requires AutodiffBackend<B>
class AutodiffApi<B, D, K> : public TensorMixin<B, D, K, AutodiffApi<B, D, K>> {
  using Base = TensorMixin<B, D, K, AutodiffApi<B, D, K>>;
  using typename Base::Self;
  using Base::prim;
  using Base::wrap;

 public:
  using InnerBackend = typename B::Inner;
  using InnerTensor = Tensor<InnerBackend, D, K>;
  using Gradients = typename B::Gradients;

  // This tensor as a leaf whose gradient backward() computes (a tensor that already
  // requires grad is returned as it is).
  Self require_grad() const requires std::same_as<K, Float> { return wrap(B::set_require_grad(prim(), true)); }
  Self set_require_grad(bool require) const requires std::same_as<K, Float> {
    return wrap(B::set_require_grad(prim(), require));
  }
  bool is_require_grad() const { return B::is_require_grad(prim()); }

  // Differentiates this tensor (every element seeded with 1, so a non-scalar result is
  // differentiated as its sum) with respect to every leaf it depends on. The graph is
  // freed afterwards: a second backward() through it throws.
  Gradients backward() const requires std::same_as<K, Float> { return B::backward(prim()); }
  // This leaf's gradient, on the inner backend; empty if it has none in `grads`.
  std::optional<InnerTensor> grad(const Gradients& grads) const {
    auto g = B::grad(prim(), grads);
    if (!g) return std::nullopt;
    return InnerTensor(std::move(*g));
  }
  // Takes the gradient out of `grads` (optimizers consume them this way).
  std::optional<InnerTensor> grad_remove(Gradients& grads) const {
    auto g = B::grad_remove(prim(), grads);
    if (!g) return std::nullopt;
    return InnerTensor(std::move(*g));
  }

  // The same values, cut from the graph: no gradient flows through the result.
  Self detach() const { return wrap(B::detach(prim())); }
  InnerTensor inner() const { return InnerTensor(B::inner(prim())); }
  // The same, from a tensor the caller gives up: the result is then the only holder of the
  // buffer, if this tensor was (an optimizer updates a parameter in place this way).
  InnerTensor into_inner() && {
    const typename B::Primitive taken = std::move(this->self()).into_primitive();
    return InnerTensor(B::inner(taken));
  }
  static Self from_inner(const InnerTensor& tensor) { return Self(B::from_inner(tensor.primitive())); }
};

}  // namespace kiln
