// Recurrent layers against torch.nn (tests/golden/gen_rnn.py): Rnn, Lstm, Gru and their
// cells get PyTorch's weights by PyTorch's names; outputs and final states must match in
// f64 and, on Autodiff backends, so must the gradients of x, of the initial states and of
// every parameter. Also: state_dict keys in PyTorch's order and strict loading of a torch
// state_dict, dropout between layers only, and errors that name the layer and the shapes.
#include "backends.hpp"
#include "golden.hpp"
#include "param_grads.hpp"

#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>

#include <string>
#include <utility>
#include <vector>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

KILN_BACKEND_TEST_SUITE(NnRnn);

constexpr double kTol = 1e-10;

template <class B, std::size_t D> using Inputs = std::vector<std::pair<std::string, Tensor<B, D>>>;

// The case's "w.<name>" tensors (f64) into the module's parameters, found by their paths:
// every path must be a PyTorch name and every PyTorch parameter must be used.
template <class M> void load_torch_weights(M& module, const GoldenCase& c) {
  std::size_t loaded = 0, in_case = 0;
  nn::for_each_param(module, [&](const std::string& path, auto& p) {
    using T = std::remove_cvref_t<decltype(p.val())>;
    const auto it = c.tensors.find("w." + path);
    ASSERT_NE(it, c.tensors.end()) << path << " is not one of PyTorch's parameter names";
    ASSERT_EQ(it->second.shape(), p->shape()) << path;
    p.replace(T::from_data(it->second));
    ++loaded;
  });
  for (const auto& [label, data] : c.tensors) in_case += label.starts_with("w.") ? 1 : 0;
  EXPECT_EQ(loaded, in_case) << "the module has fewer parameters than PyTorch's";
}

// The case's tensor `label`, requiring grad on an Autodiff backend.
template <class B, std::size_t D> Tensor<B, D> input(const GoldenCase& c, const std::string& label) {
  const auto t = c.tensor<B, D>(label);
  if constexpr (AutodiffBackend<B>) return t.require_grad();
  else return t;
}

// Checks the output `label` against the case and returns its part of the loss, sum(out * r.<label>).
template <class B, std::size_t D>
Tensor<B, 1> compared(const GoldenCase& c, const std::string& label, const Tensor<B, D>& out) {
  EXPECT_CLOSE(out, c[label], kTol, kTol) << label;
  return (out * Tensor<B, D>::from_data(c["r." + label])).sum();
}

// On an Autodiff backend, the loss's gradients of the inputs ("x" against "dx"...) and of
// every parameter ("d.<path>").
template <class B, std::size_t D, class M>
void check_gradients(const M& module, const GoldenCase& c, const Tensor<B, 1>& loss, const Inputs<B, D>& inputs) {
  if constexpr (AutodiffBackend<B>) {
    const auto grads = loss.backward();
    for (const auto& [label, x] : inputs) {
      const auto g = x.grad(grads);
      ASSERT_TRUE(g.has_value()) << "no gradient for " << label;
      EXPECT_CLOSE(*g, c["d" + label], kTol, kTol) << "d" << label;
    }
    kiln::test::expect_param_grads(module, grads, c, kTol);
  }
}

template <class B> void check_lstm(nn::Lstm<B>& lstm, const std::string& name) {
  SCOPED_TRACE(name);
  const GoldenCase& c = golden("rnn", name);
  load_torch_weights(lstm, c);
  Inputs<B, 3> inputs{{"x", input<B, 3>(c, "x")}};
  const bool with_state = c.tensors.count("h0") != 0;
  if (with_state) inputs.insert(inputs.end(), {{"h0", input<B, 3>(c, "h0")}, {"c0", input<B, 3>(c, "c0")}});
  const nn::LstmOutput<B> out =
      with_state ? lstm.forward(inputs[0].second, inputs[1].second, inputs[2].second) : lstm.forward(inputs[0].second);
  check_gradients(lstm, c, compared(c, "y", out.output) + compared(c, "h_n", out.h_n) + compared(c, "c_n", out.c_n),
                  inputs);
}

