// Must not compile: Optimizer<B, Rule> spelled with the model's Autodiff backend. The
// optimizer computes on the inner backend; the aliases (optim::Adam<Autodiff<Cpu>>) accept
// either, Optimizer itself says which to write. With -DKILN_CONTROL it compiles.
// expected-error: Optimizer<B, Rule> takes the inner backend of the model's Autodiff<B>
#include <kiln/kiln.hpp>

using namespace kiln;

std::int64_t steps() {
#ifdef KILN_CONTROL
  optim::Optimizer<Cpu, optim::AdamRule> adam;
#else
  optim::Optimizer<Autodiff<Cpu>, optim::AdamRule> adam;  // must not compile
#endif
  return adam.options().weight_decay == 0 ? 0 : 1;
}
