// kiln::Dispatch (kiln/dispatch/backend.hpp): devices by name, every target computing what
// its backend computes, operands on two backends refused, moves between backends, and a
// training step on Autodiff<Dispatch> against Autodiff<Cpu>. The conformance suite runs on
// Dispatch too (tests/backend, once per backend through KILN_BACKEND).
#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#if defined(KILN_TEST_VULKAN)
#include <kiln/vulkan/backend.hpp>
#endif
#include <kiln/nn.hpp>
#include <kiln/optim.hpp>
#include <kiln/tensor.hpp>

#include "expect_error.hpp"
#include "golden.hpp"

#if defined(KILN_TEST_DISPATCH_CUDA)
#include <kiln/cuda/backend.hpp>
#endif
#if defined(KILN_TEST_DISPATCH_ROCM)
#include <kiln/rocm/backend.hpp>
#endif
#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln;

namespace {

using D = Dispatch;

// The targets that can run here, with the reason of those that cannot.
std::vector<DispatchTarget> runnable() {
  std::vector<DispatchTarget> out;
  for (DispatchTarget t : dispatch::built_targets())
    if (dispatch::unavailable_reason(DispatchDevice{t}).empty()) out.push_back(t);
  return out;
}

// Restores the process default device when a test ends.
class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = D::default_device(); }
  void TearDown() override { D::set_default_device(saved_); }

 private:
  DispatchDevice saved_;
};

template <std::size_t N> Tensor<Cpu, N> on_cpu(const Tensor<D, N>& t) { return Tensor<Cpu, N>::from_data(t.into_data()); }

}  // namespace

TEST_F(DispatchTest, DevicesAreNamedAndParsed) {
  EXPECT_EQ(DispatchDevice::parse("cpu"), DispatchDevice{DispatchTarget::cpu});
  EXPECT_EQ(DispatchDevice::parse("fusion_vulkan:1"), (DispatchDevice{DispatchTarget::fusion_vulkan, 1}));
  EXPECT_EQ(DispatchDevice::parse("default"), DispatchDevice{});
  for (const char* name : {"cpu", "vulkan:0", "fusion_cpu", "fusion_vulkan:3", "default"})
    EXPECT_EQ(DispatchDevice::parse(name).str(), name);
  EXPECT_EQ(DispatchDevice::parse("fusion_cuda:1"), (DispatchDevice{DispatchTarget::fusion_cuda, 1}));
  EXPECT_KILN_ERROR(DispatchDevice::parse("metal"), "dispatch: no backend named 'metal' (built: cpu");
  EXPECT_KILN_ERROR(DispatchDevice::parse("vulkan:x"), "dispatch: 'vulkan:x' is not a device");
  EXPECT_KILN_ERROR(D::set_default_device({}), "name a backend");
  // Each built backend and Fusion over it.
  std::size_t built = 2;
#if defined(KILN_TEST_VULKAN)
  built += 2;
#endif
#if defined(KILN_TEST_DISPATCH_CUDA)
  built += 2;
  EXPECT_EQ(dispatch::unavailable_reason(DispatchDevice{DispatchTarget::cuda}), cuda::unavailable_reason());
#endif
#if defined(KILN_TEST_DISPATCH_ROCM)
  built += 2;
  EXPECT_EQ(dispatch::unavailable_reason(DispatchDevice{DispatchTarget::fusion_rocm}), rocm::unavailable_reason());
  EXPECT_EQ(DispatchDevice::parse("rocm:1").str(), "rocm:1");
#endif
  EXPECT_EQ(dispatch::built_targets().size(), built);
#if defined(KILN_TEST_VULKAN)
  if (vulkan::unavailable_reason().empty()) EXPECT_GE(runnable().size(), 4u);
#endif
  D::set_default_device(DispatchDevice{DispatchTarget::fusion_cpu});
  EXPECT_EQ(D::resolve({}), DispatchDevice{DispatchTarget::fusion_cpu});
  EXPECT_EQ(D::device(Tensor<D, 1>::zeros({3}).primitive()), DispatchDevice{DispatchTarget::fusion_cpu});
}