template <class B> void check_gru(nn::Gru<B>& gru, const std::string& name) {
  SCOPED_TRACE(name);
  const GoldenCase& c = golden("rnn", name);
  load_torch_weights(gru, c);
  Inputs<B, 3> inputs{{"x", input<B, 3>(c, "x")}};
  const bool with_state = c.tensors.count("h0") != 0;
  if (with_state) inputs.push_back({"h0", input<B, 3>(c, "h0")});
  const nn::GruOutput<B> out = with_state ? gru.forward(inputs[0].second, inputs[1].second) : gru.forward(inputs[0].second);
  check_gradients(gru, c, compared(c, "y", out.output) + compared(c, "h_n", out.h_n), inputs);
}

// The configurations are gen_rnn.py's: input 4, hidden 5, batch 2, sequence 3.
TYPED_TEST(NnRnn, LstmMatchesTorch) {
  using B = TypeParam;
  nn::Lstm<B> stacked(4, 5, {.num_layers = 2, .bidirectional = true});
  check_lstm(stacked, "lstm_2_layers_bidirectional");
  nn::Lstm<B> single(4, 5);
  check_lstm(single, "lstm_initial_state");
  nn::Lstm<B> time_major(4, 5, {.bias = false, .batch_first = false, .bidirectional = true});
  check_lstm(time_major, "lstm_no_bias_time_major");
  nn::Lstm<B> projected(4, 5, {.num_layers = 2, .bidirectional = true, .proj_size = 3});
  check_lstm(projected, "lstm_proj_2_layers_bidirectional");
  nn::Lstm<B> projected_from_state(4, 5, {.proj_size = 2});
  check_lstm(projected_from_state, "lstm_proj_initial_state");

  nn::LstmCell<B> cell(4, 5);
  const GoldenCase& c = golden("rnn", "lstm_cell");
  load_torch_weights(cell, c);
  const Inputs<B, 2> inputs{{"x", input<B, 2>(c, "x")}, {"h0", input<B, 2>(c, "h0")}, {"c0", input<B, 2>(c, "c0")}};
  const nn::LstmState<B> next = cell.forward(inputs[0].second, nn::LstmState<B>{inputs[1].second, inputs[2].second});
  check_gradients(cell, c, compared(c, "h", next.h) + compared(c, "c", next.c), inputs);
}

TYPED_TEST(NnRnn, GruMatchesTorch) {
  using B = TypeParam;
  nn::Gru<B> stacked(4, 5, {.num_layers = 2, .bidirectional = true});
  check_gru(stacked, "gru_2_layers_bidirectional");
  nn::Gru<B> single(4, 5);
  check_gru(single, "gru_initial_state");
  nn::Gru<B> time_major(4, 5, {.bias = false, .batch_first = false, .bidirectional = true});
  check_gru(time_major, "gru_no_bias_time_major");

  nn::GruCell<B> cell(4, 5);
  const GoldenCase& c = golden("rnn", "gru_cell");
  load_torch_weights(cell, c);
  const Inputs<B, 2> inputs{{"x", input<B, 2>(c, "x")}, {"h0", input<B, 2>(c, "h0")}};
  check_gradients(cell, c, compared(c, "h", cell.forward(inputs[0].second, inputs[1].second)), inputs);
}

template <class B> void check_rnn(nn::Rnn<B>& rnn, const std::string& name) {
  SCOPED_TRACE(name);
  const GoldenCase& c = golden("rnn", name);
  load_torch_weights(rnn, c);
  Inputs<B, 3> inputs{{"x", input<B, 3>(c, "x")}};
  const bool with_state = c.tensors.count("h0") != 0;
  if (with_state) inputs.push_back({"h0", input<B, 3>(c, "h0")});
  const nn::RnnOutput<B> out = with_state ? rnn.forward(inputs[0].second, inputs[1].second) : rnn.forward(inputs[0].second);
  check_gradients(rnn, c, compared(c, "y", out.output) + compared(c, "h_n", out.h_n), inputs);
}

