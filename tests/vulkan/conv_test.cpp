// The Vulkan backend's 2-d convolution against the CPU backend: forward (with and without
// bias), input gradient and weight gradient for plain, strided + padded + dilated + grouped,
// depthwise, 1x1 and "last row never read" geometries, f32 and f64, batches split into chunks
// of samples, non-contiguous operands, and the CPU's errors.
#include "vulkan_test.hpp"

#include <cstdlib>
#include <optional>
#include <tuple>

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanConv : public VulkanOps {};

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-4 : 1e-10; }

struct Case {
  std::string name;
  Shape x, w;
  ops::Conv2dOptions options;
  bool bias = true;
};

std::vector<Case> cases() {
  return {
      {"basic", Shape{2, 3, 7, 6}, Shape{4, 3, 3, 3}, {}, true},
      {"no bias 1x1", Shape{2, 5, 4, 4}, Shape{3, 5, 1, 1}, {}, false},
      {"stride padding dilation groups", Shape{2, 6, 9, 8}, Shape{4, 3, 3, 2}, {{2, 1}, {1, 2}, {2, 1}, 2}, true},
      {"depthwise", Shape{1, 4, 6, 7}, Shape{8, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}, true},
      // 8 rows, 3x3 kernel, stride 2, no padding: outputs read rows 0..6, row 7 never.
      {"even extent stride 2", Shape{2, 2, 8, 8}, Shape{3, 2, 3, 3}, {{2, 2}, {0, 0}, {1, 1}, 1}, true},
      {"large stride and padding", Shape{1, 2, 5, 5}, Shape{2, 2, 2, 2}, {{3, 3}, {2, 1}, {2, 3}, 1}, false},
      {"1x1 strided grouped", Shape{2, 4, 5, 5}, Shape{6, 2, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 2}, true},
      {"dilation with padding", Shape{2, 3, 7, 7}, Shape{2, 3, 3, 3}, {{1, 1}, {2, 2}, {2, 2}, 1}, true},
  };
}

void check(const Case& c, DType dtype, std::uint64_t seed) {
  SCOPED_TRACE(fmt::format("{}: x {} w {} {}", c.name, c.x, c.w, dtype_name(dtype)));
  const Shape y_shape = ops::conv_output_shape("test", c.x, c.w, c.options.stride, c.options.padding,
                                               c.options.dilation, c.options.groups);
  const TensorData x = dense(c.x, dtype, seed), w = dense(c.w, dtype, seed + 1), b = dense(Shape{c.w[0]}, dtype, seed + 2);
  const TensorData dy = dense(y_shape, dtype, seed + 3);
  const auto [cx, gx] = both(x);
  const auto [cw, gw] = both(w);
  const auto [cdy, gdy] = both(dy);
  std::optional<Cpu::Primitive> cb;
  std::optional<Vulkan::Primitive> gb;
  if (c.bias) std::tie(cb, gb) = both(b);
  const double tol = tolerance(dtype);

  const auto y = Vulkan::conv2d(gx, gw, gb, c.options);
  EXPECT_EQ(Vulkan::shape(y), y_shape);
  EXPECT_EQ(Vulkan::dtype(y), dtype);
  EXPECT_TRUE(same(Cpu::conv2d(cx, cw, cb, c.options), y, tol));

  const auto dx = Vulkan::conv2d_backward_input(gdy, gw, c.x, c.options);
  EXPECT_EQ(Vulkan::shape(dx), c.x);
  EXPECT_TRUE(same(Cpu::conv2d_backward_input(cdy, cw, c.x, c.options), dx, tol));

  const auto dw = Vulkan::conv2d_backward_weight(gx, gdy, c.w, c.options);
  EXPECT_EQ(Vulkan::shape(dw), c.w);
  EXPECT_TRUE(same(Cpu::conv2d_backward_weight(cx, cdy, c.w, c.options), dw, tol));
}

}  // namespace

TEST_F(VulkanConv, MatchesCpu) {
  std::uint64_t seed = 100;
  for (const DType dtype : float_dtypes())
    for (const Case& c : cases()) check(c, dtype, seed += 10);
}

