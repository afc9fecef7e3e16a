// optim: every optimizer trains a Linear(5, 3) in f64 for 20 steps exactly as torch.optim
// does (tests/golden/gen_optimizers.py), on every backend, also with parameter groups; state
// save / restore; gradient accumulation and clipping; frozen parameters.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>
#include <kiln/optim/lbfgs.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/optim/scheduler.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace kiln;
using kiln::test::golden;

template <class B> class Optimizers : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(Optimizers, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr int kSteps = 20;
constexpr int kRecorded[] = {0, 1, 2, 4, 9, 19};

// The golden case's starting weights, as f64 parameters of a Linear(5, 3) on Autodiff<B>.
template <class B> nn::Linear<Autodiff<B>> start(const test::GoldenCase& c) {
  nn::Linear<Autodiff<B>> model(5, 3);
  model.weight.replace(c.tensor<Autodiff<B>, 2>("weight", DType::f64));
  model.bias->replace(c.tensor<Autodiff<B>, 1>("bias", DType::f64));
  return model;
}

template <class B> Tensor<Autodiff<B>, 1> loss_of(const nn::Linear<Autodiff<B>>& model, const test::GoldenCase& c) {
  const auto x = c.tensor<Autodiff<B>, 2>("x", DType::f64), y = c.tensor<Autodiff<B>, 2>("y", DType::f64);
  return (model.forward(x) - y).square().mean();
}

// Runs `optimizer` for 20 steps against the golden case `name`, 1e-10 relative, at the rate
// lr(step) (a schedule's lr).
template <class B, class O, class Lr> void follows_torch_at(const std::string& name, O optimizer, Lr lr) {
  SCOPED_TRACE(name);
  const auto& c = golden("optimizers", name);
  auto model = start<B>(c);
  int next = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto grads = loss_of<B>(model, c).backward();
    optimizer.step(lr(step), model, grads);
    if (step != kRecorded[next]) continue;
    ++next;
    EXPECT_CLOSE(*model.weight, c["weight" + std::to_string(step)], 1e-10, 1e-12) << "after step " << step + 1;
    EXPECT_CLOSE(*model.bias.value(), c["bias" + std::to_string(step)], 1e-10, 1e-12) << "after step " << step + 1;
  }
}

template <class B, class O> void follows_torch(const std::string& name, O optimizer, double lr) {
  follows_torch_at<B>(name, std::move(optimizer), [lr](int) { return lr; });
}

TYPED_TEST(Optimizers, EveryOptimizerFollowsTorchOverTwentySteps) {
  using B = TypeParam;
  follows_torch<B>("sgd", optim::Sgd<B>(), 0.1);
  follows_torch<B>("sgd_momentum", optim::Sgd<B>({.momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}), 0.05);
  follows_torch<B>("sgd_nesterov", optim::Sgd<B>({.momentum = 0.9, .weight_decay = 0.01, .nesterov = true}), 0.05);
  follows_torch<B>("adam", optim::Adam<B>({.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.01}), 0.01);
  follows_torch<B>("adamw", optim::adamw<B>({.weight_decay = 0.1}), 0.01);
  follows_torch<B>("rmsprop", optim::RmsProp<B>(), 0.01);
  follows_torch<B>("rmsprop_centered", optim::RmsProp<B>({.alpha = 0.9, .eps = 1e-6, .weight_decay = 0.01,
                                                          .momentum = 0.5, .centered = true}),
                   0.01);
  follows_torch<B>("adagrad",
                   optim::AdaGrad<B>({.lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1}), 0.1);
  follows_torch<B>("lion", optim::Lion<B>({.beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1}), 0.01);
}

