// Must not compile: a KILN_CHECK message whose {} count differs from its arguments (here
// two {} for one value). With -DKILN_CONTROL it compiles.
// expected-error: (KILN_CHECK: the message needs one plain \{\} per argument|call to consteval function)
#include <kiln/core/error.hpp>

void check(int n) {
#ifdef KILN_CONTROL
  KILN_CHECK(n > 0, "op: n = {} must be positive", n);
#else
  KILN_CHECK(n > 0, "op: n = {} must be positive, not {}", n);  // must not compile
#endif
}
