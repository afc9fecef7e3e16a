// The Vulkan backend's pooling against the CPU backend: max pooling (values and PyTorch-format
// indices), average pooling and adaptive average pooling, forward and backward, over option
// sets with stride, padding, dilation, ceil_mode and count_include_pad, non-contiguous inputs,
// NaN and -inf windows, and the CPU's error messages. Skipped, with the reason, when no Vulkan
// device is available.
#include "vulkan_test.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanPool : public VulkanOps {};

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

ops::Pool2dOptions options(std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                           std::array<std::int64_t, 2> padding, std::array<std::int64_t, 2> dilation, bool ceil_mode,
                           bool count_include_pad = true) {
  return {kernel, stride, padding, dilation, ceil_mode, count_include_pad};
}

std::string describe(const ops::Pool2dOptions& o) {
  return fmt::format("kernel {} stride {} padding {} dilation {} ceil {} include_pad {}", o.kernel, o.stride,
                     o.padding, o.dilation, o.ceil_mode, o.count_include_pad);
}

// Max-pooling option sets (dilation allowed).
std::vector<ops::Pool2dOptions> max_options() {
  return {
      options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false),
      options({3, 3}, {1, 1}, {1, 1}, {1, 1}, false),
      options({3, 2}, {2, 1}, {1, 0}, {1, 1}, true),
      options({3, 3}, {2, 2}, {1, 1}, {2, 2}, false),
      options({2, 3}, {3, 2}, {1, 1}, {2, 1}, true),
      options({1, 1}, {2, 3}, {0, 0}, {1, 1}, true),
      options({4, 3}, {3, 3}, {2, 1}, {1, 2}, true),
  };
}

// Average-pooling option sets (no dilation), each with and without count_include_pad.
std::vector<ops::Pool2dOptions> avg_options() {
  std::vector<ops::Pool2dOptions> out;
  for (bool include : {true, false}) {
    out.push_back(options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false, include));
    out.push_back(options({3, 3}, {1, 1}, {1, 1}, {1, 1}, false, include));
    out.push_back(options({3, 2}, {2, 1}, {1, 1}, {1, 1}, true, include));
    out.push_back(options({4, 3}, {3, 2}, {2, 1}, {1, 1}, true, include));
    out.push_back(options({2, 5}, {1, 3}, {1, 2}, {1, 1}, true, include));
  }
  return out;
}

// The last is large enough for the CPU's f32 average pooling to run on oneDNN.
const std::vector<Shape> kShapes{Shape{2, 3, 7, 9}, Shape{1, 2, 8, 8}, Shape{1, 1, 5, 4}, Shape{2, 16, 32, 40}};

TEST_F(VulkanPool, MaxPoolMatchesTheCpu) {
  for (DType dtype : float_dtypes()) {
    for (const Shape& shape : kShapes) {
      const auto [cx, gx] = both(sample(shape, dtype, 10));
      for (const auto& o : max_options()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype, shape, describe(o)));
        const auto [cy, ci] = Cpu::max_pool2d(cx, o);
        const auto [gy, gi] = Vulkan::max_pool2d(gx, o);
        EXPECT_EQ(Vulkan::shape(gy), Cpu::shape(cy));
        EXPECT_EQ(Vulkan::dtype(gi), DType::i64);
        EXPECT_TRUE(same(cy, gy, 0.0));
        EXPECT_TRUE(same(ci, gi, 0.0));
        const auto [cdy, gdy] = both(sample(Cpu::shape(cy), dtype, 11, /*positive=*/true));
        EXPECT_TRUE(same(Cpu::max_pool2d_backward(cx, cdy, ci, o), Vulkan::max_pool2d_backward(gx, gdy, gi, o),
                         tolerance(dtype)));
      }
    }
  }
}

