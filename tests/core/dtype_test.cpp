// Core: DType sizes, names, kinds, the dtype <-> C++ type maps and visit_dtype.
#include <kiln/core/dtype.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

using kiln::DType;

TEST(DType, SizesMatchStorageTypes) {
  EXPECT_EQ(kiln::dtype_size(DType::f32), 4u);
  EXPECT_EQ(kiln::dtype_size(DType::f64), 8u);
  EXPECT_EQ(kiln::dtype_size(DType::f16), 2u);
  EXPECT_EQ(kiln::dtype_size(DType::bf16), 2u);
  EXPECT_EQ(kiln::dtype_size(DType::i32), 4u);
  EXPECT_EQ(kiln::dtype_size(DType::i64), 8u);
  EXPECT_EQ(kiln::dtype_size(DType::u8), 1u);
  EXPECT_EQ(kiln::dtype_size(DType::boolean), 1u);
  for (int i = 0; i < kiln::dtype_count; ++i) {
    const auto d = static_cast<DType>(i);
    kiln::visit_dtype(d, [&]<class T>() {
      EXPECT_EQ(sizeof(T), kiln::dtype_size(d)) << kiln::dtype_name(d);
      EXPECT_EQ(kiln::dtype_of<T>, d) << kiln::dtype_name(d);
    });
  }
}

TEST(DType, NamesAreShortAndUnique) {
  EXPECT_EQ(kiln::dtype_name(DType::f32), "f32");
  EXPECT_EQ(kiln::dtype_name(DType::f64), "f64");
  EXPECT_EQ(kiln::dtype_name(DType::f16), "f16");
  EXPECT_EQ(kiln::dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(kiln::dtype_name(DType::i32), "i32");
  EXPECT_EQ(kiln::dtype_name(DType::i64), "i64");
  EXPECT_EQ(kiln::dtype_name(DType::u8), "u8");
  EXPECT_EQ(kiln::dtype_name(DType::boolean), "bool");
  EXPECT_EQ(fmt::format("{}", DType::bf16), "bf16");
  std::set<std::string_view> names;
  for (int i = 0; i < kiln::dtype_count; ++i) names.insert(kiln::dtype_name(static_cast<DType>(i)));
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kiln::dtype_count));
}

TEST(DType, KindsPartitionTheDtypes) {
  for (int i = 0; i < kiln::dtype_count; ++i) {
    const auto d = static_cast<DType>(i);
    EXPECT_EQ(int(kiln::is_float(d)) + int(kiln::is_int(d)) + int(kiln::is_bool(d)), 1) << kiln::dtype_name(d);
  }
  EXPECT_TRUE(kiln::is_float(DType::bf16));
  EXPECT_TRUE(kiln::is_int(DType::u8));
  EXPECT_TRUE(kiln::is_bool(DType::boolean));
}

TEST(DType, StorageTypesRoundTrip) {
  static_assert(std::is_same_v<kiln::StorageOf<DType::f32>, float>);
  static_assert(std::is_same_v<kiln::StorageOf<DType::f16>, kiln::Half>);
  static_assert(std::is_same_v<kiln::StorageOf<DType::boolean>, bool>);
  static_assert(kiln::dtype_of<const std::int64_t> == DType::i64);
  EXPECT_EQ(kiln::to_double(kiln::Half(1.5f)), 1.5);
  EXPECT_EQ(static_cast<float>(kiln::from_double<kiln::BFloat16>(2.0)), 2.0f);
  EXPECT_TRUE(kiln::from_double<bool>(0.5));
  EXPECT_FALSE(kiln::from_double<bool>(0.0));
  EXPECT_EQ(kiln::from_double<std::int32_t>(-2.9), -2);  // truncates toward zero
}
