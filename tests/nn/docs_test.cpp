// The examples of docs/modules.md, docs/store.md and docs/import.md, compiled and run as
// they are printed there; a test checks that each page's C++ blocks are, in order, the
// texts between its markers here. (docs/optimizers.md's is in tests/optim/scheduler_test.cpp.)
// The headers the examples include are included first, here, so that their #include lines
// inside the namespaces below are no-ops.
#include "golden.hpp"

#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/store/safetensors.hpp>
#include <kiln/store/torch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// The recurrent layers' lines, run on x [N, L, 32]: the shapes the page states.
template <class B> std::vector<Shape> recurrent_layers(const Tensor<B, 3>& x) {
// ---- docs/modules.md: begin
nn::Lstm<B> lstm(/*input_size=*/32, /*hidden_size=*/64, {.num_layers = 2, .bidirectional = true});
auto [output, h_n, c_n] = lstm.forward(x);     // x [N, L, 32] → output [N, L, 128], h_n and c_n [4, N, 64]
auto again = lstm.forward(x, h_n, c_n);         // from given initial states
nn::Gru<B> gru(32, 64);
auto [y, h] = gru.forward(x);                   // y [N, L, 64], h [1, N, 64]
nn::LstmCell<B> cell(32, 64);                   // one step: (h, c) = cell.forward(x_t, state)
// ---- docs/modules.md: end
  const auto step = cell.forward(x.narrow(1, 0, 1).squeeze_dim(1));
  return {output.shape(), h_n.shape(), c_n.shape(), again.output.shape(), y.shape(), h.shape(), step.h.shape()};
}


// ---- docs/modules.md: begin
using namespace kiln;

// Token ids in, next-token logits out: an encoder over the source, a causal decoder over
// the target that attends to it, both with sinusoidal positions.
template <class B> struct Translator {
  nn::Embedding<B> source_embedding, target_embedding;
  nn::SinusoidalPositionalEncoding<B> positions;
  nn::TransformerEncoder<B> encoder;
  nn::TransformerDecoder<B> decoder;
  nn::Linear<B> head;
  KILN_MODULE(source_embedding, target_embedding, positions, encoder, decoder, head)

  Translator(std::int64_t vocabulary, std::int64_t d_model, std::int64_t heads, std::int64_t layers)
      : source_embedding(vocabulary, d_model),
        target_embedding(vocabulary, d_model),
        positions(d_model),
        encoder(layers, d_model, heads, {.dim_feedforward = 4 * d_model, .norm_first = true}, true),
        decoder(layers, d_model, heads, {.dim_feedforward = 4 * d_model, .norm_first = true}, true),
        head(d_model, vocabulary) {}

  // source [N, S], target [N, L] → [N, L, vocabulary]; source_padding [N, S] is true at padding.
  Tensor<B, 3> forward(const Tensor<B, 2, Int>& source, const Tensor<B, 2, Int>& target,
                       const Tensor<B, 2, Bool>& source_padding) const {
    const auto memory = encoder.forward(positions.forward(source_embedding.forward(source)),
                                        {.key_padding_mask = source_padding});
    const auto y = decoder.forward(positions.forward(target_embedding.forward(target)), memory, {.causal = true},
                                   {.key_padding_mask = source_padding});
    return head.forward(y);
  }
};

