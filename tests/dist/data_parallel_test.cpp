// DataParallel: rank 0's weights everywhere at the start, modules that differ across ranks
// rejected, and gradients averaged so that W ranks with batch B train exactly as one
// process with batch W * B (run by ctest on 1 and 2 ranks).
#include "expect_error.hpp"

#include <kiln/cpu/instances.hpp>
#include <kiln/dist.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using B = Autodiff<Cpu>;

template <class Bk> struct Mlp {
  nn::Linear<Bk> hidden, out;
  KILN_MODULE(hidden, out)
  Mlp() = default;
  Mlp(std::int64_t in, std::int64_t width, std::int64_t outputs) : hidden(in, width), out(width, outputs) {}
  Tensor<Bk, 2> forward(const Tensor<Bk, 2>& x) const { return out.forward(hidden.forward(x).tanh()); }
};

// Every parameter's values, in module order.
template <class M> std::vector<std::vector<double>> weights_of(const M& module) {
  std::vector<std::vector<double>> out;
  nn::for_each_param(module, [&](const std::string&, const auto& p) { out.push_back(p->template to_vec<double>()); });
  return out;
}

// Rows [begin, end) of a deterministic batch for `step`: x [n, 4], y [n, 2].
std::pair<Tensor<B, 2>, Tensor<B, 2>> batch(int step, std::int64_t begin, std::int64_t end) {
  std::vector<double> x, y;
  for (std::int64_t row = begin; row < end; ++row) {
    for (int j = 0; j < 4; ++j) x.push_back(std::sin(0.3 * step + 0.7 * static_cast<double>(row) + 1.3 * j));
    for (int j = 0; j < 2; ++j) y.push_back(std::cos(0.2 * step - 0.5 * static_cast<double>(row) + j));
  }
  const std::int64_t n = end - begin;
  return {Tensor<B, 2>::from_data(TensorData::from(x, Shape{n, 4}).convert(DType::f32)),
          Tensor<B, 2>::from_data(TensorData::from(y, Shape{n, 2}).convert(DType::f32))};
}

TEST(DataParallel, StartsEveryRankFromRankZerosWeights) {
  manual_seed(10 + static_cast<std::uint64_t>(dist::rank()));  // different weights on each rank
  Mlp<B> model(4, 8, 2);
  const dist::DataParallel parallel(model);
  const auto mine = weights_of(model);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    TensorData values = TensorData::from(mine[i], Shape{static_cast<std::int64_t>(mine[i].size())});
    dist::broadcast(values, 0);
    EXPECT_EQ(values.to_vec<double>(), mine[i]) << "parameter " << i;
  }
}

// W ranks with batch B against one process with batch W * B, 20 Adam steps from the same
// start; the gradients averaged during backward (DataParallel::backward) or after it (sync).
void train_as_one(bool during_backward, std::size_t bucket_bytes) {
  constexpr std::int64_t kBatch = 4;  // per rank
  const std::int64_t world = dist::world_size(), me = dist::rank();
  manual_seed(20 + static_cast<std::uint64_t>(me));
  Mlp<B> model(4, 16, 2);
  const dist::DataParallel parallel(model, {.bucket_bytes = bucket_bytes});
  // The reference: one process, the whole batch, from the same start.
  Mlp<B> reference(4, 16, 2);
  const auto from = nn::detail::state_of(model), to = nn::detail::state_of(reference);
  for (std::size_t i = 0; i < from.slots.size(); ++i) to.slots[i].assign(from.slots[i].into_data());

  optim::Adam<Cpu> adam, reference_adam;
  for (int step = 0; step < 20; ++step) {
    const auto [x, y] = batch(step, me * kBatch, (me + 1) * kBatch);
    const auto loss = (model.forward(x) - y).square().mean();
    optim::GradientsParams<Cpu> grads;
    if (during_backward) {
      grads = parallel.backward(loss);
    } else {
      auto backward = loss.backward();
      grads = optim::GradientsParams<Cpu>::from(model, backward);
      parallel.sync(grads);
    }
    adam.step(0.01, model, grads);

    const auto [all_x, all_y] = batch(step, 0, world * kBatch);
    auto reference_backward = (reference.forward(all_x) - all_y).square().mean().backward();
    reference_adam.step(0.01, reference, reference_backward);
  }
  const auto trained = weights_of(model), expected = weights_of(reference);
  ASSERT_EQ(trained.size(), expected.size());
  double largest = 0;
  for (std::size_t i = 0; i < trained.size(); ++i)
    for (std::size_t j = 0; j < trained[i].size(); ++j) largest = std::max(largest, std::abs(trained[i][j] - expected[i][j]));
  EXPECT_LT(largest, 1e-6);
  // And the weights did move: the comparison is not of two untrained models.
  const auto start = weights_of(Mlp<B>(4, 16, 2));
  EXPECT_NE(trained, start);
}

