// The Vulkan backend's indexing ops against the CPU backend: gather, scatter (assign and
// add), index_select and index_add along every dim, for every dtype the device holds, i64
// and i32 indices with negative entries and duplicates, index tensors smaller than src,
// strided inputs, and the CPU's errors for bad indices.
#include "vulkan_test.hpp"

#include <array>
#include <utility>

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanIndexing : public VulkanOps {};

// Indices in [-size, size) (negative ones count from the end): duplicates are likely.
TensorData indices(const Shape& shape, std::int64_t size, DType dtype, std::uint64_t seed) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = Distribution::uniform(0.0, 1.0).sample(seed, i);
    v[i] = std::min<std::int64_t>(2 * size - 1, static_cast<std::int64_t>(u * 2.0 * static_cast<double>(size))) - size;
  }
  return TensorData::from(v, shape).convert(dtype);
}

// Both backends' copies of `data`, optionally seen through a transposed view of dims 0 and 2
// (the data then holds the transposed shape).
std::pair<Cpu::Primitive, Vulkan::Primitive> both(const TensorData& data, bool transposed) {
  const std::array<std::int64_t, 3> order{2, 1, 0};
  return transposed ? kiln::test::both(data, order) : kiln::test::both(data);
}

Shape swapped(const Shape& s) { return Shape{s[2], s[1], s[0]}; }

const Shape kShape{3, 4, 5};

// For each dim of kShape, with x contiguous and transposed: check(dim, index_dtype, cx, gx)
// with x of `dtype` sampled with the next seed, and i64 or i32 indices by the seed's parity
// before that.
template <class F> void for_each_case(DType dtype, std::uint64_t& seed, F&& check) {
  for (std::int64_t dim = 0; dim < 3; ++dim) {
    for (bool transposed : {false, true}) {
      const DType index_dtype = (seed % 2 == 0) ? DType::i64 : DType::i32;
      SCOPED_TRACE(fmt::format("{} dim {} {} index {}", dtype_name(dtype), dim, transposed ? "transposed" : "",
                               dtype_name(index_dtype)));
      const auto [cx, gx] = both(sample(transposed ? swapped(kShape) : kShape, dtype, ++seed), transposed);
      check(dim, index_dtype, cx, gx);
    }
  }
}

}  // namespace

TEST_F(VulkanIndexing, GatherMatchesTheCpu) {
  std::uint64_t seed = 100;
  for (DType dtype : device_dtypes()) {
    for_each_case(dtype, seed, [&](std::int64_t dim, DType index_dtype, const auto& cx, const auto& gx) {
      // The index is smaller than x outside dim and longer along it.
      std::vector<std::int64_t> idims{2, 3, 4};
      idims[static_cast<std::size_t>(dim)] = 7;
      const auto [ci, gi] = both(indices(Shape(idims), kShape[static_cast<std::size_t>(dim)], index_dtype, ++seed));
      EXPECT_TRUE(same(Cpu::gather(cx, dim, ci), Vulkan::gather(gx, dim, gi), 0.0));
    });
  }
}

TEST_F(VulkanIndexing, ScatterMatchesTheCpu) {
  std::uint64_t seed = 200;
  for (DType dtype : device_dtypes()) {
    for (ops::ScatterMode mode : {ops::ScatterMode::assign, ops::ScatterMode::add}) {
      SCOPED_TRACE(mode == ops::ScatterMode::add ? "add" : "assign");
      for_each_case(dtype, seed, [&](std::int64_t dim, DType index_dtype, const auto& cx, const auto& gx) {
        // src larger than the index in every dim; the index may be longer than x along dim
        // (duplicates, which add up, and for assign the last one wins).
        std::vector<std::int64_t> sdims{3, 4, 6}, idims{2, 3, 4};
        sdims[static_cast<std::size_t>(dim)] = 9;
        idims[static_cast<std::size_t>(dim)] = 8;
        const auto [cs, gs] = both(sample(Shape(sdims), dtype, ++seed));
        const auto [ci, gi] = both(indices(Shape(idims), kShape[static_cast<std::size_t>(dim)], index_dtype, ++seed));
        EXPECT_TRUE(same(Cpu::scatter(cx, dim, ci, cs, mode), Vulkan::scatter(gx, dim, gi, gs, mode), 0.0));
      });
    }
  }
}

