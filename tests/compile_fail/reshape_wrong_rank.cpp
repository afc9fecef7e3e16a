// Must not compile: a reshape to two dims assigned to a rank-3 tensor. The rank of a
// reshape is the number of dims given. With -DKILN_CONTROL it compiles.
// expected-error: (conversion from|no viable conversion from) 'Tensor<[^']*2[^']*>' to (non-scalar type )?'(const )?Tensor<[^']*3[^']*>'
#include <kiln/kiln.hpp>

using namespace kiln;

void check(const Tensor<Cpu, 3>& x) {
#ifdef KILN_CONTROL
  const Tensor<Cpu, 2> y = x.reshape({6, -1});
#else
  const Tensor<Cpu, 3> y = x.reshape({6, -1});  // must not compile
#endif
  (void)y;
}