// The same program on every target that can run here gives the CPU's values: elementwise
// chains, reductions, a matmul, softmax and layer norm (fused on the CPU, composed on
// Vulkan), conv and pooling, indexing, and the Adam step.
TEST_F(DispatchTest, EveryTargetComputesWhatItsBackendComputes) {
  manual_seed(3);
  const auto cx = Tensor<Cpu, 2>::random({6, 10}, Distribution::normal(0, 1));
  const auto cw = Tensor<Cpu, 2>::random({10, 4}, Distribution::normal(0, 1));
  const auto ci = Tensor<Cpu, 4>::random({2, 3, 8, 8}, Distribution::normal(0, 1));
  const auto ck = Tensor<Cpu, 4>::random({5, 3, 3, 3}, Distribution::normal(0, 0.3));
  const auto expected_chain = ((cx * 2.0 + 1.0).gelu() * cx.sigmoid()).sum_dim(1).into_data();
  const auto expected_matmul = cx.matmul(cw).into_data();
  const auto expected_softmax = cx.softmax(1).into_data();
  const auto expected_log_softmax = cx.log_softmax(0).into_data();
  const auto expected_norm = Tensor<Cpu, 2>(Cpu::layer_norm(cx.primitive(), 1, 1e-5)).into_data();
  const auto expected_conv = functional::max_pool2d(functional::conv2d<Cpu>(ci, ck, std::nullopt, {.padding = {1, 1}}),
                                                    {.kernel = {2, 2}, .stride = {2, 2}})
                                 .into_data();
  const ops::AdamStep adam{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01,
                           .decoupled_weight_decay = true, .step = 3};
  const auto expected_adam = Cpu::adam_step(Tensor<Cpu, 2>(cx).into_primitive(), cx.primitive(),
                                            Tensor<Cpu, 2>(cx).into_primitive(), cx.abs().into_primitive(), adam);
  for (DispatchTarget t : runnable()) {
    SCOPED_TRACE(std::string(dispatch::target_name(t)));
    const DispatchDevice device{t};
    const auto x = Tensor<D, 2>::from_data(cx.into_data(), device);
    const auto w = Tensor<D, 2>::from_data(cw.into_data(), device);
    const auto image = Tensor<D, 4>::from_data(ci.into_data(), device);
    const auto kernel = Tensor<D, 4>::from_data(ck.into_data(), device);
    EXPECT_EQ(D::device(x.primitive()).target, t);
    EXPECT_TRUE(test::all_close(((x * 2.0 + 1.0).gelu() * x.sigmoid()).sum_dim(1).into_data(), expected_chain, 1e-5, 1e-5));
    EXPECT_TRUE(test::all_close(x.matmul(w).into_data(), expected_matmul, 1e-5, 1e-5));
    EXPECT_TRUE(test::all_close(x.softmax(1).into_data(), expected_softmax, 1e-5, 1e-6));
    EXPECT_TRUE(test::all_close(x.log_softmax(0).into_data(), expected_log_softmax, 1e-5, 1e-5));
    EXPECT_TRUE(test::all_close(Tensor<D, 2>(D::layer_norm(x.primitive(), 1, 1e-5)).into_data(), expected_norm, 1e-4, 1e-5));
    EXPECT_TRUE(test::all_close(functional::max_pool2d(functional::conv2d<D>(image, kernel, std::nullopt, {.padding = {1, 1}}),
                                                       {.kernel = {2, 2}, .stride = {2, 2}})
                                    .into_data(),
                                expected_conv, 1e-4, 1e-5));
    const auto got = D::adam_step(Tensor<D, 2>(x).into_primitive(), x.primitive(), Tensor<D, 2>(x).into_primitive(),
                                  x.abs().into_primitive(), adam);
    for (std::size_t k = 0; k < 3; ++k)
      EXPECT_TRUE(test::all_close(D::into_data(got[k]), Cpu::into_data(expected_adam[k]), 1e-5, 1e-6)) << k;
  }
}

