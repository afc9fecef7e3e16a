// Core: TensorData, the host-side tensor: construction from values, typed access,
// conversion between dtypes, reshaping, and the byte-size and dtype errors.
#include "golden.hpp"

#include <kiln/core/tensor_data.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using kiln::DType;
using kiln::Shape;
using kiln::TensorData;

TEST(TensorData, FromValuesKeepsShapeDtypeAndBytes) {
  const std::vector<float> values{1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  const auto data = TensorData::from(values, Shape{2, 3});
  EXPECT_EQ(data.shape(), (Shape{2, 3}));
  EXPECT_EQ(data.dtype(), DType::f32);
  EXPECT_EQ(data.numel(), 6);
  ASSERT_EQ(data.bytes().size(), 24u);
  EXPECT_EQ(std::memcmp(data.bytes().data(), values.data(), 24), 0);
  const auto as = data.as<float>();
  EXPECT_EQ(std::vector<float>(as.begin(), as.end()), values);
}

TEST(TensorData, FromInfersDtypeFromTheElementType) {
  EXPECT_EQ(TensorData::from(std::vector<double>{1, 2}, Shape{2}).dtype(), DType::f64);
  EXPECT_EQ(TensorData::from(std::vector<std::int32_t>{1, 2}, Shape{2}).dtype(), DType::i32);
  EXPECT_EQ(TensorData::from(std::vector<std::int64_t>{1, 2}, Shape{2}).dtype(), DType::i64);
  EXPECT_EQ(TensorData::from(std::vector<std::uint8_t>{1, 2}, Shape{2}).dtype(), DType::u8);
  EXPECT_EQ(TensorData::from(std::vector<kiln::Half>{kiln::Half(1.f)}, Shape{1}).dtype(), DType::f16);
  // std::vector<bool> is packed; TensorData stores one byte per bool.
  const auto flags = TensorData::from(std::vector<bool>{true, false, true}, Shape{3});
  EXPECT_EQ(flags.dtype(), DType::boolean);
  EXPECT_EQ(flags.bytes().size(), 3u);
  EXPECT_EQ(flags.to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 1}));
}

TEST(TensorData, EmptyAndRankZeroShapes) {
  const auto empty = TensorData::from(std::vector<float>{}, Shape{2, 0});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.bytes().empty());
  EXPECT_TRUE(empty.to_vec<double>().empty());
  const auto scalar = TensorData::from(std::vector<std::int64_t>{42}, Shape{});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.to_vec<double>(), std::vector<double>{42.0});
}

TEST(TensorData, ToVecConvertsEveryDtype) {
  const auto data = TensorData::from(std::vector<float>{-1.5f, 0.f, 2.75f}, Shape{3});
  EXPECT_EQ(data.to_vec<double>(), (std::vector<double>{-1.5, 0.0, 2.75}));
  EXPECT_EQ(data.to_vec<std::int32_t>(), (std::vector<std::int32_t>{-1, 0, 2}));  // toward zero
  EXPECT_EQ(data.to_vec<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(TensorData, ConvertBetweenDtypes) {
  const auto data = TensorData::from(std::vector<double>{-1.7, 0.5, 3.0, 65520.0}, Shape{2, 2});
  const auto i32 = data.convert(DType::i32);
  EXPECT_EQ(i32.dtype(), DType::i32);
  EXPECT_EQ(i32.shape(), (Shape{2, 2}));
  const auto ints = i32.as<std::int32_t>();
  EXPECT_EQ(std::vector<std::int32_t>(ints.begin(), ints.end()), (std::vector<std::int32_t>{-1, 0, 3, 65520}));
  const auto f16 = data.convert(DType::f16);
  EXPECT_EQ(f16.bytes().size(), 8u);
  const auto halves = f16.to_vec<float>();
  EXPECT_FLOAT_EQ(halves[0], -1.7001953125f);  // nearest half to -1.7
  EXPECT_EQ(halves[1], 0.5f);
  EXPECT_TRUE(std::isinf(halves[3]));  // beyond the f16 range
  const auto flags = data.convert(DType::boolean).to_vec<std::int32_t>();
  EXPECT_EQ(flags, (std::vector<std::int32_t>{1, 1, 1, 1}));
  // Converting to the same dtype is a plain copy.
  EXPECT_EQ(data.convert(DType::f64).to_vec<double>(), data.to_vec<double>());
}

// NaN and values beyond an integer type's range (undefined for a plain cast) become 0 and
// saturate at the type's limits.
TEST(TensorData, ConvertToIntegersSaturatesAndSendsNanToZero) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto data = TensorData::from(std::vector<double>{std::nan(""), inf, -inf, 3e9, -3e9, 1e19, 300.0, -1.0},
                                     Shape{8});
  EXPECT_EQ(data.to_vec<std::int32_t>(), (std::vector<std::int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN,
                                                                    INT32_MAX, 300, -1}));
  EXPECT_EQ(data.convert(DType::i64).to_vec<std::int64_t>(),
            (std::vector<std::int64_t>{0, INT64_MAX, INT64_MIN, 3000000000, -3000000000, INT64_MAX, 300, -1}));
  EXPECT_EQ(data.convert(DType::u8).to_vec<std::int32_t>(), (std::vector<std::int32_t>{0, 255, 0, 255, 0, 255, 255, 0}));
}

TEST(TensorData, NanSurvivesFloatConversions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto data = TensorData::from(std::vector<float>{nan, -INFINITY}, Shape{2});
  for (DType d : {DType::f64, DType::f16, DType::bf16}) {
    const auto back = data.convert(d).to_vec<float>();
    EXPECT_TRUE(std::isnan(back[0])) << kiln::dtype_name(d);
    EXPECT_EQ(back[1], -INFINITY) << kiln::dtype_name(d);
  }
}

TEST(TensorData, ReshapedKeepsBytes) {
  const auto data = TensorData::from(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, Shape{6});
  const auto r = data.reshaped(Shape{3, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vec<std::int64_t>(), data.to_vec<std::int64_t>());
  EXPECT_KILN_ERROR(data.reshaped(Shape{4, 2}), "TensorData::reshaped: cannot view 6 elements as [4, 2]");
}

TEST(TensorData, AsMutWritesThrough) {
  auto data = TensorData::from(std::vector<std::int32_t>{1, 2, 3}, Shape{3});
  data.as_mut<std::int32_t>()[1] = 20;
  EXPECT_EQ(data.to_vec<std::int32_t>(), (std::vector<std::int32_t>{1, 20, 3}));
}

TEST(TensorData, RejectsWrongByteCounts) {
  EXPECT_KILN_ERROR(TensorData(std::vector<std::byte>(5), Shape{2}, DType::f32),
                    "TensorData: 5 bytes do not hold a f32 tensor of shape [2] (8 bytes expected)");
  EXPECT_KILN_ERROR(TensorData(std::vector<std::byte>(8), Shape{2, 3}, DType::f16),
                    "TensorData: 8 bytes do not hold a f16 tensor of shape [2, 3] (12 bytes expected)");
  EXPECT_KILN_ERROR(TensorData::from(std::vector<float>{1, 2, 3, 4, 5}, Shape{2, 3}),
                    "TensorData::from: 5 values do not fill shape [2, 3] (6 elements)");
}

TEST(TensorData, TypedAccessChecksTheDtype) {
  auto data = TensorData::from(std::vector<float>{1, 2}, Shape{2});
  EXPECT_KILN_ERROR(data.as<double>(), "TensorData::as: data is f32, not f64");
  EXPECT_KILN_ERROR(data.as_mut<std::int32_t>(), "TensorData::as_mut: data is f32, not i32");
}
