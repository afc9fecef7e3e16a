// Conformance: convolution against PyTorch golden values (tests/golden/gen_conv.py):
// conv1d/conv2d forward, the conv2d input and weight gradients, the transposed
// convolutions, in f32 and f64 (on the CPU backend these are oneDNN and the reference
// loops: both must match torch), plus empty shapes and the error messages.
#include "backends.hpp"
#include "golden.hpp"

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Conv);

namespace {

constexpr DType kFloatDTypes[] = {DType::f32, DType::f64};
double tol(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-11; }

// The conv2d cases of gen_conv.py with their options.
struct Conv2dCase {
  const char* name;
  ops::Conv2dOptions options;
  bool bias;
};
const Conv2dCase kConv2dCases[] = {
    {"conv2d_basic", {}, true},
    {"conv2d_strided_grouped", {{2, 1}, {1, 2}, {2, 1}, 2}, false},
    {"conv2d_depthwise", {{1, 1}, {1, 1}, {1, 1}, 3}, true},
    {"conv2d_uncovered_edge", {{2, 2}, {1, 1}, {1, 1}, 1}, false},
    {"conv2d_channel_multiplier", {{1, 1}, {0, 0}, {1, 1}, 2}, false},
};

// The same values as `t`, read through a non-contiguous view.
template <class B> Tensor<B, 4> strided_copy(const Tensor<B, 4>& t) {
  return (t.swap_dims(2, 3) * 1.0).swap_dims(2, 3);
}

}  // namespace

TYPED_TEST(Conv, Conv2dForwardMatchesTorch) {
  using B = TypeParam;
  for (const Conv2dCase& k : kConv2dCases) {
    SCOPED_TRACE(k.name);
    const auto& c = golden("conv", k.name);
    for (DType dtype : kFloatDTypes) {
      std::optional<Tensor<B, 1>> bias;
      if (k.bias) bias = c.tensor<B, 1>("b", dtype);
      const auto out = functional::conv2d(c.tensor<B, 4>("x", dtype), c.tensor<B, 4>("w", dtype), bias, k.options);
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
    }
  }
}

TYPED_TEST(Conv, Conv2dBackwardInputMatchesTorchAutograd) {
  using B = TypeParam;
  for (const Conv2dCase& k : kConv2dCases) {
    SCOPED_TRACE(k.name);
    const auto& c = golden("conv", k.name);
    for (DType dtype : kFloatDTypes) {
      const auto dy = c.tensor<B, 4>("dy", dtype), w = c.tensor<B, 4>("w", dtype);
      const Tensor<B, 4> dx(B::conv2d_backward_input(dy.primitive(), w.primitive(), c["x"].shape(), k.options));
      EXPECT_CLOSE(dx, c["dx"], tol(dtype), tol(dtype));
    }
  }
}

TYPED_TEST(Conv, Conv2dBackwardWeightMatchesTorchAutograd) {
  using B = TypeParam;
  for (const Conv2dCase& k : kConv2dCases) {
    SCOPED_TRACE(k.name);
    const auto& c = golden("conv", k.name);
    for (DType dtype : kFloatDTypes) {
      const auto x = c.tensor<B, 4>("x", dtype), dy = c.tensor<B, 4>("dy", dtype);
      const Tensor<B, 4> dw(B::conv2d_backward_weight(x.primitive(), dy.primitive(), c["w"].shape(), k.options));
      EXPECT_CLOSE(dw, c["dw"], tol(dtype), tol(dtype));
    }
  }
}

TYPED_TEST(Conv, Conv2dTakesNonContiguousOperands) {
  using B = TypeParam;
  const auto& c = golden("conv", "conv2d_strided_grouped");
  const ops::Conv2dOptions options{{2, 1}, {1, 2}, {2, 1}, 2};
  for (DType dtype : kFloatDTypes) {
    const auto x = strided_copy(c.tensor<B, 4>("x", dtype)), w = strided_copy(c.tensor<B, 4>("w", dtype));
    const auto dy = strided_copy(c.tensor<B, 4>("dy", dtype));
    EXPECT_CLOSE(functional::conv2d<B>(x, w, std::nullopt, options), c["out"], tol(dtype), tol(dtype));
    EXPECT_CLOSE(Tensor<B, 4>(B::conv2d_backward_input(dy.primitive(), w.primitive(), x.shape(), options)), c["dx"],
                 tol(dtype), tol(dtype));
    EXPECT_CLOSE(Tensor<B, 4>(B::conv2d_backward_weight(x.primitive(), dy.primitive(), w.shape(), options)), c["dw"],
                 tol(dtype), tol(dtype));
  }
}