// The optimizers after Lion, amsgrad and maximize, against torch.optim (NAdam as torch 2
// computes it) and the reference formulations of Adan and Muon (gen_optimizers.py).
TYPED_TEST(Optimizers, TheLaterOptimizersFollowTheirReferences) {
  using B = TypeParam;
  follows_torch<B>("adam_amsgrad", optim::Adam<B>({.beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.01, .amsgrad = true}),
                   0.01);
  follows_torch<B>("adamw_amsgrad_maximize", optim::adamw<B>({.weight_decay = 0.1, .amsgrad = true, .maximize = true}),
                   0.01);
  follows_torch<B>("sgd_maximize", optim::Sgd<B>({.momentum = 0.9, .weight_decay = 0.01, .maximize = true}), 0.05);
  follows_torch<B>("nadam", optim::NAdam<B>({.weight_decay = 0.01}), 0.01);
  follows_torch<B>("nadamw", optim::NAdam<B>({.beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1, .momentum_decay = 0.01,
                                              .decoupled_weight_decay = true}),
                   0.01);
  follows_torch<B>("radam", optim::RAdam<B>({.weight_decay = 0.01}), 0.01);
  follows_torch<B>("radamw",
                   optim::RAdam<B>({.beta1 = 0.8, .beta2 = 0.95, .weight_decay = 0.1, .decoupled_weight_decay = true}),
                   0.01);
  follows_torch<B>("adamax", optim::Adamax<B>({.beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.01}), 0.01);
  follows_torch<B>("adadelta", optim::Adadelta<B>({.rho = 0.8, .weight_decay = 0.01}), 1.0);
  follows_torch<B>("rprop",
                   optim::Rprop<B>({.etaminus = 0.4, .etaplus = 1.3, .step_size_min = 1e-4, .step_size_max = 0.05}),
                   0.01);
  follows_torch<B>("adan", optim::Adan<B>({.weight_decay = 0.02}), 0.01);
  follows_torch<B>("adan_no_prox",
                   optim::Adan<B>({.beta1 = 0.9, .beta2 = 0.9, .beta3 = 0.95, .weight_decay = 0.02, .no_prox = true}),
                   0.01);
  follows_torch<B>("muon", optim::Muon<B>({.weight_decay = 0.01}), 0.02);
  follows_torch<B>("muon_plain", optim::Muon<B>({.momentum = 0.9, .nesterov = false, .ns_steps = 3, .adam_lr_scale = 0.5}),
                   0.02);
}

// ASGD's averaged parameters (its state "ax"), averaging from step 5 on, are torch's.
TYPED_TEST(Optimizers, AsgdAveragesTheIteratesAsTorch) {
  using B = TypeParam;
  const auto& c = golden("optimizers", "asgd");
  auto model = start<B>(c);
  optim::Asgd<B> asgd({.lambd = 1e-2, .alpha = 0.75, .t0 = 5, .weight_decay = 0.01});
  for (int step = 0; step < kSteps; ++step) {
    auto grads = loss_of<B>(model, c).backward();
    asgd.step(0.05, model, grads);
  }
  EXPECT_CLOSE(*model.weight, c["weight19"], 1e-10, 1e-12);
  const auto saved = asgd.state_dict(model);
  const std::map<std::string, TensorData> by_name(saved.begin(), saved.end());
  EXPECT_CLOSE(Tensor<B, 2>::from_data(by_name.at("weight.ax")), c["weight_ax"], 1e-10, 1e-12);
  EXPECT_CLOSE(Tensor<B, 1>::from_data(by_name.at("bias.ax")), c["bias_ax"], 1e-10, 1e-12);
  // The averages differ from the last iterate: the test would see averaging left out.
  EXPECT_GT((Tensor<B, 2>::from_data(by_name.at("weight.ax")) - model.weight->inner()).abs().max().item(), 1e-6);
}

// Muon orthogonalizes a tall matrix through its transpose and scales it by sqrt(rows / cols):
// the step of a [5, 3] weight is sqrt(5 / 3) times the transposed step of its [3, 5] transpose.
TYPED_TEST(Optimizers, MuonStepsATallMatrixAsItsTransposeScaled) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  manual_seed(11);
  nn::Linear<AD> wide(5, 3), tall(3, 5);
  tall.weight.replace(wide.weight->transpose().detach());
  const auto direction = Tensor<AD, 2>::random({3, 5}, Distribution::normal(0, 1));
  const TensorData wide_before = wide.weight->into_data(), tall_before = tall.weight->into_data();
  auto wide_grads = (*wide.weight * direction).sum().backward();
  auto tall_grads = (*tall.weight * direction.transpose()).sum().backward();
  optim::Muon<B>().step(0.1, wide, wide_grads);
  optim::Muon<B>().step(0.1, tall, tall_grads);
  const auto wide_step = wide.weight->inner() - Tensor<B, 2>::from_data(wide_before);
  const auto tall_step = tall.weight->inner() - Tensor<B, 2>::from_data(tall_before);
  EXPECT_GT(wide_step.abs().max().item(), 1e-3);
  EXPECT_CLOSE(tall_step, (wide_step.transpose() * std::sqrt(5.0 / 3.0)).into_data(), 1e-4, 1e-6);
  EXPECT_KILN_ERROR(optim::Muon<B>({.ns_steps = -1}).step(0.1, wide, wide_grads = (*wide.weight).sum().backward()),
                    "muon: ns_steps must be >= 0, got -1");
}

