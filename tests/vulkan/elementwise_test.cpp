// The Vulkan backend's ops so far (creation, host transfer, casts, every elementwise op of
// the catalogue and every gradient formula), each compared with the CPU backend on the
// same inputs, broadcast and strided operands included. Skipped, with the reason, when
// no Vulkan device is available.
#include "vulkan_test.hpp"

#include <kiln/fusion/backend.hpp>
#include <kiln/tensor.hpp>

#include <cmath>
#include <tuple>

using namespace kiln;
using namespace kiln::test;

namespace {

// f32: the GLSL builtins (exp, log, sin...) are within a few ulp of the C library's; f16 /
// bf16 compute in float too and round once, so they differ at most where that float lands
// near a rounding boundary (one 16-bit ulp); f64: Kiln's own double-precision helpers.
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 2e-5;
    case DType::f64: return 1e-13;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 0.0;
  }
}

template <class Op> std::vector<DType> domain_dtypes() {
  if constexpr (Op::domain == ops::Domain::boolean) return {DType::boolean};
  else if constexpr (Op::domain == ops::Domain::float_only) return {DType::f32, DType::f64, DType::f16, DType::bf16};
  else return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
}

// Inputs where the float-only ops are defined (log, sqrt... of positives).
template <class Op> constexpr bool wants_positive =
    std::is_same_v<Op, ops::Log> || std::is_same_v<Op, ops::Sqrt> || std::is_same_v<Op, ops::Rsqrt> ||
    std::is_same_v<Op, ops::Log1p>;

template <class Op> void check_unary() {
  for (DType dtype : domain_dtypes<Op>()) {
    SCOPED_TRACE(std::string(Op::name) + " " + std::string(dtype_name(dtype)));
    const TensorData x = sample(Shape{3, 37}, dtype, 1, wants_positive<Op>);
    const auto cpu = Cpu::unary<Op>(Cpu::from_data(x, {}));
    const auto gpu = provided::unary<Vulkan, Op>(Vulkan::from_data(x, {}));
    EXPECT_TRUE(same(cpu, gpu, tolerance(dtype)));
  }
}

template <class Op> void check_binary() {
  for (DType dtype : domain_dtypes<Op>()) {
    SCOPED_TRACE(std::string(Op::name) + " " + std::string(dtype_name(dtype)));
    const bool positive = std::is_same_v<Op, ops::Pow>;
    // Broadcast: [4, 1, 5] op [3, 1].
    const TensorData a = sample(Shape{4, 1, 5}, dtype, 2, positive), b = sample(Shape{3, 1}, dtype, 3);
    const auto cpu = Cpu::binary<Op>(Cpu::from_data(a, {}), Cpu::from_data(b, {}));
    const auto gpu = provided::binary<Vulkan, Op>(Vulkan::from_data(a, {}), Vulkan::from_data(b, {}));
    EXPECT_TRUE(same(cpu, gpu, tolerance(dtype)));
    if constexpr (Op::domain != ops::Domain::boolean) {
      const double s = is_float(dtype) ? 1.5 : 2.0;
      EXPECT_TRUE(same(Cpu::binary_scalar<Op>(Cpu::from_data(a, {}), s),
                       provided::binary_scalar<Vulkan, Op>(Vulkan::from_data(a, {}), s), tolerance(dtype)));
    }
  }
}

template <class Op> void check_unary_backward() {
  SCOPED_TRACE(std::string(Op::name) + " backward");
  const TensorData x = sample(Shape{2, 29}, DType::f32, 4, true);
  const TensorData dy = sample(Shape{2, 29}, DType::f32, 5);
  const auto cx = Cpu::from_data(x, {});
  const auto gx = Vulkan::from_data(x, {});
  const auto cy = Cpu::unary<Op>(cx);
  const auto gy = to_vulkan(cy);
  EXPECT_TRUE(same(Cpu::unary_backward<Op>(cx, cy, Cpu::from_data(dy, {})),
                   provided::unary_backward<Vulkan, Op>(gx, gy, Vulkan::from_data(dy, {})), 2e-5));
}

