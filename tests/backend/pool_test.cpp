// Conformance: pooling and interpolation against PyTorch golden values
// (tests/golden/gen_pool.py): forward through kiln::functional, backward through the
// backend primitives, 2-d and 1-d, f32 and f64, plus shape edge cases and bad input.
#include "backends.hpp"
#include "golden.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;
namespace F = kiln::functional;

namespace {

constexpr DType kFloatTypes[] = {DType::f32, DType::f64};

double rtol(DType d) { return d == DType::f64 ? 1e-12 : 1e-5; }
double atol(DType d) { return d == DType::f64 ? 1e-12 : 1e-6; }

std::vector<std::int64_t> ints(const GoldenCase& c, const std::string& label) {
  return c[label].to_vec<std::int64_t>();
}

// options = kernel[2] stride[2] padding[2] dilation[2] ceil_mode
ops::Pool2dOptions max_options(const GoldenCase& c) {
  const auto v = ints(c, "options");
  return {{v[0], v[1]}, {v[2], v[3]}, {v[4], v[5]}, {v[6], v[7]}, v[8] != 0, true};
}

// options = kernel[2] stride[2] padding[2] ceil_mode count_include_pad
ops::Pool2dOptions avg_options(const GoldenCase& c) {
  const auto v = ints(c, "options");
  return {{v[0], v[1]}, {v[2], v[3]}, {v[4], v[5]}, {1, 1}, v[6] != 0, v[7] != 0};
}

template <class B>
typename B::Primitive primitive(const GoldenCase& c, const std::string& label, DType dtype) {
  return B::from_data(c[label].convert(dtype), {});
}

}  // namespace

KILN_BACKEND_TEST_SUITE(Pool);

// ---- max pooling

TYPED_TEST(Pool, MaxPool2dValuesIndicesAndBackwardMatchTorch) {
  using B = TypeParam;
  for (const char* name : {"max_k2s2", "max_pad_dilation_ceil", "max_ceil", "max_k3s1p1", "max_ceil_overhang"}) {
    SCOPED_TRACE(name);
    const auto& c = golden("pool", name);
    const auto options = max_options(c);
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const auto x = c.tensor<B, 4>("x", dtype);
      const auto [out, indices] = F::max_pool2d_with_indices(x, options);
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_EQ(indices.dtype(), DType::i64);
      EXPECT_CLOSE(out, c["out"], rtol(dtype), atol(dtype));
      EXPECT_CLOSE(indices, c["indices"], 0, 0);
      EXPECT_CLOSE(F::max_pool2d(x, options), c["out"], rtol(dtype), atol(dtype));
      if constexpr (requires { B::max_pool2d_values(x.primitive(), options); }) {
        // The inference form, without indices, where a backend has one.
        EXPECT_CLOSE(B::into_data(B::max_pool2d_values(x.primitive(), options)), c["out"], rtol(dtype), atol(dtype));
      }
      const auto dx = provided::max_pool2d_backward<B>(x.primitive(), primitive<B>(c, "dy", dtype), indices.primitive(), options);
      EXPECT_CLOSE(B::into_data(dx), c["dx"], rtol(dtype), atol(dtype));
    }
  }
}

TYPED_TEST(Pool, MaxPool2dKeepsFirstTiePropagatesNanAndHandlesAllMinusInf) {
  using B = TypeParam;
  const auto& c = golden("pool", "max_ties_nan");
  for (DType dtype : kFloatTypes) {
    const auto [out, indices] =
        F::max_pool2d_with_indices(c.tensor<B, 4>("x", dtype), {.kernel = {2, 2}, .stride = {2, 2}});
    EXPECT_CLOSE(out, c["out"], 0, 0);  // the values are exact in f32
    EXPECT_CLOSE(indices, c["indices"], 0, 0);
  }
}

