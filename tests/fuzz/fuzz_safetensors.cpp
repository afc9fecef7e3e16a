// libFuzzer target: bytes → SafetensorsFile::from_memory. Any input must either be
// rejected with kiln::Error or load completely; an accepted file must survive a
// save/parse round trip unchanged (a mismatch aborts, which the fuzzer reports).
#include <kiln/store/safetensors.hpp>

#include <cstdlib>
#include <cstring>

using namespace kiln;
using namespace kiln::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = SafetensorsFile::from_memory(std::as_bytes(std::span(data, size)), "fuzz.safetensors");
    const NamedTensors tensors = file.load_all();
    (void)file.load_all(DType::f16);  // float conversions on load
    const auto bytes = serialize_safetensors(tensors, {.float_dtype = std::nullopt, .metadata = file.metadata()});
    const NamedTensors again = SafetensorsFile::from_memory(bytes, "round trip").load_all();
    if (again.names() != tensors.names()) std::abort();
    for (const auto& [name, tensor] : tensors) {
      const TensorData& other = again.at(name);
      if (other.dtype() != tensor.dtype() || other.shape() != tensor.shape() ||
          !std::equal(other.bytes().begin(), other.bytes().end(), tensor.bytes().begin(), tensor.bytes().end()))
        std::abort();
    }
  } catch (const Error&) {
    // Rejected with a message: what the reader must do with bad input.
  }
  return 0;
}
