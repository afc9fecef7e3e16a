// The collectives on host data and on tensors, for every dtype, with values whose result is
// known for any world size: rank r holds (r + 1) * (i + 1) at flat index i, so the sum is
// W(W + 1)/2 * (i + 1), the mean (W + 1)/2 * (i + 1) and the max W * (i + 1). Run by ctest
// on 1, 2 and 3 ranks (tests/dist/CMakeLists.txt).
#include "expect_error.hpp"

#include <kiln/cpu/instances.hpp>
#include <kiln/dist.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using namespace kiln;

// Joins the process group once for the whole binary; it is left at exit.
class DistEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { dist::init(); }
};
const auto* const environment = ::testing::AddGlobalTestEnvironment(new DistEnvironment);

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::u8};

int world() { return dist::world_size(); }
int me() { return dist::rank(); }

// (r + 1) * (i + 1) for i < n, as `dtype`.
TensorData ramp(DType dtype, Shape shape, int r) {
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = (r + 1.0) * (i + 1.0);
  return TensorData::from(values, std::move(shape)).convert(dtype);
}

std::vector<double> times_ramp(double factor, std::size_t n, std::size_t first = 0) {
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = factor * static_cast<double>(first + i + 1);
  return out;
}

TEST(Collectives, InitGivesRankAndWorldSize) {
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_GE(world(), 1);
  EXPECT_GE(me(), 0);
  EXPECT_LT(me(), world());
  dist::init();  // again: nothing changes
  EXPECT_EQ(dist::world_size(), world());
  EXPECT_EQ(dist::timeout_seconds(), std::getenv("KILN_DIST_TIMEOUT") ? std::atof(std::getenv("KILN_DIST_TIMEOUT")) : 300.0);
  dist::barrier();
}

TEST(Collectives, AllReduceSumAndMaxEveryDType) {
  const double w = world();
  for (const DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    TensorData sum = ramp(dtype, Shape{2, 3}, me());
    dist::all_reduce(sum, dist::ReduceOp::sum);
    EXPECT_EQ(sum.dtype(), dtype);
    EXPECT_EQ(sum.shape(), (Shape{2, 3}));
    EXPECT_EQ(sum.to_vec<double>(), times_ramp(w * (w + 1) / 2, 6));
    TensorData max = ramp(dtype, Shape{6}, me());
    dist::all_reduce(max, dist::ReduceOp::max);
    EXPECT_EQ(max.to_vec<double>(), times_ramp(w, 6));
  }
}

TEST(Collectives, AllReduceMeanOfFloats) {
  const double w = world();
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    TensorData mean = ramp(dtype, Shape{3, 2}, me());
    dist::all_reduce(mean, dist::ReduceOp::mean);
    EXPECT_EQ(mean.to_vec<double>(), times_ramp((w + 1) / 2, 6));
  }
}

TEST(Collectives, AllReduceOfBoolsIsAny) {
  // Element i is true on rank i only: any() is true for i < W.
  for (const dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::max}) {
    std::vector<bool> mine(5);
    for (int i = 0; i < 5; ++i) mine[static_cast<std::size_t>(i)] = i == me();
    TensorData data = TensorData::from(mine, Shape{5});
    dist::all_reduce(data, op);
    EXPECT_EQ(data.dtype(), DType::boolean);
    std::vector<double> expected(5);
    for (int i = 0; i < 5; ++i) expected[static_cast<std::size_t>(i)] = i < world() ? 1.0 : 0.0;
    EXPECT_EQ(data.to_vec<double>(), expected);
  }
}

TEST(Collectives, BroadcastEveryDTypeFromTheLastRank) {
  const int root = world() - 1;
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8,
                            DType::boolean}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Rank 0 holds zeros (false), the others ramps (true).
    TensorData data = ramp(dtype, Shape{2, 2}, me() * 10 - 1);
    const std::vector<double> expected = ramp(dtype, Shape{2, 2}, root * 10 - 1).to_vec<double>();
    dist::broadcast(data, root);
    EXPECT_EQ(data.to_vec<double>(), expected);
  }
}

TEST(Collectives, AllGatherEveryDTypeInRankOrder) {
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8,
                            DType::boolean}) {
    SCOPED_TRACE(dtype_name(dtype));
    const TensorData gathered = dist::all_gather(ramp(dtype, Shape{2, 3}, me() - 1));
    EXPECT_EQ(gathered.shape(), (Shape{2 * world(), 3}));
    std::vector<double> expected;
    for (int r = 0; r < world(); ++r) {
      const auto part = ramp(dtype, Shape{2, 3}, r - 1).to_vec<double>();
      expected.insert(expected.end(), part.begin(), part.end());
    }
    EXPECT_EQ(gathered.to_vec<double>(), expected);
  }
}

TEST(Collectives, ReduceScatterEveryDType) {
  const double w = world();
  const std::int64_t rows = 2 * world();
  for (const DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const TensorData part = dist::reduce_scatter(ramp(dtype, Shape{rows, 2}, me()), dist::ReduceOp::sum);
    EXPECT_EQ(part.shape(), (Shape{2, 2}));
    EXPECT_EQ(part.dtype(), dtype);
    EXPECT_EQ(part.to_vec<double>(), times_ramp(w * (w + 1) / 2, 4, static_cast<std::size_t>(me()) * 4));
  }
  const TensorData mean = dist::reduce_scatter(ramp(DType::f32, Shape{rows}, me()), dist::ReduceOp::mean);
  EXPECT_EQ(mean.to_vec<double>(), times_ramp((w + 1) / 2, 2, static_cast<std::size_t>(me()) * 2));
  const TensorData max = dist::reduce_scatter(ramp(DType::i64, Shape{rows}, me()), dist::ReduceOp::max);
  EXPECT_EQ(max.to_vec<double>(), times_ramp(w, 2, static_cast<std::size_t>(me()) * 2));
}

