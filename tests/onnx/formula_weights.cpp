// kiln_onnx_formula_weights SRC DST: makes a torchvision model of tests/golden/onnx_torchvision
// runnable: copies SRC/model.onnx to DST and writes the external-data file it names,
// DST/weights.bin, from SRC/weights.txt (one line per tensor: offset, count, scale, add, salt).
#include "formula_weights.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kiln_onnx_formula_weights SRC_DIR DST_DIR\n";
    return 2;
  }
  const fs::path src = argv[1], dst = argv[2];
  fs::create_directories(dst);
  fs::copy_file(src / "model.onnx", dst / "model.onnx", fs::copy_options::overwrite_existing);
  std::ifstream manifest(src / "weights.txt");
  std::ofstream out(dst / "weights.bin", std::ios::binary | std::ios::trunc);
  std::int64_t offset = 0, count = 0;
  double scale = 0, add = 0;
  std::uint64_t salt = 0;
  while (manifest >> offset >> count >> scale >> add >> salt) {
    const std::vector<float> values = kiln::test::formula(count, scale, add, salt);
    out.seekp(offset);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  if (!manifest.eof() || !out) {
    std::cerr << "kiln_onnx_formula_weights: cannot read " << (src / "weights.txt") << " or write " << dst << "\n";
    return 1;
  }
  return 0;
}