template <class Op> void check_binary_backward() {
  SCOPED_TRACE(std::string(Op::name) + " backward");
  const TensorData a = sample(Shape{3, 4}, DType::f32, 6, true), b = sample(Shape{1, 4}, DType::f32, 7, true);
  const auto ca = Cpu::from_data(a, {}), cb = Cpu::from_data(b, {});
  const auto cy = Cpu::binary<Op>(ca, cb);
  const TensorData dy = sample(Shape{3, 4}, DType::f32, 8);
  const auto ga = Vulkan::from_data(a, {}), gb = Vulkan::from_data(b, {});
  const auto gy = to_vulkan(cy);
  for (ops::Operand side : {ops::Operand::lhs, ops::Operand::rhs}) {
    EXPECT_TRUE(same(Cpu::binary_backward<Op>(ca, cb, cy, Cpu::from_data(dy, {}), side),
                     provided::binary_backward<Vulkan, Op>(ga, gb, gy, Vulkan::from_data(dy, {}), side), 2e-5));
  }
}

}  // namespace

TEST_F(VulkanOps, ListsTheDeviceItRunsOn) {
  const auto list = vulkan::devices();
  ASSERT_FALSE(list.empty());
  EXPECT_FALSE(list[0].name.empty());
}

TEST_F(VulkanOps, HostRoundTripForEveryDtype) {
  for (DType dtype : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const TensorData x = sample(Shape{5, 7}, dtype, 9);
    EXPECT_CLOSE(Vulkan::into_data(Vulkan::from_data(x, {})), x, 0.0, 0.0);
  }
  EXPECT_EQ(Vulkan::into_data(Vulkan::from_data(TensorData::from(std::vector<float>{}, Shape{0, 3}), {})).numel(), 0);
}

TEST_F(VulkanOps, FullRandomAndCastMatchTheCpu) {
  for (DType dtype : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const double value = dtype == DType::boolean ? 1.0 : 3.0;
    EXPECT_TRUE(same(Cpu::full(Shape{4, 3}, value, dtype, {}), Vulkan::full(Shape{4, 3}, value, dtype, {}), 0.0));
    const RandomStream stream{17, 5};
    EXPECT_TRUE(same(Cpu::random(Shape{64}, Distribution::normal(0, 1), stream, dtype, {}),
                     Vulkan::random(Shape{64}, Distribution::normal(0, 1), stream, dtype, {}), 0.0));
    for (DType to : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
      SCOPED_TRACE(std::string("to ") + std::string(dtype_name(to)));
      const TensorData x = sample(Shape{2, 9}, dtype, 10);
      // NaN and inf have no integer value (the CPU's result is undefined there too).
      const TensorData finite = is_float(dtype) && !is_float(to) && to != DType::boolean
                                    ? sample(Shape{2, 9}, dtype, 10, true)
                                    : x;
      EXPECT_TRUE(same(Cpu::cast(Cpu::from_data(finite, {}), to), Vulkan::cast(Vulkan::from_data(finite, {}), to), 0.0));
    }
  }
}

TEST_F(VulkanOps, EveryUnaryOpMatchesTheCpu) {
#define KILN_CHECK_UNARY(Op) check_unary<ops::Op>();
  KILN_UNARY_OPS(KILN_CHECK_UNARY)
#undef KILN_CHECK_UNARY
}

TEST_F(VulkanOps, EveryBinaryOpMatchesTheCpu) {
#define KILN_CHECK_BINARY(Op) check_binary<ops::Op>();
  KILN_BINARY_OPS(KILN_CHECK_BINARY)
#undef KILN_CHECK_BINARY
}

TEST_F(VulkanOps, EveryGradientFormulaMatchesTheCpu) {
#define KILN_CHECK_UNARY_BACKWARD(Op) check_unary_backward<ops::Op>();
#define KILN_CHECK_BINARY_BACKWARD(Op) check_binary_backward<ops::Op>();
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CHECK_UNARY_BACKWARD)
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CHECK_BINARY_BACKWARD)
#undef KILN_CHECK_UNARY_BACKWARD
#undef KILN_CHECK_BINARY_BACKWARD
}