TEST_F(VulkanPool, MaxPoolTiesNansAndNegativeInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Ties (first wins), a NaN window (NaN wins; a later NaN takes the index), an all -inf window.
  const std::vector<double> v{1, 1, 2, 2,  //
                              1, 1, 2, 2,  //
                              nan, 0, -inf, -inf,  //
                              5, nan, -inf, -inf};
  const auto [cx, gx] = both(TensorData::from(v, Shape{1, 1, 4, 4}).convert(DType::f32));
  for (const auto& o : {options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false), options({3, 3}, {1, 1}, {1, 1}, {1, 1}, false),
                        options({2, 2}, {1, 1}, {1, 1}, {2, 2}, true)}) {
    SCOPED_TRACE(describe(o));
    const auto [cy, ci] = Cpu::max_pool2d(cx, o);
    const auto [gy, gi] = Vulkan::max_pool2d(gx, o);
    EXPECT_TRUE(same(cy, gy, 0.0));
    EXPECT_TRUE(same(ci, gi, 0.0));
    const auto [cdy, gdy] = both(sample(Cpu::shape(cy), DType::f32, 3, true));
    EXPECT_TRUE(same(Cpu::max_pool2d_backward(cx, cdy, ci, o), Vulkan::max_pool2d_backward(gx, gdy, gi, o), 1e-6));
  }
  // A dilated window whose taps all fall in the padding: -inf and the CPU's fallback index.
  const auto [cs, gs] = both(sample(Shape{1, 1, 3, 3}, DType::f32, 4));
  const auto o = options({2, 2}, {1, 1}, {1, 1}, {4, 4}, false);
  const auto [cy, ci] = Cpu::max_pool2d(cs, o);
  const auto [gy, gi] = Vulkan::max_pool2d(gs, o);
  EXPECT_TRUE(same(cy, gy, 0.0));
  EXPECT_TRUE(same(ci, gi, 0.0));
  const auto [cdy, gdy] = both(sample(Cpu::shape(cy), DType::f32, 5, true));
  EXPECT_TRUE(same(Cpu::max_pool2d_backward(cs, cdy, ci, o), Vulkan::max_pool2d_backward(gs, gdy, gi, o), 1e-6));
}

TEST_F(VulkanPool, AvgPoolMatchesTheCpu) {
  for (DType dtype : float_dtypes()) {
    for (const Shape& shape : kShapes) {
      const auto [cx, gx] = both(sample(shape, dtype, 20, /*positive=*/true));
      for (const auto& o : avg_options()) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype, shape, describe(o)));
        const auto cy = Cpu::avg_pool2d(cx, o);
        const auto gy = Vulkan::avg_pool2d(gx, o);
        EXPECT_EQ(Vulkan::shape(gy), Cpu::shape(cy));
        EXPECT_TRUE(same(cy, gy, tolerance(dtype)));
        const auto [cdy, gdy] = both(sample(Cpu::shape(cy), dtype, 21));
        EXPECT_TRUE(same(Cpu::avg_pool2d_backward(cx, cdy, o), Vulkan::avg_pool2d_backward(gx, gdy, o),
                         tolerance(dtype)));
      }
    }
  }
}

TEST_F(VulkanPool, AdaptiveAvgPoolMatchesTheCpu) {
  const std::vector<std::pair<Shape, std::array<std::int64_t, 2>>> cases{
      {Shape{2, 3, 7, 9}, {3, 4}}, {Shape{1, 2, 8, 8}, {8, 8}}, {Shape{1, 2, 5, 7}, {1, 1}},
      {Shape{1, 1, 3, 4}, {5, 7}},  // more outputs than inputs: windows overlap
      {Shape{2, 1, 10, 6}, {4, 5}}};
  for (DType dtype : float_dtypes()) {
    for (const auto& [shape, size] : cases) {
      SCOPED_TRACE(fmt::format("{} {} -> {}", dtype, shape, size));
      const auto [cx, gx] = both(sample(shape, dtype, 30, true));
      const auto cy = Cpu::adaptive_avg_pool2d(cx, size);
      const auto gy = Vulkan::adaptive_avg_pool2d(gx, size);
      EXPECT_TRUE(same(cy, gy, tolerance(dtype)));
      const auto [cdy, gdy] = both(sample(Cpu::shape(cy), dtype, 31));
      EXPECT_TRUE(same(Cpu::adaptive_avg_pool2d_backward(cx, cdy), Vulkan::adaptive_avg_pool2d_backward(gx, gdy),
                       tolerance(dtype)));
    }
  }
}