TYPED_TEST(Conv, Conv1dMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv", "conv1d");
    const ops::Conv1dOptions options{.stride = 2, .padding = 1, .dilation = 2, .groups = 2};
    const auto out = functional::conv1d<B>(c.tensor<B, 3>("x", dtype), c.tensor<B, 3>("w", dtype),
                                           c.tensor<B, 1>("b", dtype), options);
    EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
    const auto& p = golden("conv", "conv1d_plain");
    EXPECT_CLOSE(functional::conv1d<B>(p.tensor<B, 3>("x", dtype), p.tensor<B, 3>("w", dtype)), p["out"], tol(dtype),
                 tol(dtype));
  }
}

TYPED_TEST(Conv, ConvTranspose2dMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv", "conv_transpose2d");
    ops::ConvTranspose2dOptions options;
    options.stride = {2, 2};
    options.padding = {1, 1};
    options.output_padding = {1, 1};
    const auto out = functional::conv_transpose2d<B>(c.tensor<B, 4>("x", dtype), c.tensor<B, 4>("w", dtype),
                                                     c.tensor<B, 1>("b", dtype), options);
    EXPECT_EQ(out.shape(), (Shape{2, 3, 6, 6}));
    EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
  }
}

TYPED_TEST(Conv, ConvTranspose2dOutputPaddingBeyondTheStride) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv", "conv_transpose2d_grouped_dilated");
    const ops::ConvTranspose2dOptions options{{1, 2}, {0, 1}, {1, 1}, {2, 1}, 2};
    const auto out = functional::conv_transpose2d<B>(c.tensor<B, 4>("x", dtype), c.tensor<B, 4>("w", dtype),
                                                     std::nullopt, options);
    EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
  }
}

TYPED_TEST(Conv, ConvTranspose1dMatchesTorch) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto& c = golden("conv", "conv_transpose1d");
    const auto out = functional::conv_transpose1d<B>(c.tensor<B, 3>("x", dtype), c.tensor<B, 3>("w", dtype),
                                                     c.tensor<B, 1>("b", dtype),
                                                     {.stride = 2, .padding = 1, .output_padding = 1});
    EXPECT_CLOSE(out, c["out"], tol(dtype), tol(dtype));
    // output_padding past the padding: the last position only gets the bias.
    const auto& d = golden("conv", "conv_transpose1d_dilated");
    const ops::ConvTranspose1dOptions options{.stride = 1, .padding = 1, .output_padding = 2, .dilation = 3};
    const auto dilated = functional::conv_transpose1d<B>(d.tensor<B, 3>("x", dtype), d.tensor<B, 3>("w", dtype),
                                                         d.tensor<B, 1>("b", dtype), options);
    EXPECT_CLOSE(dilated, d["out"], tol(dtype), tol(dtype));
  }
}

TYPED_TEST(Conv, HalfPrecisionComputesThroughF32) {
  using B = TypeParam;
  const auto& c = golden("conv", "conv2d_basic");
  for (DType dtype : {DType::f16, DType::bf16}) {
    const auto out = functional::conv2d<B>(c.tensor<B, 4>("x", dtype), c.tensor<B, 4>("w", dtype),
                                           c.tensor<B, 1>("b", dtype));
    EXPECT_EQ(out.dtype(), dtype);
    // Inputs and outputs rounded to 8 (bf16) or 11 (f16) significant bits, sums of 27 products.
    EXPECT_CLOSE(out.cast(DType::f32), c["out"].convert(DType::f32), 5e-2, 1e-1);
  }
}