// Batches whose column matrix would pass KILN_VULKAN_CONV_COLUMN_BYTES run in chunks of
// samples: one byte gives one sample per chunk; 7200 bytes, two of the three samples of
// x [3, 4, 5, 5] with a 3x3 kernel and padding 1 (4 * 9 * 25 f32 columns per sample).
TEST_F(VulkanConv, ChunkedBatchesMatchCpu) {
  struct Limit {
    explicit Limit(const char* bytes) { setenv("KILN_VULKAN_CONV_COLUMN_BYTES", bytes, 1); }
    ~Limit() { unsetenv("KILN_VULKAN_CONV_COLUMN_BYTES"); }
  };
  std::uint64_t seed = 500;
  {
    const Limit limit("1");
    for (const DType dtype : float_dtypes())
      for (const Case& c : cases()) check(c, dtype, seed += 10);
  }
  const Limit limit("7200");
  check({"three samples in chunks of two", Shape{3, 4, 5, 5}, Shape{6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, true},
        DType::f32, seed);
}

TEST_F(VulkanConv, LastRowNeverReadHasZeroGradient) {
  const ops::Conv2dOptions options{{2, 2}, {0, 0}, {1, 1}, 1};
  const Shape x_shape{1, 1, 4, 4}, w_shape{1, 1, 3, 3};
  const auto dy = Vulkan::full(Shape{1, 1, 1, 1}, 1.0, DType::f32, {});
  const auto w = Vulkan::full(w_shape, 1.0, DType::f32, {});
  const TensorData dx = Vulkan::into_data(Vulkan::conv2d_backward_input(dy, w, x_shape, options));
  const auto v = dx.to_vec<float>();
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(v[static_cast<std::size_t>(i * 4 + j)], (i < 3 && j < 3) ? 1.0f : 0.0f) << i << ", " << j;
}

TEST_F(VulkanConv, NonContiguousOperands) {
  // x and weight as permuted views (stored with H and W swapped), dy as a slice with an offset.
  const ops::Conv2dOptions options{{1, 2}, {1, 0}, {1, 1}, 1};
  const Shape x_stored{2, 3, 6, 5}, w_stored{4, 3, 2, 3};
  const std::vector<std::int64_t> swap{0, 1, 3, 2};
  const TensorData x = dense(x_stored, DType::f32, 1), w = dense(w_stored, DType::f32, 2);
  const auto [cx, gx] = both(x, swap);
  const auto [cw, gw] = both(w, swap);
  const Shape x_shape = Cpu::shape(cx), w_shape = Cpu::shape(cw);
  const Shape y_shape = ops::conv_output_shape("test", x_shape, w_shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  // dy: the second half of a [2 * N, ...] tensor.
  const Shape big{2 * y_shape[0], y_shape[1], y_shape[2], y_shape[3]};
  const TensorData d = dense(big, DType::f32, 3);
  const std::vector<ops::SliceRange> ranges{
      {y_shape[0], y_shape[0], 1}, {0, y_shape[1], 1}, {0, y_shape[2], 1}, {0, y_shape[3], 1}};
  const auto [cd, gd] = both(d);
  const auto cdy = Cpu::slice(cd, ranges);
  const auto gdy = Vulkan::slice(gd, ranges);
  ASSERT_EQ(Cpu::shape(cdy), y_shape);
  EXPECT_TRUE(same(Cpu::conv2d(cx, cw, std::nullopt, options), Vulkan::conv2d(gx, gw, std::nullopt, options), 1e-4));
  EXPECT_TRUE(same(Cpu::conv2d_backward_input(cdy, cw, x_shape, options),
                   Vulkan::conv2d_backward_input(gdy, gw, x_shape, options), 1e-4));
  EXPECT_TRUE(same(Cpu::conv2d_backward_weight(cx, cdy, w_shape, options),
                   Vulkan::conv2d_backward_weight(gx, gdy, w_shape, options), 1e-4));
}

TEST_F(VulkanConv, EmptyBatch) {
  const ops::Conv2dOptions options{};
  const auto x = Vulkan::full(Shape{0, 2, 4, 4}, 0.0, DType::f32, {});
  const auto w = Vulkan::full(Shape{3, 2, 3, 3}, 1.0, DType::f32, {});
  EXPECT_EQ(Vulkan::shape(Vulkan::conv2d(x, w, std::nullopt, options)), (Shape{0, 3, 2, 2}));
  const auto dy = Vulkan::full(Shape{0, 3, 2, 2}, 0.0, DType::f32, {});
  EXPECT_EQ(Vulkan::shape(Vulkan::conv2d_backward_input(dy, w, Shape{0, 2, 4, 4}, options)), (Shape{0, 2, 4, 4}));
  const auto dw = Vulkan::conv2d_backward_weight(x, dy, Shape{3, 2, 3, 3}, options);
  EXPECT_TRUE(same(Cpu::full(Shape{3, 2, 3, 3}, 0.0, DType::f32, {}), dw, 0.0));
}

TEST_F(VulkanConv, ErrorsMatchCpu) {
  const ops::Conv2dOptions plain{};
  const ops::Conv2dOptions grouped{{1, 1}, {0, 0}, {1, 1}, 2};
  struct Shapes {
    Shape x, w, dy;
    std::optional<Shape> bias;
    ops::Conv2dOptions options;
    DType w_dtype = DType::f32;
  };
  const std::vector<Shapes> bad{
      {Shape{2, 3, 5}, Shape{4, 3, 3, 3}, Shape{2, 4, 3, 3}, std::nullopt, plain},            // rank
      {Shape{2, 3, 5, 5}, Shape{4, 2, 3, 3}, Shape{2, 4, 3, 3}, std::nullopt, plain},         // channels
      {Shape{2, 3, 5, 5}, Shape{4, 3, 3, 3}, Shape{2, 4, 3, 3}, std::nullopt, grouped},       // groups
      {Shape{2, 4, 2, 2}, Shape{4, 2, 3, 3}, Shape{2, 4, 1, 1}, std::nullopt, grouped},       // too small
      {Shape{2, 3, 5, 5}, Shape{4, 3, 3, 3}, Shape{2, 4, 3, 4}, Shape{5}, plain},             // dy, bias
      {Shape{2, 3, 5, 5}, Shape{4, 3, 3, 3}, Shape{2, 4, 3, 3}, std::nullopt, {{0, 1}, {0, 0}, {1, 1}, 1}},  // stride
      {Shape{2, 3, 5, 5}, Shape{4, 3, 3, 3}, Shape{2, 4, 3, 3}, std::nullopt, plain, DType::i32},  // dtype
  };
  for (const Shapes& s : bad) {
    SCOPED_TRACE(fmt::format("x {} w {} dy {}", s.x, s.w, s.dy));
    const TensorData x = dense(s.x, DType::f32, 1), w = dense(s.w, s.w_dtype, 2), dy = dense(s.dy, DType::f32, 3);
    std::optional<Cpu::Primitive> cb;
    std::optional<Vulkan::Primitive> gb;
    if (s.bias) std::tie(cb, gb) = both(dense(*s.bias, DType::f32, 4));
    const auto [cx, gx] = both(x);
    const auto [cw, gw] = both(w);
    const auto [cdy, gdy] = both(dy);
    const std::string forward = error_of([&] { Cpu::conv2d(cx, cw, cb, s.options); });
    const std::string input = error_of([&] { Cpu::conv2d_backward_input(cdy, cw, s.x, s.options); });
    const std::string weight = error_of([&] { Cpu::conv2d_backward_weight(cx, cdy, s.w, s.options); });
    EXPECT_NE(forward + input + weight, "no errorno errorno error");
    EXPECT_EQ(error_of([&] { Vulkan::conv2d(gx, gw, gb, s.options); }), forward);
    EXPECT_EQ(error_of([&] { Vulkan::conv2d_backward_input(gdy, gw, s.x, s.options); }), input);
    EXPECT_EQ(error_of([&] { Vulkan::conv2d_backward_weight(gx, gdy, s.w, s.options); }), weight);
  }
}