TYPED_TEST(NnRnn, RnnMatchesTorch) {
  using B = TypeParam;
  nn::Rnn<B> stacked(4, 5, {.num_layers = 2, .bidirectional = true});
  check_rnn(stacked, "rnn_2_layers_bidirectional");
  nn::Rnn<B> relu(4, 5, {}, nn::RnnNonlinearity::relu);
  check_rnn(relu, "rnn_relu_initial_state");
  nn::Rnn<B> time_major(4, 5, {.num_layers = 2, .bias = false, .batch_first = false, .bidirectional = true},
                        nn::RnnNonlinearity::relu);
  check_rnn(time_major, "rnn_relu_no_bias_time_major");

  for (const auto nonlinearity : {nn::RnnNonlinearity::tanh, nn::RnnNonlinearity::relu}) {
    nn::RnnCell<B> cell(4, 5, true, nonlinearity);
    const GoldenCase& c = golden("rnn", nonlinearity == nn::RnnNonlinearity::tanh ? "rnn_cell" : "rnn_cell_relu");
    load_torch_weights(cell, c);
    const Inputs<B, 2> inputs{{"x", input<B, 2>(c, "x")}, {"h0", input<B, 2>(c, "h0")}};
    check_gradients(cell, c, compared(c, "h", cell.forward(inputs[0].second, inputs[1].second)), inputs);
  }
}

// A PyTorch state_dict (the fixture's weights, f64) loads strictly into f32 modules.
template <class M> void expect_torch_state_dict_loads(M& module, const std::string& name) {
  SCOPED_TRACE(name);
  const GoldenCase& c = golden("rnn", name);
  store::NamedTensors torch_state;
  for (const auto& [label, data] : c.tensors)
    if (label.starts_with("w.")) torch_state.insert(label.substr(2), data);
  const nn::LoadReport report = nn::load_state_dict(module, torch_state);
  EXPECT_TRUE(report.ok()) << report.text();
  nn::for_each_param(module, [&](const std::string& path, const auto& p) {
    EXPECT_EQ(p->dtype(), DType::f32) << path;
    EXPECT_CLOSE(*p, torch_state.at(path).convert(DType::f32), 0, 0) << path;
  });
}