// Layer norm's and softmax's gradients where the backend composes them (the CPU's fused
// kernels are the reference).
TEST_F(DispatchTest, ComposedGradientsMatchTheFusedKernels) {
  manual_seed(4);
  const auto cx = Tensor<Cpu, 3>::random({3, 4, 7}, Distribution::normal(0, 1));
  const auto cdy = Tensor<Cpu, 3>::random({3, 4, 7}, Distribution::normal(0, 1));
  const auto y = Cpu::softmax(cx.primitive(), 2, false), ly = Cpu::softmax(cx.primitive(), 1, true);
  for (DispatchTarget t : runnable()) {
    SCOPED_TRACE(std::string(dispatch::target_name(t)));
    const DispatchDevice device{t};
    const auto x = D::from_data(cx.into_data(), device), dy = D::from_data(cdy.into_data(), device);
    EXPECT_TRUE(test::all_close(D::into_data(D::layer_norm_backward(x, dy, 2, 1e-5)),
                                Cpu::into_data(Cpu::layer_norm_backward(cx.primitive(), cdy.primitive(), 2, 1e-5)), 1e-4, 1e-5));
    EXPECT_TRUE(test::all_close(D::into_data(D::softmax_backward(D::from_data(Cpu::into_data(y), device), dy, 2, false)),
                                Cpu::into_data(Cpu::softmax_backward(y, cdy.primitive(), 2, false)), 1e-5, 1e-6));
    EXPECT_TRUE(test::all_close(D::into_data(D::softmax_backward(D::from_data(Cpu::into_data(ly), device), dy, 1, true)),
                                Cpu::into_data(Cpu::softmax_backward(ly, cdy.primitive(), 1, true)), 1e-5, 1e-6));
  }
}

TEST_F(DispatchTest, OperandsOnTwoBackendsAreAnErrorAndToDeviceMoves) {
  const auto targets = runnable();
  ASSERT_GE(targets.size(), 2u) << "the CPU and Fusion<Cpu> always run";
  const auto a = Tensor<D, 1>::from_data(TensorData::from(std::vector<float>{1, 2, 3}, Shape{3}), {targets[0]});
  const auto b = Tensor<D, 1>::from_data(TensorData::from(std::vector<float>{4, 5, 6}, Shape{3}), {targets[1]});
  EXPECT_KILN_ERROR((void)(a + b).into_data(),
                    fmt::format("add: operands on {} ([3]) and {} ([3]): move one with to_device",
                                dispatch::target_name(targets[0]), dispatch::target_name(targets[1])));
  EXPECT_KILN_ERROR(D::device(D::Primitive{}), "device: an operand holds no tensor");
  EXPECT_KILN_ERROR(D::into_data(D::Primitive{}), "into_data: an operand holds no tensor");
  EXPECT_KILN_ERROR(D::to_device(D::Primitive{}, {targets[1]}), "to_device: an operand holds no tensor");
  for (DispatchTarget t : targets) {
    const auto moved = a.to_device({t});
    EXPECT_EQ(D::device(moved.primitive()).target, t);
    EXPECT_EQ(moved.into_data().to_vec<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ((moved + b.to_device({t})).into_data().to_vec<float>(), (std::vector<float>{5, 7, 9}));
  }
}

// One Adam step of a small MLP on Autodiff<Dispatch> gives Autodiff<Cpu>'s weights, on every
// target: the model is compiled once, for Dispatch.
TEST_F(DispatchTest, ATrainingStepOnAutodiffDispatchMatchesTheCpu) {
  using AC = Autodiff<Cpu>;
  using AD = Autodiff<D>;
  auto step = []<class B>(const typename B::Device& device) {
    manual_seed(11);
    nn::Linear<B> first(8, 16, {}, device), second(16, 3, {}, device);
    auto adam = optim::adamw<B>();
    manual_seed(12);
    const auto x = Tensor<B, 2>::random({5, 8}, Distribution::normal(0, 1), device);
    const auto labels = Tensor<B, 1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{0, 2, 1, 1, 0}, Shape{5}), device);
    const auto loss = nn::cross_entropy(second.forward(first.forward(x).relu()), labels);
    auto grads = loss.backward();
    adam.step(0.01, first, grads);
    adam.step(0.01, second, grads);
    return first.weight.val().into_data();
  };
  const TensorData expected = step.template operator()<AC>(CpuDevice{});
  for (DispatchTarget t : runnable()) {
    SCOPED_TRACE(std::string(dispatch::target_name(t)));
    EXPECT_TRUE(test::all_close(step.template operator()<AD>(DispatchDevice{t}), expected, 1e-5, 1e-6));
  }
}
