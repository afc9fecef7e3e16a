// The process-wide oneDNN engine and the per-thread streams on it (see onednn.hpp).
#if KILN_CPU_ONEDNN
#include "onednn.hpp"
#endif

#include "internal.hpp"

#if KILN_CPU_ONEDNN
namespace kiln::cpu {

// Never destroyed: cached primitives and thread-local streams may outlive static destruction.
dnnl::engine& onednn_engine() {
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& onednn_stream() {
  prepare_team();  // oneDNN's primitives run on this thread's OpenMP team
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

}  // namespace kiln::cpu
#endif
