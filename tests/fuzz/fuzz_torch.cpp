// libFuzzer target: bytes → load_torch. An input that starts like a zip archive ("PK")
// is read as a checkpoint file; anything else is taken as the pickle itself and wrapped
// into an archive beside storages "0" to "7" (64 bytes each), so that mutations reach
// the unpickler without having to keep the zip's sizes and offsets consistent. Any input
// must either be rejected with kiln::Error or load.
#include <kiln/store/torch.hpp>

#include "zip_writer.hpp"

using namespace kiln;
using namespace kiln::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = std::as_bytes(std::span(data, size));
  std::vector<std::byte> archive;
  if (size < 2 || data[0] != 'P' || data[1] != 'K') {
    std::vector<std::pair<std::string, std::vector<std::byte>>> entries{
        {"archive/data.pkl", std::vector<std::byte>(input.begin(), input.end())}};
    for (int key = 0; key < 8; ++key) {
      std::vector<std::byte> storage(64);
      for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<std::byte>(i * 37 + key);
      entries.emplace_back("archive/data/" + std::to_string(key), std::move(storage));
    }
    archive = test::make_zip(entries);
  }
  const std::span<const std::byte> bytes = archive.empty() ? input : std::span<const std::byte>(archive);
  for (const bool skip : {false, true}) {
    try {
      (void)load_torch(bytes, "fuzz.pt",
                       {.float_dtype = skip ? std::optional(DType::f32) : std::nullopt, .skip_non_tensors = skip});
    } catch (const Error&) {
      // Rejected with a message: what the reader must do with bad input.
    }
  }
  return 0;
}