// Names do not depend on the backend: on Cpu only, which keeps this file's instantiations few.
TEST(NnRnnNames, StateDictKeysArePyTorchsAndTorchWeightsLoad) {
  using B = Cpu;
  manual_seed(1);
  nn::Lstm<B> lstm(4, 5, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> want;
  for (const char* layer : {"l0", "l0_reverse", "l1", "l1_reverse"})
    for (const char* param : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
      want.push_back(fmt::format("{}_{}", param, layer));
  EXPECT_EQ(nn::state_dict(lstm).names(), want);  // torch.nn.LSTM's state_dict order
  EXPECT_EQ(nn::num_params(lstm), 4 * 5 * (4 + 5 + 2) * 2 + 4 * 5 * (10 + 5 + 2) * 2);
  expect_torch_state_dict_loads(lstm, "lstm_2_layers_bidirectional");

  nn::Gru<B> gru(4, 5, {.bias = false, .bidirectional = true});
  EXPECT_EQ(nn::state_dict(gru).names(),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse"}));
  expect_torch_state_dict_loads(gru, "gru_no_bias_time_major");

  // With proj_size, weight_hr follows each layer's biases, as in torch.nn.LSTM's state_dict.
  nn::Lstm<B> projected(4, 5, {.num_layers = 2, .bidirectional = true, .proj_size = 3});
  want.clear();
  for (const char* layer : {"l0", "l0_reverse", "l1", "l1_reverse"})
    for (const char* param : {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"})
      want.push_back(fmt::format("{}_{}", param, layer));
  EXPECT_EQ(nn::state_dict(projected).names(), want);
  expect_torch_state_dict_loads(projected, "lstm_proj_2_layers_bidirectional");
  const nn::Lstm<Autodiff<B>> trained_projected(4, 5, {.proj_size = 2});
  EXPECT_EQ(nn::valid(trained_projected).cells.at(0).weight_hr.value()->shape(), Shape({2, 5}));

  nn::LstmCell<B> lstm_cell(4, 5);
  EXPECT_EQ(nn::state_dict(lstm_cell).names(), (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
  expect_torch_state_dict_loads(lstm_cell, "lstm_cell");
  nn::GruCell<B> gru_cell(4, 5);
  expect_torch_state_dict_loads(gru_cell, "gru_cell");

  nn::Rnn<B> rnn(4, 5, {.num_layers = 2, .bias = false, .bidirectional = true}, nn::RnnNonlinearity::relu);
  EXPECT_EQ(nn::state_dict(rnn).names(),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
                                      "weight_ih_l1", "weight_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse"}));
  expect_torch_state_dict_loads(rnn, "rnn_relu_no_bias_time_major");
  nn::RnnCell<B> rnn_cell(4, 5);
  expect_torch_state_dict_loads(rnn_cell, "rnn_cell");
  // nn::valid keeps the nonlinearity, of the stack and of every cell.
  const nn::Rnn<Autodiff<B>> trained(4, 5, {.num_layers = 2}, nn::RnnNonlinearity::relu);
  const nn::Rnn<B> converted = nn::valid(trained);
  EXPECT_EQ(converted.nonlinearity, nn::RnnNonlinearity::relu);
  ASSERT_EQ(converted.cells.size(), 2u);
  for (const auto& cell : converted.cells) EXPECT_EQ(cell.nonlinearity, nn::RnnNonlinearity::relu);
  const nn::RnnCell<Autodiff<B>> trained_cell(4, 5, true, nn::RnnNonlinearity::relu);
  EXPECT_EQ(nn::valid(trained_cell).nonlinearity, nn::RnnNonlinearity::relu);

  // PyTorch's initialization: uniform in +-1/sqrt(hidden).
  const double bound = 1.0 / std::sqrt(5.0);
  manual_seed(2);
  const nn::Gru<B> fresh(4, 5);
  nn::for_each_param(fresh, [&](const std::string& path, const auto& p) {
    EXPECT_LE(p->abs().max().item(), bound) << path;
    EXPECT_GT(p->abs().max().item(), bound / 2) << path;
  });
}

TYPED_TEST(NnRnn, LstmDropoutActsBetweenLayersInTrainingOnly) {
  using B = TypeParam;
  manual_seed(3);
  nn::Lstm<B> lstm(4, 5, {.num_layers = 2, .dropout = 1.0});
  const auto x = Tensor<B, 3>::random({2, 3, 4}, Distribution::normal(0, 1));
  // p = 1 zeroes the first layer's output: the second layer runs on zeros.
  const nn::LstmOutput<B> training = lstm.forward(x);
  nn::Lstm<B> top(5, 5);
  top.cells[0] = lstm.cells[1];
  const nn::LstmOutput<B> on_zeros = top.forward(Tensor<B, 3>::zeros({2, 3, 5}));
  EXPECT_CLOSE(training.output, on_zeros.output.into_data(), 1e-6, 1e-6);
  // In eval mode nothing is dropped; the first layer's final state never is.
  nn::eval(lstm);
  const nn::LstmOutput<B> evaluated = lstm.forward(x);
  EXPECT_FALSE(kiln::test::all_close(evaluated.output, on_zeros.output.into_data(), 1e-3, 1e-3));
  EXPECT_CLOSE(training.h_n.narrow(0, 0, 1), evaluated.h_n.narrow(0, 0, 1).into_data(), 0, 0);
  EXPECT_CLOSE(training.c_n.narrow(0, 0, 1), evaluated.c_n.narrow(0, 0, 1).into_data(), 0, 0);
}

TYPED_TEST(NnRnn, BadShapesNameTheLayerAndTheShapes) {
  using B = TypeParam;
  using T3 = Tensor<B, 3>;
  using T2 = Tensor<B, 2>;
  const nn::Lstm<B> lstm(4, 5, {.num_layers = 2, .bidirectional = true});
  const auto x = T3::zeros({2, 3, 4}), h = T3::zeros({4, 2, 5});
  EXPECT_KILN_ERROR(lstm.forward(T3::zeros({2, 3, 6})),
                    "nn::Lstm: input of shape [2, 3, 6] has 6 features in its last dim, expected input_size 4");
  EXPECT_KILN_ERROR(lstm.forward(x, T3::zeros({2, 2, 5}), h),
                    "nn::Lstm: h_0 of shape [2, 2, 5] must be [4, 2, 5] (num_layers * directions, batch, hidden_size)");
  EXPECT_KILN_ERROR(lstm.forward(x, h, T3::zeros({4, 3, 5})), "nn::Lstm: c_0 of shape [4, 3, 5] must be [4, 2, 5]");
  EXPECT_KILN_ERROR(lstm.forward(T3::zeros({2, 0, 4})), "nn::Lstm: input of shape [2, 0, 4] has an empty sequence");
  const nn::Gru<B> gru(4, 5, {.batch_first = false});
  EXPECT_KILN_ERROR(gru.forward(T3::zeros({3, 2, 4}), T3::zeros({1, 3, 5})),
                    "nn::Gru: h_0 of shape [1, 3, 5] must be [1, 2, 5]");
  const nn::LstmCell<B> lstm_cell(4, 5);
  EXPECT_KILN_ERROR(lstm_cell.forward(T2::zeros({2, 3})),
                    "nn::LstmCell: input of shape [2, 3] has 3 features, expected input_size 4");
  EXPECT_KILN_ERROR(lstm_cell.forward(T2::zeros({2, 4}), nn::LstmState<B>{T2::zeros({2, 5}), T2::zeros({1, 5})}),
                    "nn::LstmCell: c of shape [1, 5] must be [2, 5] (batch, hidden_size)");
  const nn::GruCell<B> gru_cell(4, 5);
  EXPECT_KILN_ERROR(gru_cell.forward(T2::zeros({2, 4}), T2::zeros({2, 4})), "nn::GruCell: h of shape [2, 4] must be [2, 5]");
  EXPECT_KILN_ERROR(nn::Gru<B>(4, 5, {.num_layers = 0}),
                    "nn::Gru: input_size, hidden_size and num_layers must be positive, got 4, 5 and 0");
  EXPECT_KILN_ERROR(nn::Lstm<B>(4, 5, {.dropout = 1.5}), "nn::Lstm: dropout must be in [0, 1], got 1.5");
  EXPECT_KILN_ERROR(nn::Lstm<B>().forward(x), "nn::Lstm: the module has no layers");
  const nn::Lstm<B> projected(4, 5, {.proj_size = 2});
  EXPECT_KILN_ERROR(projected.forward(x, T3::zeros({1, 2, 5}), T3::zeros({1, 2, 5})),
                    "nn::Lstm: h_0 of shape [1, 2, 5] must be [1, 2, 2] (num_layers * directions, batch, proj_size)");
  EXPECT_KILN_ERROR(projected.forward(x, T3::zeros({1, 2, 2}), T3::zeros({1, 2, 2})),
                    "nn::Lstm: c_0 of shape [1, 2, 2] must be [1, 2, 5] (num_layers * directions, batch, hidden_size)");
  EXPECT_KILN_ERROR(nn::Lstm<B>(4, 5, {.proj_size = 5}), "nn::Lstm: proj_size must be in [0, hidden_size 5), got 5");
  EXPECT_KILN_ERROR(nn::Gru<B>(4, 5, {.proj_size = 2}), "nn::Gru: proj_size is for nn::Lstm only, got 2");
  const nn::Rnn<B> rnn(4, 5, {.num_layers = 2});
  EXPECT_KILN_ERROR(rnn.forward(x, T3::zeros({1, 2, 5})), "nn::Rnn: h_0 of shape [1, 2, 5] must be [2, 2, 5]");
  EXPECT_KILN_ERROR(rnn.forward(T3::zeros({2, 3, 5})), "nn::Rnn: input of shape [2, 3, 5] has 5 features in its last dim");
  EXPECT_KILN_ERROR(nn::RnnCell<B>(4, 5).forward(T2::zeros({2, 3})), "nn::RnnCell: input of shape [2, 3] has 3 features");
  EXPECT_KILN_ERROR(nn::Rnn<B>(0, 5), "nn::Rnn: input_size, hidden_size and num_layers must be positive");
}

}  // namespace