TEST_F(VulkanOps, WhereAndStridedOperandsMatchTheCpu) {
  const TensorData c = sample(Shape{3, 1}, DType::boolean, 11), a = sample(Shape{3, 5}, DType::f32, 12),
                   b = sample(Shape{1, 5}, DType::f32, 13);
  EXPECT_TRUE(same(Cpu::where(Cpu::from_data(c, {}), Cpu::from_data(a, {}), Cpu::from_data(b, {})),
                   provided::where<Vulkan>(Vulkan::from_data(c, {}), Vulkan::from_data(a, {}), Vulkan::from_data(b, {})), 0.0));
  // A transposed view (strides swapped) read by a kernel and copied back to the host.
  auto view = Vulkan::from_data(a, {});
  view.shape = Shape{5, 3};
  view.strides = {1, 5};
  auto cpu_view = Cpu::from_data(a, {});
  cpu_view.shape = Shape{5, 3};
  cpu_view.strides = {1, 5};
  EXPECT_TRUE(same(Cpu::unary<ops::Exp>(cpu_view), provided::unary<Vulkan, ops::Exp>(view), 2e-5));
  EXPECT_TRUE(same(cpu_view, view, 0.0));
}

// No work on the hot path: once an op has run for a dtype and kernel variant, running it
// again, at other sizes, with other scalars or fill values, traces, renders and hashes
// nothing (kiln::vulkan::elementwise_renders counts every rendering, in this test or the
// ones before it in the process).
TEST_F(VulkanOps, RepeatedElementwiseOpsRenderNothing) {
  using V = Vulkan;
  auto run = [](std::int64_t n, double scalar) {
    const auto x = V::from_data(sample(Shape{n}, DType::f32, 7), {});
    const auto y = provided::unary<V, ops::Tanh>(x);
    const auto z = provided::binary<V, ops::Mul>(x, y);
    const auto s = provided::binary_scalar<V, ops::Add>(z, scalar);
    const auto dx = provided::unary_backward<V, ops::Tanh>(x, y, s);
    const auto db = provided::binary_backward<V, ops::Mul>(x, y, z, dx, ops::Operand::rhs);
    const auto f = V::full(Shape{n}, scalar, DType::f32, {});
    return V::into_data(provided::where<V>(provided::binary<V, ops::Less>(x, y), db, V::cast(V::cast(f, DType::f64), DType::f32)));
  };
  const TensorData first = run(1000, 0.5);
  const std::uint64_t renders = vulkan::elementwise_renders();
  EXPECT_GT(renders, 0u);
  for (const auto& [n, scalar] : {std::pair<std::int64_t, double>{1000, 0.5}, {10, 0.7}, {4097, -3.25}}) {
    const TensorData again = run(n, scalar);
    EXPECT_EQ(again.numel(), n);
  }
  EXPECT_EQ(vulkan::elementwise_renders(), renders) << "a repeated op rendered a kernel again";
  EXPECT_TRUE(all_close(run(1000, 0.5), first, 0, 0));
}