TYPED_TEST(Pool, MaxPool2dBackwardRejectsIndicesOutsideThePlane) {
  using B = TypeParam;
  const auto x = Tensor<B, 4>::zeros({1, 1, 2, 2});
  const ops::Pool2dOptions options{.kernel = {2, 2}, .stride = {2, 2}};
  const auto dy = Tensor<B, 4>::ones({1, 1, 1, 1});
  const auto bad = Tensor<B, 4, Int>::full({1, 1, 1, 1}, 4);
  EXPECT_KILN_ERROR(provided::max_pool2d_backward<B>(x.primitive(), dy.primitive(), bad.primitive(), options),
                    "max_pool2d_backward: an index is outside the 2x2 input plane");
  const auto wrong_shape = Tensor<B, 4>::ones({1, 1, 2, 1});
  EXPECT_KILN_ERROR(provided::max_pool2d_backward<B>(x.primitive(), wrong_shape.primitive(), bad.primitive(), options),
                    "max_pool2d_backward: dy has shape [1, 1, 2, 1], expected [1, 1, 1, 1]");
}

// MaxPool2d(2) on widths that fill one vector step of 16 outputs, several, or part of one
// (the CPU's f32 kernel for 2x2 windows works 16 outputs at a time), against a direct scan:
// values with ties, NaNs, and a window of only -inf.
TYPED_TEST(Pool, MaxPool2dOfTwoByTwoWindowsMatchesADirectScanAcrossWidths) {
  using B = TypeParam;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const Shape& shape : {Shape{2, 3, 9, 70}, Shape{1, 2, 6, 32}, Shape{1, 1, 4, 17}, Shape{1, 1, 5, 2},
                             Shape{1, 1, 2, 33}, Shape{1, 1, 3, 49}}) {
    SCOPED_TRACE(fmt::format("{}", shape));
    const std::int64_t planes = shape[0] * shape[1], h = shape[2], w = shape[3], oh = h / 2, ow = w / 2;
    std::vector<double> v(static_cast<std::size_t>(planes * h * w));
    std::uint32_t state = 12345;
    for (double& e : v) {
      state = state * 1664525u + 1013904223u;
      const std::uint32_t r = state >> 24;
      e = r % 37 == 0 ? nan : static_cast<double>(r % 5) - 2.0;  // ties among five values, some NaN
    }
    for (std::int64_t i : {0L, 1L, w, w + 1}) v[static_cast<std::size_t>(i)] = -inf;  // window (0, 0) of plane 0
    std::vector<double> values;
    std::vector<std::int64_t> indices;
    for (std::int64_t p = 0; p < planes; ++p)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t x = 0; x < ow; ++x) {
          double best = -inf;
          std::int64_t at = 2 * y * w + 2 * x;
          for (std::int64_t i : {at, at + 1, at + w, at + w + 1}) {
            const double e = v[static_cast<std::size_t>(p * h * w + i)];
            if (e > best || std::isnan(e)) best = e, at = i;
          }
          values.push_back(best);
          indices.push_back(at);
        }
    const Shape out_shape{shape[0], shape[1], oh, ow};
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const auto x = Tensor<B, 4>::from_data(TensorData::from(v, shape).convert(dtype));
      const auto [out, at] = F::max_pool2d_with_indices(x, {.kernel = {2, 2}, .stride = {2, 2}});
      EXPECT_CLOSE(out, TensorData::from(values, out_shape), 0, 0);
      EXPECT_CLOSE(at, TensorData::from(indices, out_shape), 0, 0);
      if constexpr (requires { B::max_pool2d_values(x.primitive(), ops::Pool2dOptions{}); }) {
        const ops::Pool2dOptions two{.kernel = {2, 2}, .stride = {2, 2}};
        EXPECT_CLOSE(B::into_data(B::max_pool2d_values(x.primitive(), two)), TensorData::from(values, out_shape), 0, 0);
      }
    }
  }
}

// ---- average pooling

TYPED_TEST(Pool, AvgPool2dForwardAndBackwardMatchTorch) {
  using B = TypeParam;
  for (const char* name : {"avg_pad_include", "avg_pad_exclude", "avg_ceil_include", "avg_ceil_exclude", "avg_rect",
                           "avg_ceil_overhang_include", "avg_ceil_overhang_exclude"}) {
    SCOPED_TRACE(name);
    const auto& c = golden("pool", name);
    const auto options = avg_options(c);
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const auto x = c.tensor<B, 4>("x", dtype);
      EXPECT_CLOSE(F::avg_pool2d(x, options), c["out"], rtol(dtype), atol(dtype));
      const auto dx = provided::avg_pool2d_backward<B>(x.primitive(), primitive<B>(c, "dy", dtype), options);
      EXPECT_CLOSE(B::into_data(dx), c["dx"], rtol(dtype), atol(dtype));
    }
  }
}

