// Conformance: the 3-d convolution and pooling composed from the 2-d ops (functional conv3d,
// conv_transpose3d, max_pool3d, avg_pool3d) and circular padding, against PyTorch golden
// values (tests/golden/gen_conv3d.py), in f32 and f64 on every backend, plus their errors.
// Their gradients are checked in tests/nn/conv3d_test.cpp.
#include "backends.hpp"
#include "golden.hpp"

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Conv3d);

namespace {

constexpr DType kFloatDTypes[] = {DType::f32, DType::f64};
double tol(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-11; }

struct ConvCase {
  const char* name;
  ops::Conv3dOptions options;
};
const ConvCase kConvCases[] = {
    {"conv3d_basic", {}},
    {"conv3d_strided_grouped", {{2, 1, 2}, {1, 2, 0}, {2, 1, 1}, 2}},
    {"conv3d_depthwise", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 3}},
};

struct ConvTransposeCase {
  const char* name;
  ops::ConvTranspose3dOptions options;
};
const ConvTransposeCase kConvTransposeCases[] = {
    {"conv_transpose3d", {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1}},
    {"conv_transpose3d_grouped_dilated", {{1, 2, 1}, {0, 1, 0}, {1, 1, 0}, {2, 1, 1}, 2}},
};

template <class B> std::optional<Tensor<B, 1>> golden_bias(const kiln::test::GoldenCase& c, DType dtype) {
  if (!c.tensors.contains("b")) return std::nullopt;
  return c.tensor<B, 1>("b", dtype);
}

}  // namespace

TYPED_TEST(Conv3d, Conv3dMatchesTorch) {
  using B = TypeParam;
  for (const ConvCase& k : kConvCases) {
    SCOPED_TRACE(k.name);
    const auto& c = golden("conv3d", k.name);
    for (DType dtype : kFloatDTypes) {
      const auto out = functional::conv3d(c.tensor<B, 5>("x", dtype), c.tensor<B, 5>("w", dtype),
                                          golden_bias<B>(c, dtype), k.options);
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
    }
  }
}

TYPED_TEST(Conv3d, ConvTranspose3dMatchesTorch) {
  using B = TypeParam;
  for (const ConvTransposeCase& k : kConvTransposeCases) {
    SCOPED_TRACE(k.name);
    const auto& c = golden("conv3d", k.name);
    for (DType dtype : kFloatDTypes) {
      const auto out = functional::conv_transpose3d(c.tensor<B, 5>("x", dtype), c.tensor<B, 5>("w", dtype),
                                                    golden_bias<B>(c, dtype), k.options);
      EXPECT_EQ(out.shape(), c["out"].shape());
      EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
    }
  }
}

TYPED_TEST(Conv3d, MaxPool3dMatchesTorchWithIndices) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv3d", "max_pool3d");
    const ops::Pool3dOptions options{{3, 2, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}, true};
    const auto [out, indices] = functional::max_pool3d_with_indices(c.tensor<B, 5>("x", dtype), options);
    EXPECT_CLOSE(out, c["out"].convert(dtype), 0, 0);
    EXPECT_EQ(indices.dtype(), DType::i64);
    EXPECT_CLOSE(indices, c["indices"], 0, 0);
    EXPECT_CLOSE(functional::max_pool3d(c.tensor<B, 5>("x", dtype), options), c["out"].convert(dtype), 0, 0);

    const auto& u = golden("conv3d", "max_pool3d_unbatched");
    const auto [u_out, u_indices] = functional::max_pool3d_with_indices(
        u.tensor<B, 4>("x", dtype), {.kernel = {2, 2, 2}, .stride = {2, 2, 2}});
    EXPECT_CLOSE(u_out, u["out"].convert(dtype), 0, 0);
    EXPECT_CLOSE(u_indices, u["indices"], 0, 0);
  }
}

