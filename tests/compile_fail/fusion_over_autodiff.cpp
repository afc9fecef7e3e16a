// Must not compile: Fusion over a backend that is not a FusionTarget. Fusion goes under
// Autodiff (Autodiff<Fusion<Cpu>> records gradients of fused programs), not over it, and
// only once. With -DKILN_CONTROL it compiles.
// expected-error: FusionTarget
#include <kiln/tensor.hpp>

using namespace kiln;

double first() {
#ifdef KILN_CONTROL
  using B = Autodiff<Fusion<Cpu>>;
#else
  using B = Fusion<Autodiff<Cpu>>;  // must not compile
#endif
  return Tensor<B, 1>::from({1.0, 2.0}).into_data().to_vec<double>()[0];
}
