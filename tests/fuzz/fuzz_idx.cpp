// libFuzzer target: bytes → kiln::data::parse_idx (plain and gzip IDX files). Any input
// must be rejected with kiln::Error or give a tensor whose shape matches its bytes.
#include <kiln/data/idx.hpp>

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const kiln::TensorData t = kiln::data::parse_idx(std::span(data, size), "fuzz.idx");
    if (t.bytes().size() != static_cast<std::size_t>(t.shape().numel()) * kiln::dtype_size(t.dtype())) std::abort();
  } catch (const kiln::Error&) {
    // Rejected with a message: what the reader must do with bad input.
  }
  return 0;
}
