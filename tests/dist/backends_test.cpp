// The tensor collectives and DataParallel on every hardware backend built (the CPU, and
// Vulkan on lavapipe where it was built), bare and under Autodiff: each tensor goes through
// host memory and comes back on its device.
#include "backends.hpp"

#include <kiln/dist.hpp>
#include <kiln/nn.hpp>

#include <vector>

namespace {

using namespace kiln;

template <class B> class DistBackends : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(DistBackends, kiln::test::HardwareBackends, kiln::test::BackendNames);

// A tensor's elements as doubles.
template <class T> std::vector<double> values_of(const T& tensor) { return tensor.into_data().template to_vec<double>(); }

std::vector<double> scaled(double factor, std::vector<double> values) {
  for (double& v : values) v *= factor;
  return values;
}

TYPED_TEST(DistBackends, CollectivesKeepTheDeviceAndDType) {
  using B = TypeParam;
  const double w = dist::world_size(), r = dist::rank();
  const auto x = Tensor<B, 2>::from({{1.0, 2.0}, {3.0, 4.0}}) * (r + 1);
  const auto sum = dist::all_reduce(x);
  EXPECT_EQ(sum.device(), x.device());
  EXPECT_EQ(values_of(sum), scaled(w * (w + 1) / 2, {1, 2, 3, 4}));
  EXPECT_EQ(values_of(dist::all_reduce(x, dist::ReduceOp::max)), scaled(w, {1, 2, 3, 4}));
  EXPECT_EQ(values_of(dist::broadcast(x, 0)), (std::vector<double>{1, 2, 3, 4}));
  const auto gathered = dist::all_gather(x);
  EXPECT_EQ(gathered.dim(0), 2 * dist::world_size());
  const auto ids = Tensor<B, 1, Int>::from({1, 2, 3}, {}, DType::i32) * static_cast<std::int64_t>(r + 1);
  const auto id_sum = dist::all_reduce(ids);
  EXPECT_EQ(id_sum.dtype(), DType::i32);
  EXPECT_EQ(values_of(id_sum), scaled(w * (w + 1) / 2, {1, 2, 3}));
  const auto part = dist::reduce_scatter(Tensor<B, 1>::ones({dist::world_size() * 2}) * (r + 1));
  EXPECT_EQ(values_of(part), scaled(w * (w + 1) / 2, {1, 1}));
  // Under Autodiff: the result is a leaf with the same values.
  const auto a = Tensor<Autodiff<B>, 2>::from({{1.0, 2.0}}) * (r + 1);
  EXPECT_EQ(values_of(dist::all_reduce(a, dist::ReduceOp::mean)), scaled((w + 1) / 2, {1, 2}));
}

TYPED_TEST(DistBackends, DataParallelAveragesGradientsOnTheParametersDevice) {
  using B = TypeParam;
  manual_seed(30 + static_cast<std::uint64_t>(dist::rank()));
  nn::Linear<Autodiff<B>> model(2, 1);
  const dist::DataParallel parallel(model);
  // Rank r's loss is (r + 1) * sum(model(x)): the weight's gradient is (r + 1) * [4, 6].
  const auto x = Tensor<Autodiff<B>, 2>::from({{1.0, 2.0}, {3.0, 4.0}});
  auto backward = (model.forward(x).sum() * (dist::rank() + 1.0)).backward();
  auto grads = optim::GradientsParams<B>::from(model, backward);
  parallel.sync(grads);
  const double w = dist::world_size();
  const auto g = grads.get(model.weight.id());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(B::device(*g), model.weight->device());
  const TensorData values = B::into_data(*g);
  EXPECT_EQ(values.template to_vec<double>(), scaled((w + 1) / 2, {4, 6}));
}

}  // namespace
