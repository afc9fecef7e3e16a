// The Fashion-MNIST classifier of examples/fashion_mnist, custom_training_loop and infer:
// the usual small CNN of the PyTorch tutorials, written once for any backend B.
//
//   [N, 1, 28, 28] → conv 3x3 (32) → relu → max-pool 2 → conv 3x3 (64) → relu → max-pool 2
//                  → flatten [N, 3136] → linear 128 → relu → linear 10 (class logits)
//
// This header declares the model; model.cpp defines its constructor and forward pass and
// compiles them once for each backend the examples use (explicit instantiation). Editing the
// model then recompiles model.cpp alone, not the programs around it: the edit-compile-run
// loop that bench/compile_time.sh times.
#pragma once

#include <kiln/data/transforms.hpp>
#include <kiln/nn/conv.hpp>
#include <kiln/nn/linear.hpp>
#include <kiln/nn/module.hpp>
#include <kiln/nn/pool.hpp>

#include <array>
#include <string_view>

namespace fashion {

// The ten classes, by label.
inline constexpr std::array<std::string_view, 10> classes{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// What every image goes through, in training and inference alike: u8 pixels [28, 28] →
// f32 [1, 28, 28] in [0, 1] → normalized with the training set's mean and standard deviation.
inline auto prepare() {
  return kiln::data::compose(kiln::data::ToTensor{}, kiln::data::Normalize{{0.2860f}, {0.3530f}});
}

template <class B> struct Cnn {
  kiln::nn::Conv2d<B> conv1, conv2;
  kiln::nn::MaxPool2d<B> pool;
  kiln::nn::Linear<B> fc1, fc2;
  KILN_MODULE(conv1, conv2, pool, fc1, fc2)

  Cnn() = default;  // an empty model, to load saved weights into
  explicit Cnn(const typename B::Device& device);

  // images [N, 1, 28, 28] → logits [N, 10].
  kiln::Tensor<B, 2> forward(const kiln::Tensor<B, 4>& images) const;
};

}  // namespace fashion