// f32 average pooling of large enough inputs may take another kernel (oneDNN on the CPU) than
// f64; both must agree over a sweep of kernels, strides, paddings, ceil_mode and count_include_pad.
TYPED_TEST(Pool, AvgPool2dAgreesBetweenF32AndF64AcrossOptions) {
  using B = TypeParam;
  manual_seed(7);
  const auto x64 = Tensor<B, 4>::random({1, 16, 45, 46}, Distribution::normal(0, 1), {}, DType::f64);
  const auto x32 = x64.cast(DType::f32);
  for (std::int64_t kernel = 1; kernel <= 3; ++kernel)
    for (std::int64_t stride : {1, 3})
      for (std::int64_t padding = 0; padding <= kernel / 2; ++padding)
        for (bool ceil_mode : {false, true})
          for (bool include : {false, true}) {
            SCOPED_TRACE(fmt::format("kernel {} stride {} padding {} ceil {} include {}", kernel, stride, padding,
                                     ceil_mode, include));
            const ops::Pool2dOptions o{.kernel = {kernel, kernel + 1},
                                       .stride = {stride, stride},
                                       .padding = {padding, padding},
                                       .ceil_mode = ceil_mode,
                                       .count_include_pad = include};
            const auto expected = F::avg_pool2d(x64, o);
            EXPECT_CLOSE(F::avg_pool2d(x32, o), expected.into_data(), 1e-5, 1e-6);
            const auto dy64 = expected.random_like(Distribution::normal(0, 1));
            const auto dx64 = provided::avg_pool2d_backward<B>(x64.primitive(), dy64.primitive(), o);
            const auto dx32 = provided::avg_pool2d_backward<B>(x32.primitive(), B::cast(dy64.primitive(), DType::f32), o);
            EXPECT_CLOSE(B::into_data(dx32), B::into_data(dx64), 1e-5, 1e-6);
          }
}

// ---- adaptive average pooling

TYPED_TEST(Pool, AdaptiveAvgPool2dMatchesTorchForSizesThatDoNotDivide) {
  using B = TypeParam;
  for (const char* name : {"adaptive_7x5_to_3x2", "adaptive_3x4_to_5x7"}) {
    SCOPED_TRACE(name);
    const auto& c = golden("pool", name);
    const auto size = ints(c, "size");
    for (DType dtype : kFloatTypes) {
      const auto x = c.tensor<B, 4>("x", dtype);
      EXPECT_CLOSE(F::adaptive_avg_pool2d(x, {size[0], size[1]}), c["out"], rtol(dtype), atol(dtype));
      const auto dx = provided::adaptive_avg_pool2d_backward<B>(x.primitive(), primitive<B>(c, "dy", dtype));
      EXPECT_CLOSE(B::into_data(dx), c["dx"], rtol(dtype), atol(dtype));
    }
  }
}

// ---- interpolate

TYPED_TEST(Pool, InterpolateMatchesTorchForEveryModeAndAlignment) {
  using B = TypeParam;
  int seen = 0;
  for (const char* mode : {"nearest", "bilinear", "bicubic"})
    for (const char* align : {"noalign", "align"})
      for (const char* size : {"7x3", "3x2", "6x9", "8x10"}) {
        const std::string m = mode, a = align, s = size;
        if ((m == "nearest" && a == "align") || (m != "nearest" && s == "8x10")) continue;  // not generated
        const std::string name = fmt::format("interp_{}_{}_{}", mode, align, size);
        ++seen;
        SCOPED_TRACE(name);
        const auto& c = golden("pool", name);
        const auto v = ints(c, "options");
        const ops::InterpolateOptions options{static_cast<ops::InterpolateMode>(v[0]), v[1] != 0};
        for (DType dtype : kFloatTypes) {
          SCOPED_TRACE(dtype_name(dtype));
          const auto x = c.tensor<B, 4>("x", dtype);
          EXPECT_CLOSE(F::interpolate(x, {v[2], v[3]}, options), c["out"], rtol(dtype), atol(dtype));
          // dx sums taps of both signs: PyTorch's own f32 gradient is off by ~2e-6 here.
          const auto dx = provided::interpolate_backward<B>(x.primitive(), primitive<B>(c, "dy", dtype), options);
          EXPECT_CLOSE(B::into_data(dx), c["dx"], rtol(dtype), dtype == DType::f32 ? 1e-5 : atol(dtype));
        }
      }
  EXPECT_EQ(seen, 16);
}