// Small buckets: several all_reduces per step, and a parameter larger than a bucket.
TEST(DataParallel, TwoRanksWithBatchBTrainAsOneWithBatch2B) { train_as_one(false, 200); }
// The same with the buckets sent while backward runs: small ones (the first leaves before
// backward reaches the first layer) and the default 25 MiB (one bucket).
TEST(DataParallel, AveragedDuringBackwardTrainsAsOneWithBatch2B) {
  train_as_one(true, 200);
  train_as_one(true, std::size_t{25} << 20);
}

// Accumulation without communication (torch's no_sync): two half batches accumulated
// locally, then one sync, give the gradient of the whole batch on one process.
TEST(DataParallel, AccumulatedGradientsSyncedOnceEqualTheWholeBatch) {
  constexpr std::int64_t kBatch = 4;  // per rank and step: two micro-batches of 2
  const std::int64_t world = dist::world_size(), me = dist::rank();
  Mlp<B> model(4, 6, 2);
  const dist::DataParallel parallel(model);
  optim::GradientsParams<Cpu> grads;
  for (std::int64_t micro = 0; micro < 2; ++micro) {
    const std::int64_t begin = me * kBatch + micro * (kBatch / 2);
    const auto [x, y] = batch(0, begin, begin + kBatch / 2);
    auto backward = (model.forward(x) - y).square().mean().backward();
    grads.accumulate(optim::GradientsParams<Cpu>::from(model, backward));
  }
  grads.scale(0.5);
  parallel.sync(grads);

  const auto [all_x, all_y] = batch(0, 0, world * kBatch);
  auto backward = (model.forward(all_x) - all_y).square().mean().backward();
  const auto expected = optim::GradientsParams<Cpu>::from(model, backward);
  nn::for_each_param(model, [&](const std::string& path, const auto& p) {
    const TensorData got = Cpu::into_data(*grads.get(p.id())), want = Cpu::into_data(*expected.get(p.id()));
    const auto g = got.to_vec<double>(), w = want.to_vec<double>();
    ASSERT_EQ(g.size(), w.size());
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-6) << path << " " << i;
  });
}

// A parameter that this rank's backward did not reach counts as a zero gradient here.
template <class Bk> struct TwoHeads {
  nn::Linear<Bk> a, b;
  KILN_MODULE(a, b)
};

class SomeRanksLack : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(DataParallel, SomeRanksLack, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "during_backward" : "sync"; });

TEST_P(SomeRanksLack, AGradientSomeRanksLackIsAveragedAsZeros) {
  TwoHeads<B> model{nn::Linear<B>(2, 1), nn::Linear<B>(2, 1)};
  const dist::DataParallel parallel(model, {.bucket_bytes = 8});  // a bucket per parameter
  const auto x = Tensor<B, 2>::from({{1.0, 2.0}, {3.0, 5.0}});
  auto loss = model.a.forward(x).sum();
  if (dist::rank() > 0) loss = loss + model.b.forward(x).sum();
  optim::GradientsParams<Cpu> grads;
  if (GetParam()) {
    grads = parallel.backward(loss);
  } else {
    auto backward = loss.backward();
    grads = optim::GradientsParams<Cpu>::from(model, backward);
    parallel.sync(grads);
  }

  const double w = dist::world_size();
  const auto b_grad = grads.get(model.b.weight.id());
  if (w == 1) {
    EXPECT_FALSE(b_grad.has_value());
  } else {
    ASSERT_TRUE(b_grad.has_value());
    const TensorData b_values = Cpu::into_data(*b_grad);
    // The f32 sum of the ranks' gradients over the world size, as f32 computes it.
    const auto mean = [w](double g) { return static_cast<double>(static_cast<float>(g * (w - 1)) / static_cast<float>(w)); };
    EXPECT_EQ(b_values.to_vec<double>(), (std::vector<double>{mean(4.0), mean(7.0)}));
  }
  const auto a_grad = grads.get(model.a.weight.id());
  ASSERT_TRUE(a_grad.has_value());
  const TensorData a_values = Cpu::into_data(*a_grad);
  EXPECT_EQ(a_values.to_vec<double>(), (std::vector<double>{4.0, 7.0}));
}

