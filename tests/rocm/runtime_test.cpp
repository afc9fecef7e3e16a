// The ROCm backend (the CUDA backend's sources built against HIP): a machine without an AMD
// GPU loads the library and reports "no ROCm device" at the first op; with one, tensors round
// trip, programs and hand-written kernels run, and the own GEMM multiplies. Its kernels'
// compilation for gfx90a and gfx1030 is tested without a GPU in tests/codegen (hiprtc).
#include <kiln/rocm/backend.hpp>
#include <kiln/tensor.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Rocm;
using kiln::Shape;
using kiln::TensorData;

TEST(RocmRuntime, NoDeviceIsAnErrorAtFirstUseNotAtLoad) {
  const std::string why = kiln::rocm::unavailable_reason();
  const TensorData data = TensorData::from(std::vector<float>{1, 2, 3}, Shape{3});
  if (!why.empty()) {
    EXPECT_TRUE(kiln::rocm::devices().empty());
    EXPECT_NE(why.find("no ROCm device"), std::string::npos) << why;
    try {
      (void)Rocm::from_data(data, {});
      ADD_FAILURE() << "from_data ran without a ROCm device";
    } catch (const kiln::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no ROCm device"), std::string::npos) << e.what();
    }
  } else {
    ASSERT_FALSE(kiln::rocm::devices().empty());
    EXPECT_FALSE(kiln::rocm::devices()[0].arch.empty());
    EXPECT_EQ(Rocm::into_data(Rocm::from_data(data, {})).to_vec<float>(), (std::vector<float>{1, 2, 3}));
  }
}

class RocmDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kiln::rocm::unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

// A program, a reduction (kernels/cuda/reduce.cu) and the own GEMM (kernels/cuda/gemm.cu),
// against values worked out by hand.
TEST_F(RocmDeviceTest, ProgramsReductionsAndGemmRun) {
  using T2 = kiln::Tensor<Rocm, 2>;
  const auto a = T2::from_data(TensorData::from(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  const auto b = T2::from_data(TensorData::from(std::vector<float>{1, 0, 0, 1, 1, 1}, Shape{3, 2}));
  EXPECT_EQ(a.matmul(b).into_data().to_vec<float>(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ((a * 2.0 + 1.0).into_data().to_vec<float>(), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  EXPECT_EQ(a.sum_dim(1).into_data().to_vec<float>(), (std::vector<float>{6, 15}));
}

}  // namespace