// ---- inputs that are views, unbatched, half precision, empty

TYPED_TEST(Pool, NonContiguousInputsMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("pool", "noncontiguous");
  for (DType dtype : kFloatTypes) {
    const auto x = c.tensor<B, 4>("x", dtype).swap_dims(2, 3);  // a transposed view
    EXPECT_CLOSE(F::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}), c["max"], rtol(dtype),
                 atol(dtype));
    EXPECT_CLOSE(F::avg_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false}),
                 c["avg"], rtol(dtype), atol(dtype));
    EXPECT_CLOSE(F::adaptive_avg_pool2d(x, {2, 4}), c["adaptive"], rtol(dtype), atol(dtype));
    EXPECT_CLOSE(F::interpolate(x, {7, 4}, {.mode = ops::InterpolateMode::bilinear}), c["bilinear"], rtol(dtype),
                 atol(dtype));
  }
}

TYPED_TEST(Pool, UnbatchedChwInputsPoolLikeABatchOfOne) {
  using B = TypeParam;
  const auto& c = golden("pool", "max_pad_dilation_ceil");  // batch of 1
  const auto x = c.tensor<B, 4>("x").template reshape<3>({-1, 7, 8});
  const auto [out, indices] = F::max_pool2d_with_indices(x, max_options(c));
  EXPECT_CLOSE(out.template unsqueeze<4>(), c["out"], 0, 0);
  EXPECT_CLOSE(indices.template unsqueeze<4>(), c["indices"], 0, 0);
  const auto& a = golden("pool", "avg_ceil_include");
  EXPECT_CLOSE(
      F::avg_pool2d(a.tensor<B, 4>("x").template reshape<3>({-1, 6, 7}), avg_options(a)).template unsqueeze<4>(),
      a["out"]);
}

TYPED_TEST(Pool, HalfPrecisionComputesThroughF32) {
  using B = TypeParam;
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == DType::f16 ? 4e-3 : 3e-2;
    const auto& m = golden("pool", "max_k2s2");
    const auto [out, indices] = F::max_pool2d_with_indices(m.tensor<B, 4>("x", dtype), max_options(m));
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_CLOSE(out, m["out"], tol, tol);
    const auto& a = golden("pool", "avg_pad_exclude");
    const auto avg = F::avg_pool2d(a.tensor<B, 4>("x", dtype), avg_options(a));
    EXPECT_EQ(avg.dtype(), dtype);
    EXPECT_CLOSE(avg, a["out"], tol, tol);
    const auto& i = golden("pool", "interp_bilinear_noalign_7x3");
    const auto up = F::interpolate(i.tensor<B, 4>("x", dtype), {7, 3}, {.mode = ops::InterpolateMode::bilinear});
    EXPECT_EQ(up.dtype(), dtype);
    EXPECT_CLOSE(up, i["out"], tol, 2 * tol);
  }
}