TEST_F(VulkanIndexing, ScatterAddOfManyDuplicatesIsExact) {
  // Every one of 300 f32 entries lands on one of two elements: the sum is in index order,
  // the same bits as the CPU.
  const auto [cx, gx] = both(sample(Shape{2, 3}, DType::f32, 300, true));
  const auto [cs, gs] = both(sample(Shape{300, 3}, DType::f32, 301, true));
  const auto [ci, gi] = both(indices(Shape{300, 3}, 2, DType::i64, 302));
  EXPECT_TRUE(same(Cpu::scatter(cx, 0, ci, cs, ops::ScatterMode::add),
                   Vulkan::scatter(gx, 0, gi, gs, ops::ScatterMode::add), 0.0));
  const auto [cv, gv] = both(sample(Shape{300, 3}, DType::f32, 303, true));
  const auto [cj, gj] = both(indices(Shape{300}, 2, DType::i32, 304));
  EXPECT_TRUE(same(Cpu::index_add(cx, 0, cj, cv), Vulkan::index_add(gx, 0, gj, gv), 0.0));
}

TEST_F(VulkanIndexing, IndexSelectMatchesTheCpu) {
  std::uint64_t seed = 400;
  for (DType dtype : device_dtypes()) {
    for_each_case(dtype, seed, [&](std::int64_t dim, DType index_dtype, const auto& cx, const auto& gx) {
      const auto [ci, gi] = both(indices(Shape{7}, kShape[static_cast<std::size_t>(dim)], index_dtype, ++seed));
      EXPECT_TRUE(same(Cpu::index_select(cx, dim, ci), Vulkan::index_select(gx, dim, gi), 0.0));
    });
  }
  // A 0-d index selects one slice; an empty one none.
  const auto [cx, gx] = both(sample(kShape, DType::f32, 450));
  const auto [c0, g0] = both(TensorData::from(std::vector<std::int64_t>{-2}, Shape{}));
  EXPECT_TRUE(same(Cpu::index_select(cx, 1, c0), Vulkan::index_select(gx, 1, g0), 0.0));
  const auto [ce, ge] = both(TensorData::from(std::vector<std::int64_t>{}, Shape{0}));
  const auto empty = Vulkan::index_select(gx, 1, ge);
  EXPECT_EQ(Vulkan::shape(empty), Cpu::shape(Cpu::index_select(cx, 1, ce)));
}

TEST_F(VulkanIndexing, IndexAddMatchesTheCpu) {
  std::uint64_t seed = 500;
  for (DType dtype : device_dtypes()) {
    for_each_case(dtype, seed, [&](std::int64_t dim, DType index_dtype, const auto& cx, const auto& gx) {
      std::vector<std::int64_t> vdims = kShape.to_vector();
      vdims[static_cast<std::size_t>(dim)] = 9;  // more entries than slices: duplicates
      const auto [cv, gv] = both(sample(Shape(vdims), dtype, ++seed));
      const auto [ci, gi] = both(indices(Shape{9}, kShape[static_cast<std::size_t>(dim)], index_dtype, ++seed));
      EXPECT_TRUE(same(Cpu::index_add(cx, dim, ci, cv), Vulkan::index_add(gx, dim, gi, gv), 0.0));
    });
  }
}

TEST_F(VulkanIndexing, EmptyIndicesCopyTheInput) {
  const auto [cx, gx] = both(sample(kShape, DType::f32, 600));
  const auto [cs, gs] = both(sample(kShape, DType::f32, 601));
  const auto [ci, gi] = both(TensorData::from(std::vector<std::int64_t>{}, Shape{0, 4, 5}));
  EXPECT_TRUE(same(Cpu::scatter(cx, 1, ci, cs, ops::ScatterMode::add),
                   Vulkan::scatter(gx, 1, gi, gs, ops::ScatterMode::add), 0.0));
  EXPECT_EQ(Vulkan::shape(Vulkan::gather(gx, 1, gi)), Shape({0, 4, 5}));
  const auto [cj, gj] = both(TensorData::from(std::vector<std::int64_t>{}, Shape{0}));
  const auto [cv, gv] = both(sample(Shape{3, 0, 5}, DType::f32, 602));
  EXPECT_TRUE(same(Cpu::index_add(cx, 1, cj, cv), Vulkan::index_add(gx, 1, gj, gv), 0.0));
}

