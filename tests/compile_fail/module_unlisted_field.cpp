// Must not compile: a module whose KILN_MODULE leaves out one of its layers. That layer
// would never be trained, saved, loaded or converted by nn::valid; KILN_MODULE's check
// names the byte offset of the member it does not list. With -DKILN_CONTROL (every
// member listed) it compiles.
// expected-error: KILN_MODULE\(\.\.\.\) must list every data member of the module
// expected-error: ListsEveryField<[0-9]+>
#include <kiln/kiln.hpp>

using namespace kiln;

template <class B> struct Net {
  nn::Linear<B> hidden{4, 8};
  nn::Linear<B> out{8, 2};
  double scale = 1.0;
#ifdef KILN_CONTROL
  KILN_MODULE(hidden, out, scale)
#else
  KILN_MODULE(hidden, scale)  // must not compile
#endif
};

std::int64_t count() {
  const Net<Cpu> net;
  return nn::num_params(net);
}
