// Forward declaration of Tensor and the mixin helper shared by the op headers.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/tensor/kind.hpp"

#include <cstddef>
#include <utility>

namespace kiln {

template <Backend B, std::size_t D, TensorKind K = Float> class Tensor;

// Base of the op mixins: gives them the derived Tensor and its primitive. `Mixin` (the
// deriving class) keeps each mixin's base distinct, so the casts are unambiguous.
template <class B, std::size_t D, class K, class Mixin> class TensorMixin {
 protected:
  using Self = Tensor<B, D, K>;
  const Self& self() const { return static_cast<const Self&>(static_cast<const Mixin&>(*this)); }
  Self& self() { return static_cast<Self&>(static_cast<Mixin&>(*this)); }
  const typename B::Primitive& prim() const { return self().primitive(); }
  // The primitive taken out of this tensor, which the caller gives up (an rvalue's method).
  typename B::Primitive given_up() { return std::move(self()).into_primitive(); }
  static Self wrap(typename B::Primitive p) { return Self(std::move(p)); }
};

}  // namespace kiln
