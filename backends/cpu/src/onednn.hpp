// The process-wide oneDNN engine and stream used by the CPU kernels that call oneDNN
// (convolution, pooling). Private to backends/cpu/src: dnnl.hpp never reaches a public
// header.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu {

// The one CPU engine of the process, created on first use.
dnnl::engine& onednn_engine();
// A stream on that engine for the calling thread: a dnnl::stream must not be used from two
// threads at once, and Kiln ops may be called from several user threads.
dnnl::stream& onednn_stream();

}  // namespace kiln::cpu