// L-BFGS against torch.optim.LBFGS on a tanh regression (gen_optimizers.py's run_lbfgs):
// the parameters and the returned loss after each step, and the evaluations in all, with a
// history that fills and drops and with the strong Wolfe line search.
template <class B> void lbfgs_follows_torch(const std::string& name, int steps, const optim::LbfgsOptions& options) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const auto& c = golden("optimizers", name);
  auto model = start<B>(c);
  const auto x = c.tensor<AD, 2>("x", DType::f64), y = c.tensor<AD, 2>("y", DType::f64);
  optim::Lbfgs<AD> lbfgs(options);
  const std::vector<double> losses = c["losses"].template to_vec<double>();
  for (int step = 0; step < steps; ++step) {
    const double loss = lbfgs.step(model, [&] { return (model.forward(x).tanh() - y).square().mean(); });
    EXPECT_NEAR(loss, losses[static_cast<std::size_t>(step)], 1e-9) << "step " << step + 1;
    EXPECT_CLOSE(*model.weight, c["weight" + std::to_string(step)], 1e-8, 1e-10) << "after step " << step + 1;
    EXPECT_CLOSE(*model.bias.value(), c["bias" + std::to_string(step)], 1e-8, 1e-10) << "after step " << step + 1;
  }
  EXPECT_EQ(lbfgs.evaluations(), c["evaluations"].template to_vec<std::int64_t>()[0]);
}

TYPED_TEST(Optimizers, LbfgsFollowsTorch) {
  using B = TypeParam;
  lbfgs_follows_torch<B>("lbfgs", 4, {.lr = 0.5, .max_iter = 5, .history_size = 3});
  lbfgs_follows_torch<B>("lbfgs_wolfe", 3, {.lr = 1, .max_iter = 8, .line_search = optim::LineSearch::strong_wolfe});
}

TEST(Lbfgs, BadOptionsAndClosuresAreErrors) {
  using AD = Autodiff<Cpu>;
  EXPECT_KILN_ERROR(optim::Lbfgs<Cpu>({.history_size = 0}), "lbfgs: needs max_iter >= 1, max_eval >= 0, history_size >= 1");
  nn::Linear<AD> model(2, 2);
  optim::Lbfgs<Cpu> lbfgs;
  EXPECT_KILN_ERROR(lbfgs.step(model, [&] { return model.weight->reshape<1>({-1}); }),
                    "lbfgs: the closure must return the loss as one element, got shape [4]");
  model.weight.set_trainable(false);
  model.bias->set_trainable(false);
  EXPECT_KILN_ERROR(lbfgs.step(model, [&] { return model.weight->sum(); }), "lbfgs: the module has no trainable parameters");
}

// An optimizer named by the model's backend (as Burn spells it) is the one of the inner
// backend: the same type, so it follows torch the same way.
static_assert(std::is_same_v<optim::Adam<Autodiff<Cpu>>, optim::Adam<Cpu>>);
static_assert(std::is_same_v<optim::Sgd<Autodiff<Cpu>>, optim::Optimizer<Cpu, optim::SgdRule>>);
static_assert(std::is_same_v<decltype(optim::adamw<Autodiff<Cpu>>()), optim::Adam<Cpu>>);

// adamw's options have AdamW's defaults: giving some of them keeps the weight decay of 0.01.
TEST(AdamW, SomeOptionsKeepTheDefaultWeightDecay) {
  const auto adamw = optim::adamw<Cpu>({.eps = 1e-6});
  EXPECT_EQ(adamw.options().weight_decay, 0.01);
  EXPECT_EQ(adamw.options().eps, 1e-6);
  EXPECT_EQ(adamw.options().beta2, 0.999);
  EXPECT_TRUE(adamw.options().decoupled_weight_decay);
  EXPECT_EQ(optim::adamw<Cpu>({.weight_decay = 0}).options().weight_decay, 0.0);
}

