// What the examples of docs/modules.md, docs/store.md and docs/import.md compute. tests/docs
// compiles every block of the pages as it is printed, against an installed Kiln, and runs
// those with a main(); it also extracts them at configure time into <build>/tests/docs/blocks,
// where this file includes them. The headers the blocks include are included first, here,
// so that their #include lines inside the namespaces below are no-ops.
#include "golden.hpp"

#include <kiln/kiln.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

// A block's main() may end without a return (it is main where the page compiles it); here
// it is an ordinary function, which the tests do not call unless it returns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"
namespace docs_modules_1 {
#include "modules_1.cpp"
}  // namespace docs_modules_1

namespace docs_modules_3 {
#include "modules_3.cpp"
}  // namespace docs_modules_3

namespace docs_store {
#include "store_1.cpp"
}  // namespace docs_store

namespace docs_import {
#include "import_1.cpp"
}  // namespace docs_import
#pragma GCC diagnostic pop

namespace {

// Runs the current directory elsewhere for the length of a scope (the store example uses
// relative paths).
struct WorkingDirectory {
  std::filesystem::path saved = std::filesystem::current_path();
  explicit WorkingDirectory(const std::filesystem::path& dir) { std::filesystem::current_path(dir); }
  ~WorkingDirectory() { std::filesystem::current_path(saved); }
};

}  // namespace

TEST(Docs, ModulesExampleTrainsSavesAndReloads) {
  const auto file = std::filesystem::path(::testing::TempDir()) / "kiln_docs_mlp.safetensors";
  EXPECT_LT(docs_modules_1::train_and_save(file), 0.1);
  docs_modules_1::Mlp<kiln::Cpu> again(4, 32, 3);
  EXPECT_TRUE(kiln::nn::load(again, file).ok());
  EXPECT_EQ(kiln::nn::num_params(again), 4 * 32 + 32 + 32 * 3 + 3);
}

TEST(Docs, ModulesTransformerExampleRuns) {
  using namespace kiln;
  manual_seed(5);
  docs_modules_3::Translator<Cpu> model(11, 16, 2, 1);
  nn::eval(model);  // dropout off (its default p is PyTorch's 0.1)
  const auto source = Tensor<Cpu, 2, Int>::from({{1, 4, 2, 0}, {3, 3, 0, 0}});
  const auto target = Tensor<Cpu, 2, Int>::from({{5, 6, 7}, {8, 9, 10}});
  const auto padding = source.eq(0.0);
  const auto logits = model.forward(source, target, padding);
  EXPECT_EQ(logits.shape(), Shape({2, 3, 11}));
  // Causal: the logits at position 0 do not depend on the later target tokens.
  const auto other = model.forward(source, Tensor<Cpu, 2, Int>::from({{5, 1, 1}, {8, 2, 2}}), padding);
  EXPECT_CLOSE(other.narrow(1, 0, 1), logits.narrow(1, 0, 1).into_data(), 1e-5, 1e-6);
  EXPECT_FALSE(kiln::test::all_close(other, logits.into_data(), 1e-5, 1e-6));
  // The positional encoding holds no state.
  for (const auto& entry : nn::state_dict(model)) EXPECT_FALSE(entry.name.starts_with("positions")) << entry.name;
  const auto q = Tensor<Cpu, 4>::random({1, 2, 4, 8}, Distribution::normal(0, 1));
  const auto k = Tensor<Cpu, 4>::random({1, 2, 4, 8}, Distribution::normal(0, 1));
  EXPECT_CLOSE(docs_modules_3::rotary_scores(q, k, 6), docs_modules_3::rotary_scores(q, k).into_data(), 1e-4, 1e-5);
}

TEST(Docs, StoreExampleSavesAndReadsFiles) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "kiln_docs_store";
  std::filesystem::create_directories(dir);
  // The example reads a torch.save'd ResNet state dict as resnet.pt.
  std::filesystem::copy_file(std::filesystem::path(KILN_GOLDEN_DIR) / "import" / "resnet_block.pt", dir / "resnet.pt",
                             std::filesystem::copy_options::overwrite_existing);
  {
    const WorkingDirectory in(dir);
    EXPECT_EQ(docs_store::main(), 0);
  }
  const auto file = kiln::store::SafetensorsFile::open(dir / "model.safetensors");
  EXPECT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.metadata().at("epoch"), "3");
}

TEST(Docs, ImportExampleLoadsWhatPyTorchSavedAndMatchesIt) {
  const auto dir = std::filesystem::path(KILN_GOLDEN_DIR) / "import";
  const auto& c = kiln::test::golden("import", "encoder_layer");
  const auto x = c.tensor<kiln::Cpu, 3>("x");
  EXPECT_CLOSE(docs_import::load_layer(dir / "encoder_layer.pt").forward(x), c["y"], 1e-5, 1e-5);
  EXPECT_CLOSE(docs_import::load_from_checkpoint(dir / "checkpoint.pt").forward(x), c["y"], 1e-5, 1e-5);
  // The checkpoint's head is reported, not loaded; a strict load refuses it.
  kiln::nn::TransformerEncoderLayer<kiln::Cpu> layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  EXPECT_KILN_ERROR(kiln::nn::load(layer, dir / "checkpoint.pt"), "entry 'epoch' is");
}
