// Must not compile: exp on an Int tensor. Float math needs a Float tensor
// (x.to_float().exp()). With -DKILN_CONTROL it compiles.
// expected-error: (no matching function for call to '[^']*Tensor<kiln::Cpu, 2, kiln::Int>::exp\(\) const'|invalid reference to function 'exp': constraints not satisfied)
// expected-error: same_as<(K|kiln::Int), kiln::Float>
#include <kiln/kiln.hpp>

using namespace kiln;

void check(const Tensor<Cpu, 2, Int>& x) {
#ifdef KILN_CONTROL
  const auto y = x.to_float().exp();
#else
  const auto y = x.exp();  // must not compile
#endif
  (void)y;
}