TEST_F(VulkanIndexing, BadIndicesAreTheCpusErrors) {
  const auto [cx, gx] = both(sample(kShape, DType::f32, 700));
  const auto [cs, gs] = both(sample(kShape, DType::f32, 701));
  for (std::int64_t bad : {4, -5, 100}) {
    for (DType index_dtype : {DType::i64, DType::i32}) {
      SCOPED_TRACE(fmt::format("index {} {}", bad, dtype_name(index_dtype)));
      // A 3x2x2 index along dim 1 (size 4) with one bad entry in the middle.
      std::vector<std::int64_t> v{0, 1, -1, 2, 3, -4, bad, 1, 0, 0, 2, 3};
      const auto [ci, gi] = both(TensorData::from(v, Shape{3, 2, 2}).convert(index_dtype));
      expect_same_error([&] { (void)Cpu::gather(cx, 1, ci); }, [&] { (void)Vulkan::gather(gx, 1, gi); });
      for (ops::ScatterMode mode : {ops::ScatterMode::assign, ops::ScatterMode::add})
        expect_same_error([&] { (void)Cpu::scatter(cx, 1, ci, cs, mode); },
                          [&] { (void)Vulkan::scatter(gx, 1, gi, gs, mode); });
      const auto [cf, gf] = both(TensorData::from(v, Shape{12}).convert(index_dtype));
      expect_same_error([&] { (void)Cpu::index_select(cx, 1, cf); }, [&] { (void)Vulkan::index_select(gx, 1, gf); });
      const auto [cv, gv] = both(sample(Shape{3, 12, 5}, DType::f32, 702));
      expect_same_error([&] { (void)Cpu::index_add(cx, 1, cf, cv); }, [&] { (void)Vulkan::index_add(gx, 1, gf, gv); });
    }
  }
  EXPECT_KILN_ERROR(Vulkan::index_select(gx, 1, Vulkan::from_data(TensorData::from(std::vector<std::int64_t>{4}, Shape{1}), {})),
                    "index_select: index 4 is out of range for a dim of size 4");
}

TEST_F(VulkanIndexing, BadArgumentsAreTheCpusErrors) {
  const auto [cx, gx] = both(sample(kShape, DType::f32, 800));
  const auto [cs, gs] = both(sample(kShape, DType::f32, 801));
  const auto [cf, gf] = both(TensorData::from(std::vector<float>{0.0f, 1.0f}, Shape{1, 1, 2}));  // float indices
  const auto [cb, gb] = both(TensorData::from(std::vector<std::int64_t>(4 * 4 * 5, 0), Shape{4, 4, 5}));  // too big
  const auto [c2, g2] = both(TensorData::from(std::vector<std::int64_t>{0, 1}, Shape{1, 2}));  // 2-d
  const auto [ci, gi] = both(sample(kShape, DType::i32, 802));
  expect_same_error([&] { (void)Cpu::gather(cx, 3, cb); }, [&] { (void)Vulkan::gather(gx, 3, gb); });
  expect_same_error([&] { (void)Cpu::gather(cx, 1, cf); }, [&] { (void)Vulkan::gather(gx, 1, gf); });
  expect_same_error([&] { (void)Cpu::gather(cx, 1, cb); }, [&] { (void)Vulkan::gather(gx, 1, gb); });
  expect_same_error([&] { (void)Cpu::scatter(cx, 1, cb, cs, ops::ScatterMode::assign); },
                    [&] { (void)Vulkan::scatter(gx, 1, gb, gs, ops::ScatterMode::assign); });
  expect_same_error([&] { (void)Cpu::scatter(cx, 1, cf, cs, ops::ScatterMode::add); },
                    [&] { (void)Vulkan::scatter(gx, 1, gf, gs, ops::ScatterMode::add); });
  expect_same_error([&] { (void)Cpu::scatter(cx, 1, cb, ci, ops::ScatterMode::add); },
                    [&] { (void)Vulkan::scatter(gx, 1, gb, gi, ops::ScatterMode::add); });
  expect_same_error([&] { (void)Cpu::index_select(cx, 1, c2); }, [&] { (void)Vulkan::index_select(gx, 1, g2); });
  const auto [cj, gj] = both(TensorData::from(std::vector<std::int64_t>{0, 1}, Shape{2}));
  expect_same_error([&] { (void)Cpu::index_add(cx, 1, cj, cs); }, [&] { (void)Vulkan::index_add(gx, 1, gj, gs); });
  expect_same_error([&] { (void)Cpu::index_add(cx, 1, cj, ci); }, [&] { (void)Vulkan::index_add(gx, 1, gj, gi); });
}
