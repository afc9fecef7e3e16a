// Must not compile: Float + Bool. Arithmetic is defined between tensors of one kind; a
// mask must be converted first (mask.to_float()). With -DKILN_CONTROL it compiles.
// expected-error: (no match for 'operator\+' \(operand types are |invalid operands to binary expression \()'[^']*Tensor<kiln::Cpu, 2>' and '[^']*Tensor<kiln::Cpu, 2, kiln::Bool>'
#include <kiln/kiln.hpp>

using namespace kiln;

void check(const Tensor<Cpu, 2>& x, const Tensor<Cpu, 2, Bool>& mask) {
#ifdef KILN_CONTROL
  const Tensor<Cpu, 2> y = x + mask.to_float();
#else
  const auto y = x + mask;  // must not compile
#endif
  (void)y;
}
