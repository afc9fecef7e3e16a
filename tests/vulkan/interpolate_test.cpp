// The Vulkan backend's interpolate and interpolate_backward against the CPU backend: nearest,
// bilinear and bicubic, align_corners both ways, up- and down-scaling (and same size, exact
// doubling, size-1 outputs), a non-contiguous input, f64 where supported, and the CPU's error
// messages. Skipped, with the reason, when no Vulkan device is available.
#include "vulkan_test.hpp"

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanInterpolate : public VulkanOps {};

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

const char* mode_name(ops::InterpolateMode mode) {
  switch (mode) {
    case ops::InterpolateMode::nearest: return "nearest";
    case ops::InterpolateMode::bilinear: return "bilinear";
    case ops::InterpolateMode::bicubic: return "bicubic";
  }
  return "?";
}

std::vector<ops::InterpolateOptions> all_options() {
  return {{ops::InterpolateMode::nearest, false},  {ops::InterpolateMode::bilinear, false},
          {ops::InterpolateMode::bilinear, true},  {ops::InterpolateMode::bicubic, false},
          {ops::InterpolateMode::bicubic, true}};
}

// (input H, W) -> (output H, W): up, down, mixed, same, doubling, size 1 both ways.
struct Case {
  std::int64_t h, w, oh, ow;
};
const std::vector<Case> kCases{{4, 5, 8, 10}, {7, 9, 3, 4},  {5, 6, 11, 2}, {4, 4, 4, 4},
                               {3, 5, 6, 10}, {1, 1, 3, 4},  {6, 5, 1, 1}, {2, 3, 7, 13},
                               {9, 8, 5, 5},  {3, 4, 12, 3}};

void check(DType dtype, const Case& k, const ops::InterpolateOptions& o, bool transposed) {
  SCOPED_TRACE(fmt::format("{} {}x{} -> {}x{} {} align_corners {} transposed {}", dtype, k.h, k.w, k.oh, k.ow,
                           mode_name(o.mode), o.align_corners, transposed));
  // Positive samples: no NaN/inf (the CPU check would agree, but tolerances would not help).
  const TensorData data = sample(transposed ? Shape{k.w, 2, 3, k.h} : Shape{2, 3, k.h, k.w}, dtype, 5, true);
  const std::array<std::int64_t, 4> order{1, 2, 3, 0};
  const auto [c, g] = transposed ? both(data, order) : both(data);
  const std::array<std::int64_t, 2> size{k.oh, k.ow};
  EXPECT_TRUE(same(Cpu::interpolate(c, size, o), Vulkan::interpolate(g, size, o), tolerance(dtype)));
  const auto [cdy, gdy] = both(sample(Shape{2, 3, k.oh, k.ow}, dtype, 9));
  EXPECT_TRUE(same(Cpu::interpolate_backward(c, cdy, o), Vulkan::interpolate_backward(g, gdy, o), tolerance(dtype)));
}

}  // namespace

TEST_F(VulkanInterpolate, ForwardAndBackwardMatchTheCpu) {
  for (DType dtype : float_dtypes())
    for (const Case& k : kCases)
      for (const auto& o : all_options()) check(dtype, k, o, false);
}

TEST_F(VulkanInterpolate, NonContiguousInput) {
  for (const auto& o : all_options()) check(DType::f32, Case{5, 4, 9, 7}, o, true);
}

TEST_F(VulkanInterpolate, LargerPlanes) {
  for (const auto& o : all_options()) {
    check(DType::f32, Case{37, 29, 64, 50}, o, false);
    check(DType::f32, Case{64, 50, 17, 23}, o, false);
  }
}

TEST_F(VulkanInterpolate, EmptyBatch) {
  const auto g = Vulkan::full(Shape{0, 3, 4, 4}, 1.0, DType::f32, {});
  const std::array<std::int64_t, 2> size{8, 8};
  const ops::InterpolateOptions o{ops::InterpolateMode::bilinear, false};
  EXPECT_EQ(Vulkan::interpolate(g, size, o).shape, (Shape{0, 3, 8, 8}));
  const auto dy = Vulkan::full(Shape{0, 3, 8, 8}, 1.0, DType::f32, {});
  EXPECT_EQ(Vulkan::interpolate_backward(g, dy, o).shape, (Shape{0, 3, 4, 4}));
}

TEST_F(VulkanInterpolate, ErrorsMatchTheCpu) {
  const ops::InterpolateOptions o{ops::InterpolateMode::bilinear, false};
  const auto data = [](const Shape& s, DType d) { return sample(s, d, 2, true); };
  const std::array<std::int64_t, 2> good{4, 4};
  const std::array<std::int64_t, 2> zero{0, 4};
  const std::array<std::int64_t, 1> one{4};
  const std::vector<TensorData> bad_inputs{data(Shape{2, 3, 4}, DType::f32), data(Shape{1, 2, 3, 4}, DType::i32),
                                           TensorData::from(std::vector<double>{}, Shape{1, 1, 0, 3})};
  for (const TensorData& x : bad_inputs) {
    const auto [c, g] = both(x);
    expect_same_error([&] { Cpu::interpolate(c, good, o); }, [&] { Vulkan::interpolate(g, good, o); });
    expect_same_error([&] { Cpu::interpolate_backward(c, c, o); }, [&] { Vulkan::interpolate_backward(g, g, o); });
  }
  const auto [c, g] = both(data(Shape{1, 2, 3, 4}, DType::f32));
  expect_same_error([&] { Cpu::interpolate(c, zero, o); }, [&] { Vulkan::interpolate(g, zero, o); });
  expect_same_error([&] { Cpu::interpolate(c, one, o); }, [&] { Vulkan::interpolate(g, one, o); });
  // dy of the wrong shape or dtype.
  for (const TensorData& dy : {data(Shape{2, 2, 4, 4}, DType::f32), data(Shape{1, 2, 4}, DType::f32),
                               data(Shape{1, 2, 4, 4}, DType::i32)}) {
    const auto [cdy, gdy] = both(dy);
    expect_same_error([&] { Cpu::interpolate_backward(c, cdy, o); },
                      [&] { Vulkan::interpolate_backward(g, gdy, o); });
  }
}