// Adam writes each step over the parameter's own buffer where nothing else holds it (as
// torch.optim updates in place); a copy of the parameter kept by the caller keeps its values,
// and a step that fails (a gradient of another dtype) leaves the module's parameters whole.
TEST(Adam, UpdatesParametersOverTheirBuffersUnlessACopyIsKept) {
  const auto& c = golden("optimizers", "adam");
  auto model = start<Cpu>(c);
  const auto address = [](const auto& param) { return param->inner().primitive().storage->ptr; };
  optim::Adam<Cpu> adam;
  const std::byte* weight = address(model.weight);
  const std::byte* bias = address(*model.bias);
  const TensorData first = model.weight->into_data();
  auto grads = loss_of<Cpu>(model, c).backward();
  adam.step(0.01, model, grads);
  EXPECT_EQ(address(model.weight), weight);
  EXPECT_EQ(address(*model.bias), bias);
  EXPECT_FALSE(test::all_close(model.weight->into_data(), first, 1e-6, 0));

  const auto kept = *model.weight;
  const TensorData kept_values = kept.into_data();
  grads = loss_of<Cpu>(model, c).backward();
  adam.step(0.01, model, grads);
  EXPECT_NE(address(model.weight), kept.inner().primitive().storage->ptr);
  EXPECT_TRUE(test::all_close(kept.into_data(), kept_values, 0, 0));
  EXPECT_FALSE(test::all_close(model.weight->into_data(), kept_values, 1e-6, 0));

  const TensorData before = model.weight->into_data();
  optim::GradientsParams<Cpu> f32_grads;
  f32_grads.set(model.weight.id(), Tensor<Cpu, 2>::ones(model.weight->dims(), {}, DType::f32).into_primitive());
  EXPECT_KILN_ERROR(adam.step(0.01, model, f32_grads), "adam_step: param [15] f64, grad [15] f32");
  ASSERT_FALSE(model.weight.empty());
  EXPECT_TRUE(test::all_close(model.weight->into_data(), before, 0, 0));
  grads = loss_of<Cpu>(model, c).backward();
  adam.step(0.01, model, grads);
  EXPECT_FALSE(test::all_close(model.weight->into_data(), before, 1e-6, 0));
}

TYPED_TEST(Optimizers, AcceptTheModelsBackend) {
  using B = TypeParam;
  follows_torch<B>("adam", optim::Adam<Autodiff<B>>({.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.01}),
                   0.01);
}

// Parameter groups as torch.optim's param_groups (gen_optimizers.py's *_groups cases): the
// bias in a group of its own, with other options and a factor on the rate.
TYPED_TEST(Optimizers, ParameterGroupsFollowTorch) {
  using B = TypeParam;
  // AdamW, the bias without weight decay at half the rate; a StepLR scales both groups.
  auto adamw = optim::adamw<B>({.weight_decay = 0.1});
  adamw.add_group(optim::paths_ending_with({"bias"}), {.weight_decay = 0, .decoupled_weight_decay = true}, 0.5);
  EXPECT_EQ(adamw.group_count(), 1u);
  const optim::StepLR schedule(0.01, 5, 0.5);
  follows_torch_at<B>("adamw_groups", adamw, [&](int step) { return schedule.lr(step); });
  // SGD: momentum for the weight only (the optimizer's own options), decay for the bias at
  // twice the rate (a group).
  optim::Sgd<B> sgd({.momentum = 0.9});
  sgd.add_group([](std::string_view path) { return path == "bias"; }, {.weight_decay = 0.01}, 2.0);
  follows_torch<B>("sgd_groups", sgd, 0.05);
  // A parameter no group takes is stepped with the optimizer's options: with the group
  // matching nothing, the run is the plain one.
  optim::Sgd<B> plain;
  plain.add_group(optim::paths_ending_with({"nothing"}), {.momentum = 0.5}, 10.0);
  follows_torch<B>("sgd", plain, 0.1);
}

