// The examples of docs/modules.md and docs/optimizers.md, compiled and run as they are
// printed there (keep the two in step).
#include "golden.hpp"

#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/optim/rules.hpp>

#include <filesystem>

namespace docs_modules {
// ---- docs/modules.md: begin
using namespace kiln;

template <class B> struct Mlp {
  nn::Linear<B> hidden, out;
  nn::Dropout<B> dropout{0.1};
  KILN_MODULE(hidden, out, dropout)

  Mlp() = default;
  Mlp(std::int64_t in, std::int64_t width, std::int64_t classes) : hidden(in, width), out(width, classes) {}
  Tensor<B, 2> forward(const Tensor<B, 2>& x) const { return out.forward(dropout.forward(hidden.forward(x).relu())); }
};

double train_and_save(const std::filesystem::path& file) {
  using AD = Autodiff<Cpu>;
  manual_seed(0);
  Mlp<AD> model(4, 32, 3);
  optim::Adam<Cpu> adam;  // torch.optim.Adam's defaults
  const auto x = Tensor<AD, 2>::random({64, 4}, Distribution::normal(0, 1));
  const auto labels = x.sum_dim(1).gt(0.0).to_int().template reshape<1>({64});  // two of the three classes
  double loss = 0;
  for (int step = 0; step < 200; ++step) {
    const auto l = nn::cross_entropy(model.forward(x), labels);
    loss = l.item();
    auto grads = l.backward();
    adam.step(1e-2, model, grads);
  }
  nn::eval(model);               // dropout off
  nn::save(model, file);         // safetensors, atomically
  Mlp<Cpu> inference = nn::valid(model);  // the same weights on the inner backend, no graph
  (void)inference.forward(x.inner());
  return loss;
}
// ---- docs/modules.md: end
}  // namespace docs_modules

TEST(Docs, ModulesExampleTrainsSavesAndReloads) {
  const auto file = std::filesystem::path(::testing::TempDir()) / "kiln_docs_mlp.safetensors";
  EXPECT_LT(docs_modules::train_and_save(file), 0.1);
  docs_modules::Mlp<kiln::Cpu> again(4, 32, 3);
  EXPECT_TRUE(kiln::nn::load(again, file).ok());
  EXPECT_EQ(kiln::nn::num_params(again), 4 * 32 + 32 + 32 * 3 + 3);
}