TYPED_TEST(Pool, EmptyBatchGivesEmptyOutputs) {
  using B = TypeParam;
  const auto x = Tensor<B, 4>::zeros({0, 3, 4, 4});
  const ops::Pool2dOptions o{.kernel = {2, 2}, .stride = {2, 2}};
  const auto [out, indices] = F::max_pool2d_with_indices(x, o);
  EXPECT_EQ(out.shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(indices.shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(F::avg_pool2d(x, o).shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(F::adaptive_avg_pool2d(x, {3, 3}).shape(), (Shape{0, 3, 3, 3}));
  EXPECT_EQ(F::interpolate(x, {5, 6}, {.mode = ops::InterpolateMode::bicubic}).shape(), (Shape{0, 3, 5, 6}));
  const auto dy = Tensor<B, 4>::zeros({0, 3, 2, 2});
  EXPECT_EQ(B::shape(provided::avg_pool2d_backward<B>(x.primitive(), dy.primitive(), o)), (Shape{0, 3, 4, 4}));
  EXPECT_EQ(B::shape(provided::max_pool2d_backward<B>(x.primitive(), dy.primitive(), indices.primitive(), o)),
            (Shape{0, 3, 4, 4}));
}

// ---- 1-d variants (NCL)

TYPED_TEST(Pool, Pool1dMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto& m = golden("pool", "max1d");
    const auto [out, indices] = F::max_pool1d_with_indices(m.tensor<B, 3>("x", dtype),
                                                           {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true});
    EXPECT_CLOSE(out, m["out"], rtol(dtype), atol(dtype));
    EXPECT_CLOSE(indices, m["indices"], 0, 0);
    const auto& d = golden("pool", "max1d_dilation");
    const ops::Pool1dOptions dilated{.kernel = 2, .stride = 1, .padding = 1, .dilation = 3};
    EXPECT_CLOSE(F::max_pool1d(d.tensor<B, 3>("x", dtype), dilated), d["out"], rtol(dtype), atol(dtype));
    EXPECT_CLOSE(F::max_pool1d_with_indices(d.tensor<B, 3>("x", dtype), dilated).second, d["indices"], 0, 0);
    const auto& a = golden("pool", "avg1d");
    EXPECT_CLOSE(F::avg_pool1d(a.tensor<B, 3>("x", dtype),
                               {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}),
                 a["out"], rtol(dtype), atol(dtype));
    const auto& p = golden("pool", "adaptive1d");
    EXPECT_CLOSE(F::adaptive_avg_pool1d(p.tensor<B, 3>("x", dtype), 4), p["out"], rtol(dtype), atol(dtype));
    // Unbatched CL input.
    EXPECT_CLOSE(F::adaptive_avg_pool1d(p.tensor<B, 3>("x", dtype).template reshape<2>({-1, 9}), 4)
                     .template reshape<3>({2, 3, 4}),
                 p["out"], rtol(dtype), atol(dtype));
  }
}

TYPED_TEST(Pool, Interpolate1dMatchesTorch) {
  using B = TypeParam;
  using ops::InterpolateMode;
  const std::tuple<const char*, std::int64_t, ops::InterpolateOptions> cases[] = {
      {"interp1d_linear", 5, {InterpolateMode::bilinear, false}},
      {"interp1d_linear_align", 13, {InterpolateMode::bilinear, true}},
      {"interp1d_nearest", 13, {InterpolateMode::nearest, false}},
  };
  for (const auto& [name, size, options] : cases) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("pool", name);  // structured bindings are dependent in a template
    for (DType dtype : kFloatTypes) {
      const auto x = c.tensor<B, 3>("x", dtype);
      EXPECT_CLOSE(F::interpolate(x, size, options), c["out"], rtol(dtype), atol(dtype));
      // The backward primitive on the NCHW form with a height of 1.
      const auto x4 = x.template unsqueeze<4>().swap_dims(0, 1).swap_dims(1, 2);  // [N, C, 1, L]
      const auto dy4 = c.tensor<B, 3>("dy", dtype).template unsqueeze<4>().swap_dims(0, 1).swap_dims(1, 2);
      const auto dx = Tensor<B, 4>(provided::interpolate_backward<B>(x4.primitive(), dy4.primitive(), options));
      EXPECT_CLOSE(dx.template reshape<3>({2, 3, 9}), c["dx"], rtol(dtype), atol(dtype));
    }
  }
}

// ---- bad input

TYPED_TEST(Pool, BadInputIsRejectedWithTheOpAndShapes) {
  using B = TypeParam;
  const auto x = Tensor<B, 4>::zeros({1, 2, 5, 5});
  EXPECT_KILN_ERROR(F::max_pool2d(x, {.kernel = {0, 2}}), "max_pool2d: kernel [0, 2], stride [1, 1] and dilation");
  EXPECT_KILN_ERROR(F::max_pool2d(x, {.kernel = {2, 2}, .stride = {0, 1}}), "must be positive (input [1, 2, 5, 5])");
  EXPECT_KILN_ERROR(F::avg_pool2d(x, {.kernel = {3, 3}, .padding = {2, 1}}),
                    "avg_pool2d: padding [2, 1] must be between 0 and half the kernel [3, 3]");
  EXPECT_KILN_ERROR(F::max_pool2d(x, {.kernel = {3, 3}, .dilation = {3, 3}}),
                    "max_pool2d: input [1, 2, 5, 5] is too small for kernel [3, 3]");
  EXPECT_KILN_ERROR(F::avg_pool2d(x, {.kernel = {2, 2}, .dilation = {2, 2}}),
                    "avg_pool2d: average pooling has no dilation");
  EXPECT_KILN_ERROR(F::adaptive_avg_pool2d(x, {0, 2}), "adaptive_avg_pool2d: output size [0, 2] must be positive");
  EXPECT_KILN_ERROR(F::interpolate(x, {3, -1}), "interpolate: output size [3, -1] must be positive");
  EXPECT_KILN_ERROR(F::interpolate(x, {3, 3}, {.mode = ops::InterpolateMode::nearest, .align_corners = true}),
                    "interpolate: align_corners applies to bilinear and bicubic modes only");
  const auto x1 = Tensor<B, 3>::zeros({1, 2, 5});
  EXPECT_KILN_ERROR(F::max_pool1d(x1, {.kernel = 4, .padding = 3}),
                    "max_pool1d: padding 3 must be between 0 and half the kernel 4 (input [1, 2, 5])");
  EXPECT_KILN_ERROR(F::avg_pool1d(x1, {.kernel = 6}), "avg_pool1d: input [1, 2, 5] is too small for kernel 6");
  EXPECT_KILN_ERROR(F::adaptive_avg_pool1d(x1, 0), "adaptive_avg_pool1d: output size 0 must be positive");
  EXPECT_KILN_ERROR(F::interpolate(x1, 4, {.mode = ops::InterpolateMode::bicubic}),
                    "interpolate: bicubic needs a 4-d NCHW input, got shape [1, 2, 5]");
  EXPECT_KILN_ERROR(F::adaptive_avg_pool2d(Tensor<B, 4>::zeros({1, 2, 0, 5}), {2, 2}),
                    "adaptive_avg_pool2d: input [1, 2, 0, 5] has an empty spatial dim");

  // The primitives check on their own: rank, dtype, dy shape.
  const auto r3 = Tensor<B, 3>::zeros({2, 5, 5});
  EXPECT_KILN_ERROR(B::max_pool2d(r3.primitive(), {.kernel = {2, 2}}),
                    "max_pool2d: expected an NCHW input of rank 4, got shape [2, 5, 5]");
  EXPECT_KILN_ERROR(provided::interpolate<B>(r3.primitive(), std::vector<std::int64_t>{2, 2}, {}),
                    "interpolate: expected an NCHW input of rank 4, got shape [2, 5, 5]");
  const auto ints4 = Tensor<B, 4, Int>::zeros({1, 1, 4, 4});
  EXPECT_KILN_ERROR(provided::avg_pool2d<B>(ints4.primitive(), {.kernel = {2, 2}}), "avg_pool2d: expected a float tensor");
  EXPECT_KILN_ERROR(provided::adaptive_avg_pool2d<B>(x.primitive(), std::vector<std::int64_t>{2}),
                    "adaptive_avg_pool2d: expected 2 output sizes, got 1");
  const auto dy = Tensor<B, 4>::zeros({1, 2, 3, 3});
  EXPECT_KILN_ERROR(provided::adaptive_avg_pool2d_backward<B>(x.primitive(), dy.template reshape<4>({2, 1, 3, 3}).primitive()),
                    "adaptive_avg_pool2d_backward: dy has shape [2, 1, 3, 3], expected [1, 2, 3, 3]");
  EXPECT_KILN_ERROR(provided::interpolate_backward<B>(x.primitive(), dy.cast(DType::f64).primitive(), {}),
                    "interpolate_backward: dy must have the input's dtype f32, got f64");
}