TEST(ParameterGroups, PathsEndingWithMatchWholeComponents) {
  const auto select = optim::paths_ending_with({"bias", "norm.weight"});
  EXPECT_TRUE(select("bias"));
  EXPECT_TRUE(select("layers.0.bias"));
  EXPECT_TRUE(select("blocks.1.norm.weight"));
  EXPECT_TRUE(select("norm.weight"));
  EXPECT_FALSE(select("layers.0.unbias"));
  EXPECT_FALSE(select("blocks.1.layernorm.weight"));
  EXPECT_FALSE(select("layers.0.weight"));
  EXPECT_FALSE(select(""));
  // The first group that takes a parameter is its group; bad arguments are errors.
  optim::Sgd<Cpu> sgd;
  EXPECT_KILN_ERROR(sgd.add_group(optim::paths_ending_with({"bias"}), {}, -1.0),
                    "sgd: a group's lr_scale must be finite and >= 0, got -1");
  EXPECT_KILN_ERROR(sgd.add_group(nullptr, {}), "sgd: add_group needs a selector of parameter paths");
  EXPECT_EQ(sgd.group_count(), 0u);
}

struct TwoLayers {
  nn::Linear<Autodiff<Cpu>> fc1, fc2;
  nn::LayerNorm<Autodiff<Cpu>> norm;
  KILN_MODULE(fc1, fc2, norm)
};

// In a deeper module the groups see each parameter's full path: the biases and the norm's
// weight without decay, the linear weights with it.
TEST(ParameterGroups, SelectByFullPathInANestedModule) {
  using AD = Autodiff<Cpu>;
  manual_seed(3);
  nn::Linear<AD> first(4, 4), second(4, 2);
  nn::LayerNorm<AD> norm({4});
  const auto x = Tensor<AD, 2>::random({6, 4}, Distribution::normal(0, 1));
  std::vector<std::string> decayed;
  auto sgd = optim::Sgd<Cpu>({.weight_decay = 1.0});
  sgd.add_group([&](std::string_view path) {
    const bool exempt = optim::paths_ending_with({"bias", "norm.weight"})(path);
    if (!exempt) decayed.emplace_back(path);
    return exempt;
  }, {.weight_decay = 0});
  TwoLayers net{first, second, norm};
  auto grads = net.fc2.forward(net.norm.forward(net.fc1.forward(x))).square().mean().backward();
  sgd.step(0.1, net, grads);
  EXPECT_EQ(decayed, (std::vector<std::string>{"fc1.weight", "fc2.weight"}));
}

// Saving the state after 10 steps and restoring it into a fresh optimizer gives the same
// 20-step result as running straight through.
TYPED_TEST(Optimizers, StateSavedAndRestoredContinuesTheSameRun) {
  using B = TypeParam;
  const auto& c = golden("optimizers", "adam");
  const optim::AdamRule::Options options{.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.01};
  auto model = start<B>(c);
  optim::Adam<B> first(options);
  for (int step = 0; step < 10; ++step) {
    auto grads = loss_of<B>(model, c).backward();
    first.step(0.01, model, grads);
  }
  const auto saved = first.state_dict(model);
  std::map<std::string, TensorData> by_name(saved.begin(), saved.end());
  ASSERT_EQ(by_name.count("weight.exp_avg"), 1u);
  EXPECT_EQ(by_name.at("weight.exp_avg").shape(), Shape({3, 5}));
  EXPECT_EQ(by_name.at("bias.step").template to_vec<std::int64_t>(), std::vector<std::int64_t>{10});
  optim::Adam<B> second(options);
  second.load_state_dict(model, by_name);
  for (int step = 10; step < kSteps; ++step) {
    auto grads = loss_of<B>(model, c).backward();
    second.step(0.01, model, grads);
  }
  EXPECT_CLOSE(*model.weight, c["weight19"], 1e-10, 1e-12);
  // A state of the wrong shape is refused, naming it.
  by_name.at("weight.exp_avg") = TensorData::from(std::vector<double>(4, 0.0), Shape{2, 2});
  EXPECT_KILN_ERROR(second.load_state_dict(model, by_name), "adam: saved state weight.exp_avg has shape [2, 2]");
  by_name.at("weight.step") = TensorData::from(std::vector<double>{}, Shape{0});
  EXPECT_KILN_ERROR(second.load_state_dict(model, by_name), "adam: saved state weight.step must be one integer");
  // A step count that counting on from would overflow (a crafted checkpoint), or a negative
  // one, is refused naming it; 2^53 itself is accepted.
  by_name.at("weight.exp_avg") = std::map<std::string, TensorData>(saved.begin(), saved.end()).at("weight.exp_avg");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const std::int64_t step : {kMax, optim::StepCount::max + 1, std::int64_t{-1}}) {
    by_name.at("weight.step") = TensorData::from(std::vector<std::int64_t>{step}, Shape{1});
    EXPECT_KILN_ERROR(second.load_state_dict(model, by_name),
                      fmt::format("adam: saved state weight.step is {}, outside [0, 9007199254740992]", step));
  }
  by_name.at("weight.step") = TensorData::from(std::vector<std::int64_t>{optim::StepCount::max}, Shape{1});
  second.load_state_dict(model, by_name);
}

