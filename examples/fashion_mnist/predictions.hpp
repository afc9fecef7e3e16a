// What examples/infer and examples/onnx_inference print: each test image's predicted class,
// with its probability, beside its true class, then the accuracy over them.
#pragma once

#include "model.hpp"

#include <kiln/data/transforms.hpp>
#include <kiln/tensor.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fashion {

// Prints the predictions that `logits` [N, 10] make for `items` and returns the accuracy.
template <class B> double print_predictions(const kiln::Tensor<B, 2>& logits, const std::vector<kiln::data::LabeledImage>& items) {
  const auto probabilities = logits.softmax(1);
  const auto predicted = probabilities.argmax(1).template reshape<1>({-1}).template to_vec<std::int64_t>();
  const auto confidence = probabilities.max_dim(1).template reshape<1>({-1}).template to_vec<float>();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto truth = static_cast<std::size_t>(items[i].label);
    const auto guess = static_cast<std::size_t>(predicted[i]);
    correct += guess == truth;
    fmt::print("image {:5d}: {:<12} ({:5.1f} %)  true: {:<12} {}\n", i, classes[guess], 100 * confidence[i],
               classes[truth], guess == truth ? "" : "  <- wrong");
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(items.size());
  fmt::print("{} of {} correct ({:.1f} %)\n", correct, items.size(), 100.0 * accuracy);
  return accuracy;
}

}  // namespace fashion
