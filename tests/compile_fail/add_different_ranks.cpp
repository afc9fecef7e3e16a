// Must not compile: adding a rank-2 and a rank-3 tensor. Broadcasting happens between
// tensors of one rank; lift the smaller one first (unsqueeze<3>()). With -DKILN_CONTROL it compiles.
// (GCC spells the default kind out, `kiln::Float`, once the type was named in an explicit
// instantiation: <kiln/kiln.hpp> declares Autodiff's instances extern.)
// expected-error: (no match for 'operator\+' \(operand types are |invalid operands to binary expression \()'[^']*Tensor<kiln::Cpu, 2(, kiln::Float)?>' and '[^']*Tensor<kiln::Cpu, 3(, kiln::Float)?>'
#include <kiln/kiln.hpp>

using namespace kiln;

void check(const Tensor<Cpu, 2>& a, const Tensor<Cpu, 3>& b) {
#ifdef KILN_CONTROL
  const auto y = a.unsqueeze<3>() + b;
#else
  const auto y = a + b;  // must not compile
#endif
  (void)y;
}