// Channel counts that make oneDNN pick its blocked layouts and vectorized kernels: the f32
// path must agree with the f64 reference loops on the same numbers, for every option.
TYPED_TEST(Conv, F32AgreesWithF64ReferenceOnLargerShapes) {
  using B = TypeParam;
  struct Case {
    std::array<std::int64_t, 4> x, w;
    ops::Conv2dOptions options;
  };
  const Case cases[] = {
      {{2, 16, 9, 10}, {24, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{3, 16, 11, 9}, {32, 8, 3, 2}, {{2, 1}, {1, 0}, {2, 1}, 2}},
      {{2, 16, 8, 8}, {16, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 16}},  // depthwise
      {{2, 3, 12, 12}, {16, 3, 5, 5}, {{2, 2}, {2, 2}, {1, 1}, 1}},  // few input channels, as in a first layer
      {{1, 32, 7, 7}, {8, 32, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},   // 1x1
  };
  for (const Case& k : cases) {
    const auto x = Tensor<B, 4>::random(k.x, Distribution::normal(0, 1), {}, DType::f64);
    const auto w = Tensor<B, 4>::random(k.w, Distribution::normal(0, 1), {}, DType::f64);
    const auto b = Tensor<B, 1>::random({k.w[0]}, Distribution::normal(0, 1), {}, DType::f64);
    const auto y = functional::conv2d<B>(x, w, b, k.options);
    const auto dy = y.random_like(Distribution::normal(0, 1));
    const Shape xs = x.shape(), ws = w.shape();
    const auto dx = B::conv2d_backward_input(dy.primitive(), w.primitive(), xs, k.options);
    const auto dw = B::conv2d_backward_weight(x.primitive(), dy.primitive(), ws, k.options);

    const auto x32 = x.cast(DType::f32), w32 = w.cast(DType::f32), dy32 = dy.cast(DType::f32);
    const auto y32 = functional::conv2d<B>(x32, w32, b.cast(DType::f32), k.options);
    EXPECT_CLOSE(y32, y.into_data().convert(DType::f32), 1e-4, 1e-4);
    EXPECT_CLOSE(Tensor<B, 4>(B::conv2d_backward_input(dy32.primitive(), w32.primitive(), xs, k.options)),
                 TensorData(B::into_data(dx)).convert(DType::f32), 1e-4, 1e-4);
    EXPECT_CLOSE(Tensor<B, 4>(B::conv2d_backward_weight(x32.primitive(), dy32.primitive(), ws, k.options)),
                 TensorData(B::into_data(dw)).convert(DType::f32), 1e-4, 1e-4);
  }
}

TYPED_TEST(Conv, EmptyBatchAndEmptyChannels) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto w = Tensor<B, 4>::ones({4, 3, 3, 3}, {}, dtype);
    const auto empty_batch = functional::conv2d<B>(Tensor<B, 4>::zeros({0, 3, 5, 5}, {}, dtype), w);
    EXPECT_EQ(empty_batch.shape(), (Shape{0, 4, 3, 3}));
    // No examples: the weight gradient is an empty sum.
    const auto dw = B::conv2d_backward_weight(Tensor<B, 4>::zeros({0, 3, 5, 5}, {}, dtype).primitive(),
                                              Tensor<B, 4>::zeros({0, 4, 3, 3}, {}, dtype).primitive(), w.shape(), {});
    EXPECT_CLOSE(Tensor<B, 4>(dw), Tensor<B, 4>::zeros({4, 3, 3, 3}, {}, dtype).into_data());
    // No input channels: every output is the bias.
    const auto bias = Tensor<B, 1>::from({1.0, 2.0}, {}, dtype);
    const auto no_channels = functional::conv2d<B>(Tensor<B, 4>::zeros({1, 0, 3, 3}, {}, dtype),
                                                   Tensor<B, 4>::zeros({2, 0, 2, 2}, {}, dtype), bias);
    const auto expected = Tensor<B, 4>::from({{{{1.0, 1.0}, {1.0, 1.0}}, {{2.0, 2.0}, {2.0, 2.0}}}}, {}, dtype);
    EXPECT_CLOSE(no_channels, expected.into_data());
  }
}

