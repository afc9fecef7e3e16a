// libFuzzer target: bytes → a checkpoint's learner.json (kiln::train::learner_state_from_json)
// and → a checkpoints/latest file that read_latest_checkpoint follows. Any input must be
// rejected with kiln::Error, or read as a state that writes back to JSON that reads again.
#include <kiln/train/checkpoint.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kiln::train::LearnerState state = kiln::train::learner_state_from_json(text, "fuzz/learner.json");
    (void)kiln::train::learner_state_from_json(kiln::train::learner_state_to_json(state), "round trip");
  } catch (const kiln::Error&) {
  }
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_fuzz_checkpoint_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "checkpoints");
  {
    std::ofstream out(dir / "checkpoints" / "latest", std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  try {
    (void)kiln::train::read_latest_checkpoint(dir);
  } catch (const kiln::Error&) {
  }
  return 0;
}
