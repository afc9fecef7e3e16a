// A classifier as one self-contained program: the Fashion-MNIST CNN that PyTorch trained and
// exported to ONNX (tests/golden/onnx/fashion_cnn), generated into a Kiln module at build time
// (kiln_onnx_generate ... EMBED: its weights are compiled in) and run on kiln::cpu_embedded,
// the CPU backend without oneDNN, OpenMP or any shared library. Linked statically, the
// binary reads no model file and needs nothing beside it (docs/embedded.md).
//
//   embedded_classifier [FILE] [--repeat N]      (FILE default: standard input)
//
// Input: 28x28 grayscale images, 784 bytes each, row-major, one after the other (the layout
// of an IDX file's records, so `tail -c +17` of Fashion-MNIST's images file is a valid
// input). Prints one line per image: the class index and name. With --repeat N it then
// classifies the first image alone N more times and prints the median time of one
// classification (bench/embedded_compare.py reads it). Exits with 1 on bad input.
#include "fashion_cnn.hpp"

#include <kiln/cpu/backend.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/store/safetensors.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::array<std::string_view, 10> classes{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
constexpr std::int64_t pixels = 28 * 28;

}  // namespace

int main(int argc, char** argv) try {
  std::string path;
  int repeat = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else path = arg;
  }
  // Read with stdio: reading through iostreams adds 16 KB to the static program.
  std::FILE* in = path.empty() ? stdin : std::fopen(path.c_str(), "rb");
  if (in == nullptr) throw kiln::Error("embedded_classifier: cannot open " + path);
  std::vector<char> bytes;
  char chunk[1 << 16];
  for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, in)) > 0;) bytes.insert(bytes.end(), chunk, chunk + got);
  const bool failed = std::ferror(in) != 0;
  if (in != stdin) std::fclose(in);
  if (failed) throw kiln::Error("embedded_classifier: cannot read " + (path.empty() ? std::string("standard input") : path));
  const auto size = static_cast<std::int64_t>(bytes.size());
  KILN_CHECK(size > 0 && size % pixels == 0,
             "embedded_classifier: expected 28x28 images of 784 bytes each, got {} bytes", size);
  const std::int64_t count = size / pixels;

  // As in training: pixels / 255, then the training set's mean and standard deviation.
  std::vector<float> images(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i)
    images[i] = (static_cast<unsigned char>(bytes[i]) / 255.0f - 0.2860f) / 0.3530f;
  const auto x = kiln::Tensor<kiln::Cpu, 4>::from_data(kiln::TensorData::from(images, kiln::Shape{count, 1, 28, 28}));

  embedded::fashion_cnn<kiln::Cpu> model(kiln::CpuDevice{});
  kiln::nn::load_state_dict(model, kiln::store::SafetensorsFile::from_memory(embedded::fashion_cnn_weights(),
                                                                              "the compiled-in weights")
                                       .load_all());
  const auto logits = model.forward(x).into_data().to_vec<float>();  // [count, 10]
  for (std::int64_t i = 0; i < count; ++i) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < classes.size(); ++c)
      if (logits[static_cast<std::size_t>(i) * 10 + c] > logits[static_cast<std::size_t>(i) * 10 + best]) best = c;
    std::printf("%zu %s\n", best, classes[best].data());
  }
  if (repeat > 0) {
    const auto one = kiln::Tensor<kiln::Cpu, 4>::from_data(
        kiln::TensorData::from(std::vector<float>(images.begin(), images.begin() + pixels), kiln::Shape{1, 1, 28, 28}));
    std::vector<double> micros;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      (void)model.forward(one).into_data();
      micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(micros.begin(), micros.begin() + repeat / 2, micros.end());
    std::fprintf(stderr, "median of %d single-image classifications: %.1f us\n", repeat, micros[repeat / 2]);
  }
  return 0;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