TEST_F(VulkanPool, NonContiguousInputsAndEmptyBatches) {
  // A transposed view (NCWH -> NCHW) and a sliced one (with an offset).
  const auto [cb, gb] = both(sample(Shape{2, 3, 9, 7}, DType::f32, 40));
  const std::array<std::int64_t, 4> order{0, 1, 3, 2};
  const auto cx = Cpu::permute(cb, order);
  const auto gx = Vulkan::permute(gb, order);
  const std::array<ops::SliceRange, 4> ranges{ops::SliceRange{1, 1, 1}, ops::SliceRange{0, 3, 1},
                                              ops::SliceRange{1, 8, 1}, ops::SliceRange{0, 7, 1}};
  const auto cs = Cpu::slice(cb, ranges);
  const auto gs = Vulkan::slice(gb, ranges);
  const auto o = options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false);
  for (const auto& [c, g] : {std::pair{cx, gx}, std::pair{cs, gs}}) {
    const auto [cy, ci] = Cpu::max_pool2d(c, o);
    const auto [gy, gi] = Vulkan::max_pool2d(g, o);
    EXPECT_TRUE(same(cy, gy, 0.0));
    EXPECT_TRUE(same(ci, gi, 0.0));
    EXPECT_TRUE(same(Cpu::avg_pool2d(c, o), Vulkan::avg_pool2d(g, o), 1e-5));
    const std::array<std::int64_t, 2> size{4, 3};
    EXPECT_TRUE(same(Cpu::adaptive_avg_pool2d(c, size), Vulkan::adaptive_avg_pool2d(g, size), 1e-5));
    // dy as a transposed view too.
    const Shape s = Cpu::shape(cy);
    const auto [cdt, gdt] = both(sample(Shape{s[0], s[1], s[3], s[2]}, DType::f32, 41));
    const auto cdy = Cpu::permute(cdt, order);
    const auto gdy = Vulkan::permute(gdt, order);
    EXPECT_TRUE(same(Cpu::max_pool2d_backward(c, cdy, ci, o), Vulkan::max_pool2d_backward(g, gdy, gi, o), 1e-6));
    EXPECT_TRUE(same(Cpu::avg_pool2d_backward(c, cdy, o), Vulkan::avg_pool2d_backward(g, gdy, o), 1e-5));
  }
  const auto [ce, ge] = both(sample(Shape{0, 3, 6, 6}, DType::f32, 42));
  const auto [cy, ci] = Cpu::max_pool2d(ce, o);
  const auto [gy, gi] = Vulkan::max_pool2d(ge, o);
  EXPECT_EQ(Vulkan::shape(gy), Cpu::shape(cy));
  EXPECT_EQ(Vulkan::shape(Vulkan::avg_pool2d(ge, o)), Cpu::shape(Cpu::avg_pool2d(ce, o)));
}