// Gradients of two half batches, accumulated and halved, step like the whole batch's.
TYPED_TEST(Optimizers, AccumulatedGradientsEqualTheWholeBatchs) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  const auto& c = golden("optimizers", "sgd");
  auto whole = start<B>(c), halves = start<B>(c);
  const auto x = c.tensor<AD, 2>("x", DType::f64), y = c.tensor<AD, 2>("y", DType::f64);
  optim::Sgd<B> a, b;
  auto grads = loss_of<B>(whole, c).backward();
  a.step(0.1, whole, grads);
  optim::GradientsParams<B> accumulated;
  for (std::int64_t half : {0, 1}) {
    const auto xs = x.narrow(0, half * 4, 4), ys = y.narrow(0, half * 4, 4);
    auto g = (halves.forward(xs) - ys).square().mean().backward();
    accumulated.accumulate(optim::GradientsParams<B>::from(halves, g));
  }
  EXPECT_EQ(accumulated.size(), 2u);
  accumulated.scale(0.5);
  b.step(0.1, halves, accumulated);
  EXPECT_CLOSE(*halves.weight, whole.weight->into_data(), 1e-12, 1e-14);
  EXPECT_CLOSE(*halves.bias.value(), whole.bias.value()->into_data(), 1e-12, 1e-14);
}

TYPED_TEST(Optimizers, ClippingFollowsTorch) {
  using B = TypeParam;
  optim::GradientsParams<B> grads;
  grads.set(1, Tensor<B, 1>::from({3.0, -4.0}).primitive());
  grads.set(2, Tensor<B, 1>::from({12.0}).primitive());
  // |g| = sqrt(9 + 16 + 144) = 13: scaled by 6.5 / (13 + 1e-6).
  EXPECT_NEAR(optim::clip_grad_norm(grads, 6.5), 13.0, 1e-6);
  const double f = 6.5 / (13.0 + 1e-6);
  EXPECT_CLOSE(Tensor<B, 1>(*grads.get(1)), TensorData::from(std::vector<float>{3.0f * static_cast<float>(f), -4.0f * static_cast<float>(f)}, Shape{2}), 1e-6, 0);
  EXPECT_NEAR(optim::clip_grad_norm(grads, 100.0), 6.5, 1e-5);  // below the limit: unchanged
  EXPECT_NEAR(optim::clip_grad_norm(grads, 1.0, INFINITY), 6.0, 1e-5);  // max |g| = 12 f = 6
  optim::clip_grad_value(grads, 0.25);
  EXPECT_CLOSE(Tensor<B, 1>(*grads.get(2)), TensorData::from(std::vector<float>{0.25f}, Shape{1}), 0, 0);
  EXPECT_KILN_ERROR(optim::clip_grad_norm(grads, -1.0), "clip_grad_norm: max_norm -1");
}

TYPED_TEST(Optimizers, FrozenParametersAreLeftAlone) {
  using B = TypeParam;
  const auto& c = golden("optimizers", "sgd");
  auto model = start<B>(c);
  model.bias->set_trainable(false);
  const TensorData bias = model.bias.value()->into_data();
  optim::Sgd<B> sgd;
  auto grads = loss_of<B>(model, c).backward();
  sgd.step(0.1, model, grads);
  EXPECT_CLOSE(*model.bias.value(), bias, 0, 0);
  EXPECT_CLOSE(*model.weight, c["weight0"], 1e-10, 1e-12);  // the weight's step is plain SGD's
  EXPECT_KILN_ERROR(optim::Sgd<B>({.nesterov = true}).step(0.1, model, grads = loss_of<B>(model, c).backward()),
                    "sgd: Nesterov momentum needs a momentum > 0");
}

}  // namespace