// Attention scores with rotary positions: q and k are [N, heads, L, head_dim], the first
// of the L at position `offset`.
template <class B>
Tensor<B, 4> rotary_scores(const Tensor<B, 4>& q, const Tensor<B, 4>& k, std::int64_t offset = 0) {
  const nn::RotaryEncoding<B> rope(q.dim(3));
  return rope.forward(q, offset).matmul(rope.forward(k, offset).transpose()) / std::sqrt(static_cast<double>(q.dim(3)));
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

namespace docs_store {
// ---- docs/store.md: begin
#include <kiln/kiln.hpp>
#include <kiln/store/safetensors.hpp>
#include <kiln/store/torch.hpp>

using Matrix = kiln::Tensor<kiln::Cpu, 2>;
namespace store = kiln::store;

int main() {
  // Save: floats stored as bf16 to halve the file, with free-form metadata.
  store::NamedTensors weights;
  weights.insert("linear.weight", Matrix::from({{1, 2}, {3, 4}}).into_data());
  weights.insert("linear.bias", kiln::Tensor<kiln::Cpu, 1>::from({0.5, -0.5}).into_data());
  store::save_safetensors("model.safetensors", weights,
                          {.float_dtype = kiln::DType::bf16, .metadata = {{"epoch", "3"}}});

  // Read: list without loading, then load what you need, converted to f32.
  const auto file = store::SafetensorsFile::open("model.safetensors");
  for (const auto& tensor : file.tensors()) fmt::print("{} {} {}\n", tensor.name, tensor.dtype, tensor.shape);
  const Matrix w = Matrix::from_data(file.load("linear.weight", kiln::DType::f32));

  // Import a PyTorch state dict (torch.save(model.state_dict(), "resnet.pt")).
  const store::NamedTensors resnet = store::load_torch("resnet.pt", {.float_dtype = kiln::DType::f32});
  fmt::print("{} tensors, conv1.weight is {}\n", resnet.size(), resnet.at("conv1.weight").shape());
  return 0;
}
// ---- docs/store.md: end
}  // namespace docs_store

namespace docs_import {
// ---- docs/import.md: begin
#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>

using namespace kiln;

// PyTorch:
//   layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
//   torch.save(layer.state_dict(), "encoder_layer.pt")
nn::TransformerEncoderLayer<Cpu> load_layer(const std::filesystem::path& file) {
  nn::TransformerEncoderLayer<Cpu> layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  nn::load(layer, file);  // strict: every key present, known and of the module's shape, or a kiln::Error
  nn::eval(layer);
  return layer;
}

// PyTorch: torch.save({"epoch": 3, "model": model.state_dict()}, "checkpoint.pt"), where
// model.encoder is a TransformerEncoder holding that layer and model.head a Linear.
nn::TransformerEncoderLayer<Cpu> load_from_checkpoint(const std::filesystem::path& file) {
  // Nested dicts are flattened ("model.encoder.layers.0.linear1.weight"); "epoch" is skipped.
  const store::NamedTensors tensors = store::load_torch(file, {.skip_non_tensors = true});
  nn::TransformerEncoderLayer<Cpu> layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  const nn::LoadReport report =
      nn::load_state_dict(layer, tensors, {.strict = false, .remap = {{"^model\\.encoder\\.layers\\.0\\.", ""}}});
  // The head is not part of the layer: "unexpected keys (2): model.head.weight, model.head.bias".
  KILN_CHECK(report.missing.empty() && report.mismatched.empty(), "{}: {}", file.string(), report.text());
  nn::eval(layer);
  return layer;
}
// ---- docs/import.md: end
}  // namespace docs_import

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every piece of `text` between `open` and the next `close`, in order.
std::vector<std::string> pieces(const std::string& text, const std::string& open, const std::string& close) {
  std::vector<std::string> out;
  for (std::size_t at = text.find(open); at != std::string::npos; at = text.find(open, at)) {
    const std::size_t begin = at + open.size(), end = text.find(close, begin);
    if (end == std::string::npos) break;
    out.push_back(text.substr(begin, end - begin));
    at = end + close.size();
  }
  return out;
}

// Runs the current directory elsewhere for the length of a scope (the store example uses
// relative paths).
struct WorkingDirectory {
  std::filesystem::path saved = std::filesystem::current_path();
  explicit WorkingDirectory(const std::filesystem::path& dir) { std::filesystem::current_path(dir); }
  ~WorkingDirectory() { std::filesystem::current_path(saved); }
};

}  // namespace

TEST(Docs, ModulesTransformerExampleRuns) {
  using namespace kiln;
  manual_seed(5);
  docs_modules::Translator<Cpu> model(11, 16, 2, 1);
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
  EXPECT_CLOSE(docs_modules::rotary_scores(q, k, 6), docs_modules::rotary_scores(q, k).into_data(), 1e-4, 1e-5);
}

TEST(Docs, ModulesRecurrentLinesGiveTheShapesThePageStates) {
  using namespace kiln;
  manual_seed(7);
  const auto x = Tensor<Cpu, 3>::random({2, 5, 32}, Distribution::normal(0, 1));
  const std::vector<Shape> expected{{2, 5, 128}, {4, 2, 64}, {4, 2, 64}, {2, 5, 128}, {2, 5, 64}, {1, 2, 64}, {2, 64}};
  EXPECT_EQ(docs_modules::recurrent_layers(x), expected);
}

TEST(Docs, PagesShowTheCodeTheseTestsRun) {
  const std::filesystem::path root = std::filesystem::path(KILN_GOLDEN_DIR).parent_path().parent_path();
  const std::string tests = read_text(root / "tests" / "nn" / "docs_test.cpp");
  for (const std::string page : {"modules.md", "store.md", "import.md"}) {
    SCOPED_TRACE(page);
    const auto printed = pieces(read_text(root / "docs" / page), "```cpp\n", "```\n");
    const auto compiled = pieces(tests, "// ---- docs/" + page + ": begin\n", "// ---- docs/" + page + ": end");
    EXPECT_FALSE(printed.empty());
    EXPECT_EQ(printed, compiled);
  }
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
