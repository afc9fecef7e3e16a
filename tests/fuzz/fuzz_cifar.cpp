// libFuzzer target: bytes → a CIFAR-10 and a CIFAR-100 file (read from a temporary file:
// the readers take paths). Any input must be rejected with kiln::Error or give whole
// records.
#include <kiln/data/cifar.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kiln_fuzz_cifar_" + std::to_string(getpid()) + ".bin");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    if (kiln::data::read_cifar10(file).size() * 3073 != size) std::abort();
  } catch (const kiln::Error&) {
  }
  try {
    if (kiln::data::read_cifar100(file).size() * 3074 != size) std::abort();
  } catch (const kiln::Error&) {
  }
  return 0;
}