TEST(Collectives, OnTensorsOfABackend) {
  const double w = world();
  const auto x = Tensor<Cpu, 2>::from_data(ramp(DType::f32, Shape{2, 2}, me()));
  EXPECT_EQ(dist::all_reduce(x).to_vec<double>(), times_ramp(w * (w + 1) / 2, 4));
  EXPECT_EQ(dist::all_reduce(x, dist::ReduceOp::mean).to_vec<double>(), times_ramp((w + 1) / 2, 4));
  EXPECT_EQ(dist::broadcast(x, 0).to_vec<double>(), times_ramp(1, 4));
  EXPECT_EQ(dist::all_gather(x).dims(), (std::array<std::int64_t, 2>{2 * world(), 2}));
  EXPECT_EQ(dist::reduce_scatter(Tensor<Cpu, 1>::from_data(ramp(DType::f32, Shape{world()}, me()))).to_vec<double>(),
            times_ramp(w * (w + 1) / 2, 1, static_cast<std::size_t>(me())));
  const auto ids = Tensor<Cpu, 1, Int>::from_data(ramp(DType::i64, Shape{3}, me()));
  EXPECT_EQ(dist::all_reduce(ids, dist::ReduceOp::max).dtype(), DType::i64);
  EXPECT_EQ(dist::all_reduce(ids, dist::ReduceOp::max).to_vec<double>(), times_ramp(w, 3));
  // On Autodiff<Cpu>: the result is a leaf with the same values.
  const auto a = Tensor<Autodiff<Cpu>, 2>::from_data(ramp(DType::f32, Shape{2, 2}, me()));
  EXPECT_EQ(dist::all_reduce(a).to_vec<double>(), times_ramp(w * (w + 1) / 2, 4));
}

TEST(Collectives, ErrorsNameTheOp) {
  TensorData ints = ramp(DType::i32, Shape{3}, me());
  EXPECT_KILN_ERROR(dist::all_reduce(ints, dist::ReduceOp::mean), "all_reduce", "mean needs a float tensor", "i32");
  TensorData bools = TensorData::from(std::vector<bool>{true}, Shape{1});
  EXPECT_KILN_ERROR(dist::all_reduce(bools, dist::ReduceOp::mean), "all_reduce", "mean");
  TensorData data = ramp(DType::f32, Shape{3}, me());
  EXPECT_KILN_ERROR(dist::broadcast(data, world()), "broadcast", "root", "is not a rank");
  EXPECT_KILN_ERROR(dist::broadcast(data, -1), "broadcast", "root -1");
  EXPECT_KILN_ERROR(dist::all_gather(TensorData::from(std::vector<float>{1.0f}, Shape{})), "all_gather", "dimension");
  if (world() > 1) {
    EXPECT_KILN_ERROR(dist::reduce_scatter(ramp(DType::f32, Shape{world() + 1}, me())), "reduce_scatter",
                      "does not divide");
  }
  // The group still works after those errors: every rank threw before communicating, or all did.
  dist::barrier();
}

TEST(Collectives, MismatchedShapesFailOnEveryRank) {
  if (world() == 1) GTEST_SKIP() << "needs two ranks or more";
  TensorData mine = ramp(DType::f32, Shape{me() == 0 ? 2 : 3}, me());
  EXPECT_KILN_ERROR(dist::all_reduce(mine), "all_reduce", "different shapes or dtypes");
  TensorData typed = ramp(me() == 0 ? DType::f32 : DType::f64, Shape{2}, me());
  EXPECT_KILN_ERROR(dist::all_gather(typed), "all_gather", "different shapes or dtypes");
  TensorData rooted = ramp(DType::f32, Shape{2}, me());
  EXPECT_KILN_ERROR(dist::broadcast(rooted, me() == 0 ? 0 : 1), "broadcast", "different roots");
  dist::barrier();
}

// Run alone, by the ctest dist.timeout (3 ranks, KILN_DIST_TIMEOUT=2): the last rank stops
// calling collectives; the others' barrier must throw the timeout's error naming it, not
// wait forever.
TEST(DistTimeout, ARankThatHangsEndsTheOthersWithAnErrorNamingIt) {
  if (!std::getenv("KILN_TEST_DIST_HANG")) GTEST_SKIP() << "run by the ctest dist.timeout only";
  ASSERT_GE(world(), 2);
  const int hanging = world() - 1;
  if (me() == hanging) {
    if (std::string(std::getenv("KILN_TEST_DIST_HANG")) == "kill") std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(40));  // killed long before, when rank 0 ends the job
    return;
  }
  try {
    dist::barrier();
    ADD_FAILURE() << "the barrier returned while rank " << hanging << " hangs";
  } catch (const Error& e) {
    const std::string message = e.what();
    std::printf("rank %d timed out as expected: %s\n", me(), e.what());
    std::fflush(stdout);
    EXPECT_NE(message.find("KILN_DIST_TIMEOUT"), std::string::npos);
    EXPECT_NE(message.find("rank " + std::to_string(hanging) + " did not answer"), std::string::npos);
    // The other ranks that wait in the barrier answered: only the hanging one is named.
    EXPECT_EQ(message.find("did not answer"), message.rfind("did not answer"));
    EXPECT_EQ(message.find("rank " + std::to_string(1 - me()) + " did not answer"), std::string::npos);
    EXPECT_EQ(message.find("another collective"), std::string::npos);
  }
  EXPECT_KILN_ERROR(dist::barrier(), "barrier", "timed out");
  // Every waiting rank must have thrown before rank 0 ends the job.
  if (me() == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace
