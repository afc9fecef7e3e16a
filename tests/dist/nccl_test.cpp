// kiln::dist's collectives on CUDA tensors over NCCL (kiln/dist/nccl.hpp), with the values
// of collectives_test.cpp: rank r holds (r + 1) * (i + 1), so the sum is W(W + 1)/2 * (i + 1),
// the max W * (i + 1). Each rank on GPU local_rank(): NCCL takes one GPU per rank. Skipped,
// with the reason, where kiln::dist_nccl is not built or this host has fewer GPUs than
// ranks (CI has none).
#include <kiln/cpu/instances.hpp>
#include <kiln/dist.hpp>

#include <gtest/gtest.h>

#if KILN_TEST_NCCL
#include <kiln/cuda/backend.hpp>
#include <kiln/dist/nccl.hpp>
#endif

#include <vector>

namespace {

using namespace kiln;

#if KILN_TEST_NCCL
// The GPU of this rank, or why there is none.
std::string why_no_gpu() {
  if (const std::string reason = cuda::unavailable_reason(); !reason.empty()) return reason;
  const auto gpus = cuda::devices().size();
  if (gpus < static_cast<std::size_t>(dist::local_size()))
    return "NCCL takes one GPU per rank: " + std::to_string(dist::local_size()) + " ranks on this host, " +
           std::to_string(gpus) + " GPU(s)";
  return "";
}

std::vector<double> ramp(std::size_t n, double factor) {
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = factor * static_cast<double>(i + 1);
  return out;
}

TEST(Nccl, CollectivesOnCudaTensorsEveryDType) {
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << reason;
  const CudaDevice device{dist::local_rank()};
  const double w = dist::world_size(), r = dist::rank();
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto mine = Tensor<Cuda, 2>::from_data(TensorData::from(ramp(6, r + 1), Shape{2, 3}).convert(dtype), device);
    EXPECT_EQ(dist::all_reduce(mine).to_vec<double>(), ramp(6, w * (w + 1) / 2));
    EXPECT_EQ(dist::all_reduce(mine, dist::ReduceOp::max).to_vec<double>(), ramp(6, w));
    if (is_float(dtype)) EXPECT_EQ(dist::all_reduce(mine, dist::ReduceOp::mean).to_vec<double>(), ramp(6, (w + 1) / 2));
    EXPECT_EQ(dist::broadcast(mine, 0).to_vec<double>(), ramp(6, 1));
    const auto gathered = dist::all_gather(mine);
    EXPECT_EQ(gathered.shape(), (Shape{2 * static_cast<std::int64_t>(w), 3}));
    const auto values = gathered.to_vec<double>();
    for (int k = 0; k < static_cast<int>(w); ++k)
      EXPECT_EQ(std::vector<double>(values.begin() + 6 * k, values.begin() + 6 * (k + 1)), ramp(6, k + 1.0));
  }
  // reduce_scatter: [2W, 3] summed, this rank's [2, 3] rows.
  const auto rows = static_cast<std::int64_t>(2 * w);
  const auto tall = Tensor<Cuda, 2>::from_data(TensorData::from(ramp(static_cast<std::size_t>(rows * 3), r + 1), Shape{rows, 3}), device);
  const auto part = dist::reduce_scatter(tall).to_vec<double>();
  std::vector<double> want(6);
  for (std::size_t i = 0; i < 6; ++i) want[i] = w * (w + 1) / 2 * static_cast<double>(6 * dist::rank() + i + 1);
  EXPECT_EQ(part, want);
}
#else
TEST(Nccl, CollectivesOnCudaTensorsEveryDType) {
  GTEST_SKIP() << "kiln::dist_nccl is not built here (it needs the CUDA backend and NCCL)";
}
#endif

}  // namespace