TYPED_TEST(Conv, RejectsBadShapesAndOptions) {
  using B = TypeParam;
  const auto x = Tensor<B, 4>::zeros({2, 4, 5, 5});
  const auto w = Tensor<B, 4>::zeros({6, 2, 3, 3});
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, w),
                    "conv2d: weight [6, 2, 3, 3] expects 2 input channels (groups = 1, 2 per group), but input "
                    "[2, 4, 5, 5] has 4");
  ops::Conv2dOptions three_groups;
  three_groups.groups = 3;
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, w, std::nullopt, three_groups), "conv2d: groups = 3 must divide");
  ops::Conv2dOptions two_groups;
  two_groups.groups = 2;
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, w, Tensor<B, 1>::zeros({4}), two_groups),
                    "conv2d: bias must have shape [6]");
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, w, Tensor<B, 1>::zeros({6}, {}, DType::f64), two_groups),
                    "conv2d: bias dtype f64 differs");
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, w.cast(DType::f64), std::nullopt, two_groups),
                    "conv2d: dtypes differ: input [2, 4, 5, 5] f32, weight [6, 2, 3, 3] f64");
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, Tensor<B, 4>::zeros({6, 4, 7, 3})),
                    "conv2d: input [2, 4, 5, 5] with padding [0, 0] is smaller than the kernel");
  ops::Conv2dOptions zero_stride;
  zero_stride.stride = {0, 1};
  EXPECT_KILN_ERROR(functional::conv2d<B>(x, Tensor<B, 4>::zeros({6, 4, 3, 3}), std::nullopt, zero_stride),
                    "conv2d: stride [0, 1] and dilation [1, 1] must be positive");

  EXPECT_KILN_ERROR(functional::conv1d<B>(Tensor<B, 3>::zeros({1, 3, 8}), Tensor<B, 3>::zeros({2, 2, 3})),
                    "conv1d: weight [2, 2, 3] expects 2 input channels");
  EXPECT_KILN_ERROR(functional::conv_transpose2d<B>(x, Tensor<B, 4>::zeros({3, 2, 3, 3})),
                    "conv_transpose2d: weight [3, 2, 3, 3] expects 3 input channels, but input [2, 4, 5, 5] has 4");
  ops::ConvTranspose2dOptions big_output_padding;
  big_output_padding.stride = {2, 2};
  big_output_padding.output_padding = {2, 0};
  const auto transposed_weight = Tensor<B, 4>::zeros({4, 2, 3, 3});
  EXPECT_KILN_ERROR(functional::conv_transpose2d<B>(x, transposed_weight, std::nullopt, big_output_padding),
                    "conv_transpose2d: output_padding [2, 0] must be non-negative and smaller than the stride [2, 2]");
  EXPECT_KILN_ERROR(functional::conv_transpose1d<B>(Tensor<B, 3>::zeros({1, 2, 1}), Tensor<B, 3>::zeros({2, 2, 1}),
                                                    std::nullopt, {.padding = 1}),
                    "conv_transpose1d: input [1, 2, 1] with weight [2, 2, 1], stride [1], padding [1], dilation [1] "
                    "gives an output size of -1");

  // The primitives check what they are given too.
  EXPECT_KILN_ERROR(B::conv2d_backward_input(Tensor<B, 4>::zeros({2, 6, 4, 4}).primitive(), w.primitive(),
                                             Shape{2, 2, 5, 5}, {}),
                    "conv2d_backward_input: the output gradient has shape [2, 6, 4, 4], but input [2, 2, 5, 5] and "
                    "weight [6, 2, 3, 3] give output [2, 6, 3, 3]");
  EXPECT_KILN_ERROR(B::conv2d_backward_weight(x.primitive(), Tensor<B, 4>::zeros({2, 6, 3, 3}).primitive(),
                                              Shape{6, 3, 3, 3}, {}),
                    "conv2d_backward_weight: weight [6, 3, 3, 3] expects 3 input channels");
  const auto ints = Tensor<B, 4, Int>::zeros({1, 2, 3, 3}, {}, DType::i32);
  const auto int_weight = Tensor<B, 4, Int>::zeros({1, 2, 1, 1}, {}, DType::i32);
  EXPECT_KILN_ERROR(B::conv2d(ints.primitive(), int_weight.primitive(), std::nullopt, {}),
                    "conv2d: expected float tensors");
}