TEST(DataParallel, ModulesThatDifferAcrossRanksAreRejectedOnEveryRank) {
  if (dist::world_size() == 1) GTEST_SKIP() << "needs two ranks or more";
  Mlp<B> wider(4, 8 + dist::rank(), 2);
  EXPECT_KILN_ERROR(dist::DataParallel(wider), "DataParallel", "differ", "hidden.weight");
  nn::Linear<B> one(3, 3);
  TwoHeads<B> two{nn::Linear<B>(3, 3), nn::Linear<B>(3, 3)};
  if (dist::rank() == 0) EXPECT_KILN_ERROR(dist::DataParallel(one), "DataParallel", "different numbers");
  else EXPECT_KILN_ERROR(dist::DataParallel(two), "DataParallel", "different numbers");
  // A parameter frozen on one rank only: sync says so on every rank.
  Mlp<B> model(4, 8, 2);
  const dist::DataParallel parallel(model);
  if (dist::rank() == 1) model.out.weight.set_trainable(false);
  const auto x = Tensor<B, 2>::ones({2, 4});
  auto backward = model.forward(x).sum().backward();
  auto grads = optim::GradientsParams<Cpu>::from(model, backward);
  EXPECT_KILN_ERROR(parallel.sync(grads), "DataParallel::sync", "different trainable parameters");
  EXPECT_KILN_ERROR((void)parallel.backward(model.forward(x).sum()), "DataParallel::backward",
                    "different trainable parameters");
  dist::barrier();
}

}  // namespace

namespace {
template <class Bk> struct Normed {
  nn::Linear<Bk> fc;
  nn::BatchNorm1d<Bk> norm;
  KILN_MODULE(fc, norm)
  Normed() : fc(3, 4), norm(4) {}
};

// Every buffer's values, in module order.
std::vector<std::vector<double>> buffers_of(const Normed<B>& model) {
  std::vector<std::vector<double>> out;
  for (const nn::Slot& slot : nn::detail::state_of(model).slots)
    if (!slot.param) out.push_back(slot.into_data().to_vec<double>());
  return out;
}
}  // namespace

// After a step, every rank holds rank 0's running statistics (broadcast_buffers), or its own.
TEST(DataParallel, BuffersFollowRankZeroAfterEachStep) {
  for (const bool broadcast : {true, false}) {
    Normed<B> model;
    const dist::DataParallel parallel(model, {.broadcast_buffers = broadcast});
    nn::train(model);
    const double shift = dist::rank();  // each rank's batch has other statistics
    const auto x = Tensor<B, 2>::from({{1.0 + shift, 2.0, 3.0}, {-1.0, 0.5 * shift, 2.0}, {0.0, 1.0, -shift}});
    (void)parallel.backward(model.norm.forward(model.fc.forward(x)).square().sum());
    const auto mine = buffers_of(model);
    bool same_as_rank0 = true;
    for (const auto& values : mine) {
      TensorData shared = TensorData::from(values, Shape{static_cast<std::int64_t>(values.size())});
      dist::broadcast(shared, 0);
      same_as_rank0 = same_as_rank0 && shared.to_vec<double>() == values;
    }
    if (broadcast || dist::rank() == 0) EXPECT_TRUE(same_as_rank0) << "broadcast_buffers " << broadcast;
    else EXPECT_FALSE(same_as_rank0) << "rank " << dist::rank() << " kept its own statistics";
  }
}
