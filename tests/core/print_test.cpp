// Printing: kiln::to_string and fmt::format("{}", t) against PyTorch 1.13's repr() of the
// same tensors (number formats, alignment, 80-column wrapping, "..." summaries). Kiln
// appends shape, dtype and device where PyTorch appends non-default dtypes; bools print
// as true/false.
#include "golden.hpp"

#include <kiln/tensor.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

using namespace kiln;
using F1 = Tensor<Cpu, 1>;
using F2 = Tensor<Cpu, 2>;

TEST(Print, FloatsUseFixedDecimalsAlignedRight) {
  const auto t = F2::from({{1.5, -2.25, 3.0}, {0.0, 10.125, -0.5}});
  EXPECT_EQ(to_string(t),
            "tensor([[ 1.5000, -2.2500,  3.0000],\n"
            "        [ 0.0000, 10.1250, -0.5000]], shape=[2, 3], dtype=f32, device=cpu)");
  EXPECT_EQ(fmt::format("{}", t), to_string(t));
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), to_string(t));
}

TEST(Print, IntegralFloatsPrintWithATrailingDot) {
  EXPECT_EQ(to_string(F2::from({{1, 2, 3}, {4, 5, 6}})),
            "tensor([[1., 2., 3.],\n"
            "        [4., 5., 6.]], shape=[2, 3], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(F1::from({-0.0, 1.0})), "tensor([-0., 1.], shape=[2], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(F1::zeros({3})), "tensor([0., 0., 0.], shape=[3], dtype=f32, device=cpu)");
}

TEST(Print, WideRangesSwitchToScientific) {
  EXPECT_EQ(to_string(F1::from({1e-5, 1.0, 123456.0})),
            "tensor([1.0000e-05, 1.0000e+00, 1.2346e+05], shape=[3], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(F1::from({1e9, 1.0})), "tensor([1.0000e+09, 1.0000e+00], shape=[2], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(F1::from({100000.0, 3.0})),
            "tensor([1.0000e+05, 3.0000e+00], shape=[2], dtype=f32, device=cpu)");
}

TEST(Print, NonFiniteValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(to_string(F1::from({1.5, nan, inf, -inf})),
            "tensor([1.5000,    nan,    inf,   -inf], shape=[4], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(F1::from({0.0, nan, -inf, 2.0})),
            "tensor([0., nan, -inf, 2.], shape=[4], dtype=f32, device=cpu)");
}

TEST(Print, IntsAndBools) {
  EXPECT_EQ(to_string(Tensor<Cpu, 2, Int>::from({{1, -20, 300}, {4, 5, 6}})),
            "tensor([[  1, -20, 300],\n"
            "        [  4,   5,   6]], shape=[2, 3], dtype=i64, device=cpu)");
  EXPECT_EQ(to_string(Tensor<Cpu, 2, Bool>::from({{true, false, true}, {false, false, true}})),
            "tensor([[ true, false,  true],\n"
            "        [false, false,  true]], shape=[2, 3], dtype=bool, device=cpu)");
}

TEST(Print, OtherDtypesAndViews) {
  EXPECT_EQ(to_string(F1::from({0.1, 0.2}, {}, DType::f64)),
            "tensor([0.1000, 0.2000], shape=[2], dtype=f64, device=cpu)");
  EXPECT_EQ(to_string(F1::from({0.1, 0.2}, {}, DType::f16)),
            "tensor([0.1000, 0.2000], shape=[2], dtype=f16, device=cpu)");
  // A transposed (non-contiguous) tensor prints in its logical order.
  EXPECT_EQ(to_string(Tensor<Cpu, 2, Int>::from({{1, 2, 3}, {4, 5, 6}}).transpose()),
            "tensor([[1, 4],\n"
            "        [2, 5],\n"
            "        [3, 6]], shape=[3, 2], dtype=i64, device=cpu)");
}

TEST(Print, EmptyTensors) {
  EXPECT_EQ(to_string(F2::zeros({2, 0})), "tensor([], shape=[2, 0], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(Tensor<Cpu, 1, Int>::zeros({0})), "tensor([], shape=[0], dtype=i64, device=cpu)");
}

TEST(Print, LongRowsWrapAtEightyColumns) {
  EXPECT_EQ(to_string(F1::arange(0, 20).div(4.0)),
            "tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000, 1.2500, 1.5000, 1.7500, 2.0000,\n"
            "        2.2500, 2.5000, 2.7500, 3.0000, 3.2500, 3.5000, 3.7500, 4.0000, 4.2500,\n"
            "        4.5000, 4.7500], shape=[20], dtype=f32, device=cpu)");
}

TEST(Print, RankThreeSeparatesBlocksWithABlankLine) {
  EXPECT_EQ(to_string(F1::arange(0, 12).reshape<3>({2, 2, 3})),
            "tensor([[[ 0.,  1.,  2.],\n"
            "         [ 3.,  4.,  5.]],\n"
            "\n"
            "        [[ 6.,  7.,  8.],\n"
            "         [ 9., 10., 11.]]], shape=[2, 2, 3], dtype=f32, device=cpu)");
}

TEST(Print, LargeTensorsAreSummarized) {
  EXPECT_EQ(to_string(Tensor<Cpu, 1, Int>::arange(0, 2000)),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=i64, device=cpu)");
  EXPECT_EQ(to_string(F1::arange(0, 2000).reshape<2>({40, 50})),
            "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
            "         4.9000e+01],\n"
            "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
            "         9.9000e+01],\n"
            "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
            "         1.4900e+02],\n"
            "        ...,\n"
            "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
            "         1.8990e+03],\n"
            "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
            "         1.9490e+03],\n"
            "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
            "         1.9990e+03]], shape=[40, 50], dtype=f32, device=cpu)");
}

TEST(Print, SummaryThresholdAppliesToEveryDim) {
  // torch.set_printoptions(threshold=20); ((arange(168) % 7) / 4).reshape(3, 7, 8)
  const auto t = F1::arange(0, 168).rem(7.0).div(4.0).reshape<3>({3, 7, 8});
  detail::PrintOptions options;
  options.threshold = 20;
  const std::string block =
      "[[0.0000, 0.2500, 0.5000,  ..., 1.2500, 1.5000, 0.0000],\n"
      "         [0.2500, 0.5000, 0.7500,  ..., 1.5000, 0.0000, 0.2500],\n"
      "         [0.5000, 0.7500, 1.0000,  ..., 0.0000, 0.2500, 0.5000],\n"
      "         ...,\n"
      "         [1.0000, 1.2500, 1.5000,  ..., 0.5000, 0.7500, 1.0000],\n"
      "         [1.2500, 1.5000, 0.0000,  ..., 0.7500, 1.0000, 1.2500],\n"
      "         [1.5000, 0.0000, 0.2500,  ..., 1.0000, 1.2500, 1.5000]]";
  EXPECT_EQ(detail::format_tensor_data(t.into_data(), "cpu", options),
            "tensor([" + block + ",\n\n        " + block + ",\n\n        " + block +
                "], shape=[3, 7, 8], dtype=f32, device=cpu)");
}
