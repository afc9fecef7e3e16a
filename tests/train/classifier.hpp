// The small classifier the Learner tests train (Linear, ReLU, Dropout, Linear in f64 on
// Autodiff<Cpu>) and its batches: the dropout draws from Kiln's random stream, so a
// resumed run only matches when the checkpoint restored that stream too.
#pragma once

#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/train.hpp>

#include <cstdint>
#include <string>

namespace kiln::train::test {

using AD = Autodiff<Cpu>;

struct Batch {
  Tensor<AD, 2> x;         // [N, 4] features
  Tensor<AD, 1, Int> y;    // [N] class indices 0..2
};

struct Net {
  nn::Linear<AD> hidden, out;
  nn::Dropout<AD> dropout{0.25};
  KILN_MODULE(hidden, out, dropout)

  // Weights from the global random stream at `seed`, in f64; `width` hidden units.
  explicit Net(std::uint64_t seed, std::int64_t width = 16) {
    manual_seed(seed);
    hidden = nn::Linear<AD>(4, width);
    out = nn::Linear<AD>(width, 3);
    nn::for_each_param(*this, [](const std::string&, auto& p) { p.replace(p.val().cast(DType::f64)); });
  }
  TrainOutput<AD> train_step(const Batch& b) const {
    const auto logits = out.forward(dropout.forward(hidden.forward(b.x).relu()));
    return {nn::cross_entropy(logits, b.y), logits, b.y};
  }
};

}  // namespace kiln::train::test