TEST_F(VulkanPool, BadInputsAreTheCpusErrors) {
  const auto [cx, gx] = both(sample(Shape{1, 2, 5, 5}, DType::f32, 50));
  const auto [c3, g3] = both(sample(Shape{2, 5, 5}, DType::f32, 51));
  const auto [ci, gi] = both(sample(Shape{1, 2, 5, 5}, DType::i32, 52));
  const auto ok = options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  const std::vector<ops::Pool2dOptions> bad{
      options({0, 2}, {1, 1}, {0, 0}, {1, 1}, false), options({2, 2}, {0, 1}, {0, 0}, {1, 1}, false),
      options({2, 2}, {1, 1}, {2, 0}, {1, 1}, false), options({7, 2}, {1, 1}, {0, 0}, {1, 1}, false),
      options({2, 2}, {1, 1}, {0, 0}, {0, 1}, false)};
  for (const auto& o : bad) {
    SCOPED_TRACE(describe(o));
    expect_same_error([&] { (void)Cpu::max_pool2d(cx, o); }, [&] { (void)Vulkan::max_pool2d(gx, o); });
    expect_same_error([&] { (void)Cpu::avg_pool2d(cx, o); }, [&] { (void)Vulkan::avg_pool2d(gx, o); });
  }
  expect_same_error([&] { (void)Cpu::max_pool2d(c3, ok); }, [&] { (void)Vulkan::max_pool2d(g3, ok); });
  expect_same_error([&] { (void)Cpu::max_pool2d(ci, ok); }, [&] { (void)Vulkan::max_pool2d(gi, ok); });
  expect_same_error([&] { (void)Cpu::avg_pool2d(ci, ok); }, [&] { (void)Vulkan::avg_pool2d(gi, ok); });
  const auto dilated = options({2, 2}, {1, 1}, {0, 0}, {2, 1}, false);
  expect_same_error([&] { (void)Cpu::avg_pool2d(cx, dilated); }, [&] { (void)Vulkan::avg_pool2d(gx, dilated); });

  // Backward: dy of the wrong shape or dtype, indices of the wrong dtype or out of the plane.
  const auto [cy, cidx] = Cpu::max_pool2d(cx, ok);
  const auto [gy, gidx] = Vulkan::max_pool2d(gx, ok);
  const auto [cbad, gbad] = both(sample(Shape{1, 2, 3, 3}, DType::f32, 53));
  expect_same_error([&] { (void)Cpu::max_pool2d_backward(cx, cbad, cidx, ok); },
                    [&] { (void)Vulkan::max_pool2d_backward(gx, gbad, gidx, ok); });
  expect_same_error([&] { (void)Cpu::avg_pool2d_backward(cx, cbad, ok); },
                    [&] { (void)Vulkan::avg_pool2d_backward(gx, gbad, ok); });
  const auto [cdy, gdy] = both(sample(Shape{1, 2, 2, 2}, DType::f32, 54));
  const auto [cwrong, gwrong] = both(sample(Shape{1, 2, 2, 2}, DType::i32, 55));
  expect_same_error([&] { (void)Cpu::max_pool2d_backward(cx, cwrong, cidx, ok); },
                    [&] { (void)Vulkan::max_pool2d_backward(gx, gwrong, gidx, ok); });
  expect_same_error([&] { (void)Cpu::max_pool2d_backward(cx, cdy, cwrong, ok); },
                    [&] { (void)Vulkan::max_pool2d_backward(gx, gdy, gwrong, ok); });
  for (std::int64_t bad_index : {-1, 25, 100}) {
    SCOPED_TRACE(fmt::format("index {}", bad_index));
    const auto [cb, gb] =
        both(TensorData::from(std::vector<std::int64_t>{0, 1, bad_index, 3, 4, 5, 6, 7}, Shape{1, 2, 2, 2}));
    expect_same_error([&] { (void)Cpu::max_pool2d_backward(cx, cdy, cb, ok); },
                      [&] { (void)Vulkan::max_pool2d_backward(gx, gdy, gb, ok); });
  }

  // Adaptive pooling.
  const std::array<std::int64_t, 2> zero{0, 3}, fine{2, 3};
  const std::array<std::int64_t, 3> three{2, 3, 4};
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d(cx, zero); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d(gx, zero); });
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d(cx, three); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d(gx, three); });
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d(c3, fine); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d(g3, fine); });
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d(ci, fine); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d(gi, fine); });
  const auto [ce, ge] = both(sample(Shape{1, 2, 0, 5}, DType::f32, 56));
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d(ce, fine); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d(ge, fine); });
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d_backward(cx, c3); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d_backward(gx, g3); });
  const auto [cdy64, gdy64] = both(sample(Shape{1, 2, 2, 3}, DType::i32, 57));
  expect_same_error([&] { (void)Cpu::adaptive_avg_pool2d_backward(cx, cdy64); },
                    [&] { (void)Vulkan::adaptive_avg_pool2d_backward(gx, gdy64); });
}

}  // namespace