// A program of several outputs runs as one kernel where its buffers fit the bindings (the
// layout, the outputs, the inputs: 8): each input is read once for all of them. One that
// does not fit runs a kernel per output; the values are the same either way, and the CPU's.
TEST_F(VulkanOps, AProgramOfSeveralOutputsIsOneKernelWhereItsBuffersFit) {
  using codegen::Kind;
  using codegen::make_input;
  using codegen::make_node;
  using codegen::make_param;
  auto run = [](const codegen::Program& program, std::size_t inputs, std::uint64_t kernels) {
    std::vector<Cpu::Primitive> cpu;
    std::vector<Vulkan::Primitive> gpu;
    for (std::size_t k = 0; k < inputs; ++k) {
      const TensorData x = sample(Shape{5, 67}, DType::f32, static_cast<std::uint64_t>(20 + k));
      cpu.push_back(Cpu::from_data(x, {}));
      gpu.push_back(Vulkan::from_data(x, {}));
    }
    const std::vector<double> params{0.75};
    const auto expected = Cpu::elementwise(program, cpu, params);
    const std::uint64_t before = vulkan::dispatches();
    const auto got = Vulkan::elementwise(program, gpu, params);
    EXPECT_EQ(vulkan::dispatches(), before + kernels);
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      SCOPED_TRACE(k);
      EXPECT_EQ(got[k].dtype, program.outputs()[k].dtype);
      EXPECT_TRUE(same(expected[k], got[k], 2e-5));
    }
  };
  // exp(in0 * p0) shared by three outputs: itself, + in1, and a mask (a bool output).
  const auto e = make_node(Kind::exp, {make_node(Kind::mul, {make_input(0), make_param(0)})});
  const codegen::Program three(codegen::ScalarType::f32, {DType::f32, DType::f32}, 1,
                               {{e, DType::f32},
                                {make_node(Kind::add, {e, make_input(1)}), DType::f32},
                                {make_node(Kind::gt, {e, make_input(1)}), DType::boolean}});
  run(three, 2, 1);  // 1 + 3 + 2 buffers
  // Six inputs and two outputs: 9 buffers, a kernel each.
  codegen::NodePtr sum = make_input(0);
  for (int k = 1; k < 6; ++k) sum = make_node(Kind::add, {sum, make_input(k)});
  const codegen::Program wide(codegen::ScalarType::f32, std::vector<DType>(6, DType::f32), 1,
                              {{sum, DType::f32}, {make_node(Kind::mul, {sum, make_param(0)}), DType::f32}});
  run(wide, 6, 2);
}

// Fusion<Vulkan> writes an intermediate that another pending tensor still reads beside the
// result it materialises: one kernel writes both.
TEST_F(VulkanOps, FusionWritesAnIntermediateBesideItsResultInOneKernel) {
  using F = Fusion<Vulkan>;
  const TensorData xd = sample(Shape{40, 33}, DType::f32, 30), yd = sample(Shape{40, 33}, DType::f32, 31);
  const auto x = Tensor<F, 2>::from_data(xd), y = Tensor<F, 2>::from_data(yd);
  const auto shared = (x * y).exp();
  const auto first = shared + 1.0;
  const auto second = shared.tanh() * x;
  const std::uint64_t written = F::counters().written.load(), before = vulkan::dispatches();
  const auto cx = Tensor<Cpu, 2>::from_data(xd), cy = Tensor<Cpu, 2>::from_data(yd);
  const Vulkan::Primitive materialised = F::value(first.primitive());
  EXPECT_EQ(vulkan::dispatches(), before + 1) << "one kernel wrote first and the intermediate";
  EXPECT_EQ(F::counters().written.load(), written + 2);
  EXPECT_TRUE(all_close(Vulkan::into_data(materialised), ((cx * cy).exp() + 1.0).into_data(), 2e-5, 1e-6));
  EXPECT_TRUE(all_close(second.into_data(), ((cx * cy).exp().tanh() * cx).into_data(), 2e-5, 1e-6));
}

TEST_F(VulkanOps, BadInputIsAnError) {
  const auto f = Vulkan::from_data(sample(Shape{2, 3}, DType::f32, 14), {});
  const auto i = Vulkan::from_data(sample(Shape{2, 3}, DType::i32, 15), {});
  EXPECT_KILN_ERROR((provided::binary<Vulkan, ops::Add>(f, i)), "add: both operands must have the same dtype");
  EXPECT_KILN_ERROR((provided::unary<Vulkan, ops::Exp>(i)), "exp: expected a float tensor, got i32");
  EXPECT_KILN_ERROR((provided::binary<Vulkan, ops::Add>(f, Vulkan::from_data(sample(Shape{4, 3}, DType::f32, 16), {}))), "add");
  EXPECT_KILN_ERROR((provided::binary_scalar<Vulkan, ops::Add>(i, 0.5)), "the scalar 0.5 is not a i32 value");
}