TYPED_TEST(Conv3d, AvgPool3dMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv3d", "avg_pool3d");
    const ops::Pool3dOptions options{{3, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, true, false};
    EXPECT_CLOSE(functional::avg_pool3d(c.tensor<B, 5>("x", dtype), options), c["out"], tol(dtype), tol(dtype));
    const auto& p = golden("conv3d", "avg_pool3d_include_pad");
    const ops::Pool3dOptions include_pad{.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}};
    EXPECT_CLOSE(functional::avg_pool3d(p.tensor<B, 5>("x", dtype), include_pad), p["out"], tol(dtype), tol(dtype));
  }
}

TYPED_TEST(Conv3d, CircularPadMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv3d", "pad_circular_1d");
    EXPECT_CLOSE(c.tensor<B, 3>("x", dtype).pad({2, 3}, PadMode::circular), c["out"].convert(dtype), 0, 0);
    const auto& d = golden("conv3d", "pad_circular_2d");
    EXPECT_CLOSE(d.tensor<B, 4>("x", dtype).pad({1, 0, 3, 2}, PadMode::circular), d["out"].convert(dtype), 0, 0);
  }
}

TYPED_TEST(Conv3d, RejectsBadShapesAndOptions) {
  using B = TypeParam;
  const auto x = Tensor<B, 5>::zeros({2, 4, 5, 5, 5});
  EXPECT_KILN_ERROR(functional::conv3d<B>(x, Tensor<B, 5>::zeros({6, 2, 3, 3, 3})),
                    "conv3d: weight [6, 2, 3, 3, 3] expects 2 input channels (groups = 1, 2 per group), but input "
                    "[2, 4, 5, 5, 5] has 4");
  EXPECT_KILN_ERROR(functional::conv3d<B>(x, Tensor<B, 5>::zeros({6, 4, 6, 3, 3})),
                    "conv3d: input [2, 4, 5, 5, 5] with padding [0, 0, 0] is smaller than the kernel");
  EXPECT_KILN_ERROR(functional::conv3d<B>(x, Tensor<B, 5>::zeros({6, 4, 3, 3, 3}), Tensor<B, 1>::zeros({4})),
                    "conv3d: bias must have shape [6]");
  EXPECT_KILN_ERROR(functional::conv_transpose3d<B>(x, Tensor<B, 5>::zeros({3, 2, 3, 3, 3})),
                    "conv_transpose3d: weight [3, 2, 3, 3, 3] expects 3 input channels, but input [2, 4, 5, 5, 5] "
                    "has 4");
  ops::ConvTranspose3dOptions big_output_padding;
  big_output_padding.stride = {2, 2, 2};
  big_output_padding.output_padding = {0, 2, 0};
  EXPECT_KILN_ERROR(
      functional::conv_transpose3d<B>(x, Tensor<B, 5>::zeros({4, 2, 3, 3, 3}), std::nullopt, big_output_padding),
      "conv_transpose3d: output_padding [0, 2, 0] must be non-negative and smaller than the stride [2, 2, 2]");
  EXPECT_KILN_ERROR(functional::max_pool3d(x, {.kernel = {3, 3, 3}, .stride = {1, 1, 1}, .padding = {2, 0, 0}}),
                    "max_pool3d: padding [2, 0, 0] must be between 0 and half the kernel [3, 3, 3]");
  EXPECT_KILN_ERROR(functional::max_pool3d(x, {.kernel = {6, 1, 1}, .stride = {1, 1, 1}}),
                    "max_pool3d: input [2, 4, 5, 5, 5] is too small for kernel [6, 1, 1]");
  EXPECT_KILN_ERROR(functional::avg_pool3d(x, {.kernel = {2, 2, 2}, .stride = {1, 1, 1}, .dilation = {1, 2, 1}}),
                    "avg_pool3d: average pooling has no dilation, got [1, 2, 1]");
  EXPECT_KILN_ERROR((Tensor<B, 3>::zeros({1, 2, 3}).pad({4, 0}, PadMode::circular)),
                    "pad: circular padding 4 / 0 must not exceed dim 2 of shape [1, 2, 3]");
}
