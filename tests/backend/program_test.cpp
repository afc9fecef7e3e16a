// Elementwise programs (kiln/codegen/program.hpp) on every backend: B::elementwise runs
// multi-op, multi-output programs with parameters, broadcasting and strided inputs in every
// program type, agrees with the ops it joins, and rejects calls that do not match the
// program; and the provided one-op programs (kiln/backend/provided_elementwise.hpp) agree
// with every backend's override for every op of the catalogue and every dtype it takes.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/codegen/program.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace kiln;
using codegen::Expr;
using codegen::Mask;
using codegen::Program;
using codegen::ScalarType;

KILN_BACKEND_TEST_SUITE(Programs);

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// 16 values of `dtype` in a 4 x 4 tensor: specials for floats, zeros and negatives for
// integers (variant 1 is a second set, the right operand of binary ops).
TensorData values(DType dtype, int variant) {
  std::vector<double> v;
  if (is_float(dtype)) {
    v = variant == 0 ? std::vector<double>{-3.5, -1, -0.5, -0.0, 0, 0.25, 0.5, 1, 2, 7.25, inf, -inf, nan, 1e-3, 40, -40}
                     : std::vector<double>{2, -1.5, 0.5, 3, -0.0, 1, nan, 4, -2, 0.75, 2, inf, 1, -3, 0.5, 9};
  } else if (dtype == DType::boolean) {
    v = variant == 0 ? std::vector<double>{0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0}
                     : std::vector<double>{0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0};
  } else if (dtype == DType::u8) {
    v = variant == 0 ? std::vector<double>{0, 1, 2, 3, 4, 5, 7, 9, 10, 12, 15, 17, 20, 31, 100, 255}
                     : std::vector<double>{1, 0, 3, 2, 5, 1, 2, 4, 0, 7, 2, 3, 5, 1, 2, 1};
  } else {
    v = variant == 0 ? std::vector<double>{-7, -5, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 9, 12, -12}
                     : std::vector<double>{2, -3, 0, 5, -1, 3, 2, -2, 0, 1, 3, -4, 2, 2, 5, 7};
  }
  return TensorData::from(v, Shape{4, 4}).convert(dtype);
}

std::vector<DType> dtypes_of(ops::Domain domain) {
  switch (domain) {
    case ops::Domain::float_only: return {DType::f32, DType::f64, DType::f16, DType::bf16};
    case ops::Domain::numeric: return {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64, DType::u8};
    case ops::Domain::boolean: return {DType::boolean};
  }
  return {};
}

// The compile-time kernels and the program evaluator use the same math; only the
// contraction of a * b + c into one rounding may differ.
double tolerance(DType dtype) {
  if (dtype == DType::f64) return 1e-13;
  if (dtype == DType::f32) return 2e-6;
  return is_float(dtype) ? 1e-2 : 0.0;
}

template <class B>
::testing::AssertionResult same(const typename B::Primitive& actual, const typename B::Primitive& expected,
                                double rtol) {
  if (B::dtype(actual) != B::dtype(expected))
    return ::testing::AssertionFailure() << "dtype " << dtype_name(B::dtype(actual)) << " != "
                                         << dtype_name(B::dtype(expected));
  return test::all_close(B::into_data(actual), B::into_data(expected), rtol, rtol);
}

template <class B> typename B::Primitive upload(const TensorData& data) { return B::from_data(data, {}); }

template <class B, class Op> void unary_default_matches() {
  SCOPED_TRACE(Op::name);
  for (DType dtype : dtypes_of(Op::domain)) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto x = upload<B>(values(dtype, 0));
    EXPECT_TRUE(same<B>(defaults::unary<B, Op>(x), provided::unary<B, Op>(x), tolerance(dtype)));
  }
}

template <class B, class Op> void binary_default_matches() {
  SCOPED_TRACE(Op::name);
  for (DType dtype : dtypes_of(Op::domain)) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto a = upload<B>(values(dtype, 0)), b = upload<B>(values(dtype, 1));
    const double rtol = tolerance(dtype);
    EXPECT_TRUE(same<B>(defaults::binary<B, Op>(a, b), provided::binary<B, Op>(a, b), rtol));
    // Broadcast: a row against the whole tensor.
    const auto row = B::slice(b, std::vector<ops::SliceRange>{{1, 1, 1}, {0, 4, 1}});
    EXPECT_TRUE(same<B>(defaults::binary<B, Op>(a, row), provided::binary<B, Op>(a, row), rtol));
    for (double scalar : {0.0, 1.0, 2.0, 3.0}) {
      if (dtype == DType::boolean && scalar > 1.0) continue;
      SCOPED_TRACE(scalar);
      EXPECT_TRUE(same<B>(defaults::binary_scalar<B, Op>(a, scalar), provided::binary_scalar<B, Op>(a, scalar), rtol));
    }
    if (is_float(dtype)) {
      for (double scalar : {0.5, -1.0, -2.5, 7.0}) {
        SCOPED_TRACE(scalar);
        EXPECT_TRUE(
            same<B>(defaults::binary_scalar<B, Op>(a, scalar), provided::binary_scalar<B, Op>(a, scalar), rtol));
      }
    }
  }
}

template <class B, class Op> void unary_backward_default_matches() {
  SCOPED_TRACE(Op::name);
  for (DType dtype : dtypes_of(ops::Domain::float_only)) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto x = upload<B>(values(dtype, 0)), dy = upload<B>(values(dtype, 1));
    const auto y = provided::unary<B, Op>(x);
    EXPECT_TRUE(same<B>(defaults::unary_backward<B, Op>(x, y, dy), provided::unary_backward<B, Op>(x, y, dy),
                        tolerance(dtype)));
  }
}

template <class B, class Op> void binary_backward_default_matches() {
  SCOPED_TRACE(Op::name);
  for (DType dtype : dtypes_of(ops::Domain::float_only)) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto a = upload<B>(values(dtype, 0)), b = upload<B>(values(dtype, 1));
    const auto y = provided::binary<B, Op>(a, b);
    const auto dy = provided::unary<B, ops::Cos>(a);
    for (ops::Operand side : {ops::Operand::lhs, ops::Operand::rhs}) {
      EXPECT_TRUE(same<B>(defaults::binary_backward<B, Op>(a, b, y, dy, side),
                          provided::binary_backward<B, Op>(a, b, y, dy, side), tolerance(dtype)));
    }
  }
}

template <class B> std::vector<double> floats(const typename B::Primitive& p) {
  return B::into_data(p).template to_vec<double>();
}

}  // namespace

// ---------------------------------------------------------------- the one-op programs

TYPED_TEST(Programs, UnaryDefaultsMatchTheOverridesForEveryOpAndDtype) {
  using B = TypeParam;
#define KILN_TEST_UNARY(Op) unary_default_matches<B, ops::Op>();
  KILN_UNARY_OPS(KILN_TEST_UNARY)
#undef KILN_TEST_UNARY
}

TYPED_TEST(Programs, BinaryDefaultsMatchTheOverridesForEveryOpAndDtype) {
  using B = TypeParam;
#define KILN_TEST_BINARY(Op) binary_default_matches<B, ops::Op>();
  KILN_BINARY_OPS(KILN_TEST_BINARY)
#undef KILN_TEST_BINARY
}

TYPED_TEST(Programs, GradientFormulaDefaultsMatchTheOverrides) {
  using B = TypeParam;
#define KILN_TEST_UNARY_BACKWARD(Op) unary_backward_default_matches<B, ops::Op>();
#define KILN_TEST_BINARY_BACKWARD(Op) binary_backward_default_matches<B, ops::Op>();
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_TEST_UNARY_BACKWARD)
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_TEST_BINARY_BACKWARD)
#undef KILN_TEST_UNARY_BACKWARD
#undef KILN_TEST_BINARY_BACKWARD
}

TYPED_TEST(Programs, WhereDefaultMatchesTheOverride) {
  using B = TypeParam;
  const auto cond = upload<B>(values(DType::boolean, 0));
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8,
                      DType::boolean}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto a = upload<B>(values(dtype, 0)), b = upload<B>(values(dtype, 1));
    EXPECT_TRUE(same<B>(defaults::where<B>(cond, a, b), provided::where<B>(cond, a, b), 0.0));
    const auto row = B::slice(b, std::vector<ops::SliceRange>{{2, 1, 1}, {0, 4, 1}});
    EXPECT_TRUE(same<B>(defaults::where<B>(cond, a, row), provided::where<B>(cond, a, row), 0.0));
  }
}

TEST(ProgramConstruction, OneOpProgramsHaveOneKeyPerOpAndDtype) {
  const Program a = codegen::binary_program<ops::Mul>(DType::f32, true);
  const Program b = codegen::binary_program<ops::Mul>(DType::f32, true);
  const Program c = codegen::binary_program<ops::Mul>(DType::f64, true);
  const Program d = codegen::binary_program<ops::Add>(DType::f32, true);
  EXPECT_EQ(a.key(), b.key());
  EXPECT_EQ(a.id(), b.id());
  EXPECT_NE(a.id(), c.id());
  EXPECT_NE(a.id(), d.id());
  EXPECT_EQ(a.param_count(), 1);
  // A scalar operand is a parameter: the key holds no value, so every scalar is one program.
  EXPECT_EQ(a.key().find("0.5"), std::string::npos);
}

// ---------------------------------------------------------------- programs of many ops

TYPED_TEST(Programs, AChainOfOpsIsOneProgramThatMatchesTheOps) {
  using B = TypeParam;
  // z = gelu(x * p0 + y) * sigmoid(x), and x > y as a second, bool output; y broadcasts.
  const Expr x = Expr::input(0), y = Expr::input(1), scale = Expr::param(0);
  const Expr z = ops::GeluErf::apply(x * scale + y) * ops::Sigmoid::apply(x);
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const ScalarType t = codegen::scalar_type_of(dtype);
    const Program program(t, {dtype, dtype}, 1, {{z.node(), dtype}, {(x > y).node(), DType::boolean}});
    EXPECT_EQ(program.outputs().size(), 2u);
    const auto xs = provided::random<B>(Shape{37, 301}, Distribution::normal(0, 2), RandomStream{3, 0}, dtype, {});
    const auto ys = provided::random<B>(Shape{301}, Distribution::normal(0, 2), RandomStream{4, 0}, dtype, {});
    for (double s : {0.5, -1.25}) {
      SCOPED_TRACE(s);
      const std::array<typename B::Primitive, 2> inputs{xs, ys};
      const std::array<double, 1> params{s};
      const auto out = B::elementwise(program, inputs, params);
      ASSERT_EQ(out.size(), 2u);
      const auto ref = provided::binary<B, ops::Mul>(
          provided::unary<B, ops::GeluErf>(provided::binary<B, ops::Add>(provided::binary_scalar<B, ops::Mul>(xs, s), ys)),
          provided::unary<B, ops::Sigmoid>(xs));
      EXPECT_EQ(B::shape(out[0]), (Shape{37, 301}));
      EXPECT_TRUE(same<B>(out[0], ref, dtype == DType::f64 ? 1e-12 : 1e-5));
      EXPECT_TRUE(same<B>(out[1], provided::binary<B, ops::Greater>(xs, ys), 0.0));
    }
  }
}

// One step that is two outputs and the input of a third: backends that write an output's
// step straight into the output's memory (the CPU, for full aligned chunks) must still give
// every output its values, also where rows start unaligned (301 floats) and across threads.
TYPED_TEST(Programs, AStepThatIsSeveralOutputsAndFeedsAnotherFillsEachOfThem) {
  using B = TypeParam;
  const Expr x = Expr::input(0), b = Expr::input(1);
  const Expr y = ops::Sigmoid::apply(x * b) * 2.0;
  const Expr z = y + x;
  const Program program(ScalarType::f32, {DType::f32, DType::f32}, 0,
                        {{y.node(), DType::f32}, {y.node(), DType::f32}, {z.node(), DType::f32}});
  for (const auto& [xs_shape, bs_shape] : {std::pair{Shape{37, 301}, Shape{301}}, std::pair{Shape{100003}, Shape{100003}}}) {
    SCOPED_TRACE(fmt::format("{}", xs_shape));
    const auto xs = provided::random<B>(xs_shape, Distribution::normal(0, 2), RandomStream{5, 0}, DType::f32, {});
    const auto bs = provided::random<B>(bs_shape, Distribution::normal(0, 2), RandomStream{6, 0}, DType::f32, {});
    const std::array<typename B::Primitive, 2> inputs{xs, bs};
    const auto out = B::elementwise(program, inputs, {});
    ASSERT_EQ(out.size(), 3u);
    const auto ref_y = provided::binary_scalar<B, ops::Mul>(
        provided::unary<B, ops::Sigmoid>(provided::binary<B, ops::Mul>(xs, bs)), 2.0);
    EXPECT_TRUE(same<B>(out[0], ref_y, 1e-6));
    EXPECT_TRUE(same<B>(out[1], ref_y, 1e-6));
    EXPECT_TRUE(same<B>(out[2], provided::binary<B, ops::Add>(ref_y, xs), 1e-6));
  }
}

TYPED_TEST(Programs, LargeProgramsSplitIntoChunksAndThreadsWithoutSeams) {
  using B = TypeParam;
  // Sizes around the evaluator's chunk and register widths, and one big enough for threads.
  const Expr x = Expr::input(0);
  const Expr e = (x * x).exp() - x.tanh();
  const Program program(ScalarType::f32, {DType::f32}, 0, {{e.node(), DType::f32}});
  for (std::int64_t n : {1, 7, 8, 9, 255, 256, 257, 1000, 100003}) {
    SCOPED_TRACE(n);
    const auto xs = provided::random<B>(Shape{n}, Distribution::uniform(-2, 2), RandomStream{9, 0}, DType::f32, {});
    const std::array<typename B::Primitive, 1> inputs{xs};
    const auto out = B::elementwise(program, inputs, {});
    const auto ref = provided::binary<B, ops::Sub>(
        provided::unary<B, ops::Exp>(provided::binary<B, ops::Mul>(xs, xs)), provided::unary<B, ops::Tanh>(xs));
    EXPECT_TRUE(same<B>(out[0], ref, 1e-5));
  }
}

TYPED_TEST(Programs, StridedAndBroadcastInputsAreReadThroughTheirLayout) {
  using B = TypeParam;
  const Expr a = Expr::input(0), b = Expr::input(1), c = Expr::input(2);
  const Program program(ScalarType::f32, {DType::f32, DType::f32, DType::f32}, 0, {{((a - b) * c).node(), DType::f32}});
  const auto base = provided::random<B>(Shape{6, 5}, Distribution::normal(0, 1), RandomStream{1, 0}, DType::f32, {});
  const std::array<std::int64_t, 2> swap{1, 0};
  const auto transposed = B::permute(base, swap);  // [5, 6], not contiguous
  const auto column = B::slice(provided::random<B>(Shape{5, 3}, Distribution::normal(0, 1), RandomStream{2, 0},
                                                   DType::f32, {}),
                               std::vector<ops::SliceRange>{{0, 5, 1}, {1, 1, 1}});  // [5, 1], strided
  const auto one = provided::full<B>(Shape{1}, 3.0, DType::f32, {});
  const std::array<typename B::Primitive, 3> inputs{transposed, column, one};
  const auto out = B::elementwise(program, inputs, {});
  EXPECT_EQ(B::shape(out[0]), (Shape{5, 6}));
  const auto ref = provided::binary<B, ops::Mul>(provided::binary<B, ops::Sub>(transposed, column), one);
  EXPECT_TRUE(same<B>(out[0], ref, 1e-6));
}

TYPED_TEST(Programs, IntegerBoolAndHalfPrograms) {
  using B = TypeParam;
  {  // i64: (a + b) * p0, int_div by b (x / 0 is 0), and a < b
    const Expr a = Expr::input(0), b = Expr::input(1);
    const auto quotient = codegen::make_node(codegen::Kind::int_div, {a.node(), b.node()});
    const Program program(ScalarType::i64, {DType::i64, DType::i64}, 1,
                          {{((a + b) * Expr::param(0)).node(), DType::i64}, {quotient, DType::i64},
                           {(a < b).node(), DType::boolean}});
    const auto as = upload<B>(values(DType::i64, 0)), bs = upload<B>(values(DType::i64, 1));
    const std::array<typename B::Primitive, 2> inputs{as, bs};
    const std::array<double, 1> params{-3};
    const auto out = B::elementwise(program, inputs, params);
    EXPECT_TRUE(same<B>(out[0], provided::binary_scalar<B, ops::Mul>(provided::binary<B, ops::Add>(as, bs), -3), 0));
    EXPECT_TRUE(same<B>(out[1], provided::binary<B, ops::Div>(as, bs), 0));
    EXPECT_TRUE(same<B>(out[2], provided::binary<B, ops::Less>(as, bs), 0));
  }
  {  // bool: (p and not q) or (p xor q)
    const Mask p = Mask::input(0), q = Mask::input(1);
    const Program program(ScalarType::boolean, {DType::boolean, DType::boolean}, 0,
                          {{((p && !q) || (p != q)).node(), DType::boolean}});
    const auto ps = upload<B>(values(DType::boolean, 0)), qs = upload<B>(values(DType::boolean, 1));
    const std::array<typename B::Primitive, 2> inputs{ps, qs};
    const auto out = B::elementwise(program, inputs, {});
    const auto ref = provided::binary<B, ops::LogicalOr>(
        provided::binary<B, ops::LogicalAnd>(ps, provided::unary<B, ops::LogicalNot>(qs)),
        provided::binary<B, ops::LogicalXor>(ps, qs));
    EXPECT_TRUE(same<B>(out[0], ref, 0));
  }
  {  // f16 in, f32 compute, f16 and f32 out
    const Expr x = Expr::input(0);
    const Program program(ScalarType::f32, {DType::f16}, 0, {{(x * x + 1.0).node(), DType::f16},
                                                              {x.sqrt().node(), DType::f32}});
    const auto xs = upload<B>(TensorData::from(std::vector<double>{0.5, 2, 4, 9}, Shape{4}).convert(DType::f16));
    const std::array<typename B::Primitive, 1> inputs{xs};
    const auto out = B::elementwise(program, inputs, {});
    EXPECT_EQ(B::dtype(out[0]), DType::f16);
    EXPECT_EQ(floats<B>(out[0]), (std::vector<double>{1.25, 5, 17, 82}));
    EXPECT_EQ(B::dtype(out[1]), DType::f32);
    EXPECT_NEAR(floats<B>(out[1])[0], std::sqrt(0.5), 1e-6);
    EXPECT_EQ(floats<B>(out[1])[3], 3.0);
  }
}

// A parameter keeps its value in every type, against values computed here (not against
// another path of the same backend): Vulkan carries parameters as two words of its layout
// buffer, so a value that needs the high word (an f64, a negative or large i64) is checked.
TYPED_TEST(Programs, ParametersOfEveryTypeKeepTheirValues) {
  using B = TypeParam;
  const Expr x = Expr::input(0);
  auto run = [&](DType dtype, std::vector<double> xs, double p) {
    const Program program(codegen::scalar_type_of(dtype), {dtype}, 1, {{(x + Expr::param(0)).node(), dtype}});
    const auto in = upload<B>(TensorData::from(xs, Shape{static_cast<std::int64_t>(xs.size())}).convert(dtype));
    const std::array<typename B::Primitive, 1> inputs{in};
    const std::array<double, 1> params{p};
    return B::into_data(B::elementwise(program, inputs, params)[0]);
  };
  EXPECT_EQ(run(DType::f32, {1, -2}, 0.1).template to_vec<float>(), (std::vector<float>{1.0f + 0.1f, -2.0f + 0.1f}));
  EXPECT_EQ(run(DType::f64, {1, -2}, 0.1).template to_vec<double>(), (std::vector<double>{1.0 + 0.1, -2.0 + 0.1}));
  EXPECT_EQ(run(DType::i32, {5, -9}, -7).template to_vec<std::int32_t>(), (std::vector<std::int32_t>{-2, -16}));
  EXPECT_EQ(run(DType::i64, {5, -9}, -3e12).template to_vec<std::int64_t>(),
            (std::vector<std::int64_t>{5 - 3000000000000, -9 - 3000000000000}));
  EXPECT_EQ(run(DType::i64, {1, 2}, 5e12).template to_vec<std::int64_t>(),
            (std::vector<std::int64_t>{5000000000001, 5000000000002}));
  EXPECT_EQ(run(DType::u8, {3, 50}, 200).template to_vec<std::uint8_t>(), (std::vector<std::uint8_t>{203, 250}));
}

TYPED_TEST(Programs, EmptyInputsGiveEmptyOutputs) {
  using B = TypeParam;
  const Expr x = Expr::input(0);
  const Program program(ScalarType::f32, {DType::f32}, 0, {{x.exp().node(), DType::f32}});
  const std::array<typename B::Primitive, 1> inputs{provided::full<B>(Shape{0, 3}, 1.0, DType::f32, {})};
  const auto out = B::elementwise(program, inputs, {});
  EXPECT_EQ(B::shape(out[0]), (Shape{0, 3}));
}

TYPED_TEST(Programs, CallsThatDoNotMatchTheProgramAreErrors) {
  using B = TypeParam;
  const Expr a = Expr::input(0), b = Expr::input(1);
  const Program program(ScalarType::f32, {DType::f32, DType::f32}, 1, {{(a * b + Expr::param(0)).node(), DType::f32}});
  const auto f = upload<B>(values(DType::f32, 0));
  const auto d = upload<B>(values(DType::f64, 0));
  const auto wide = provided::full<B>(Shape{4, 5}, 1.0, DType::f32, {});
  const std::array<double, 1> one{1.0};
  const std::array<typename B::Primitive, 1> single{f};
  const std::array<typename B::Primitive, 2> mixed{f, d}, mismatched{f, wide}, good{f, f};
  EXPECT_KILN_ERROR(B::elementwise(program, single, one), "elementwise: the program takes 2 inputs, got 1");
  EXPECT_KILN_ERROR(B::elementwise(program, mixed, one), "elementwise: input 1 must be f32, got [4, 4] f64");
  EXPECT_KILN_ERROR(B::elementwise(program, good, {}), "elementwise: the program takes 1 parameters, got 0");
  EXPECT_KILN_ERROR(B::elementwise(program, mismatched, one), "elementwise: shapes [4, 4] and [4, 5] do not broadcast");
}

TEST(ProgramConstruction, TheDeclarationIsChecked) {
  const Expr x = Expr::input(0);
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {DType::f32}, 0, {}), "no outputs");
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {}, 0, {{x.node(), DType::f32}}), "in0 of 0 inputs");
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {DType::f64}, 0, {{x.node(), DType::f32}}), "in0 is f64");
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {DType::f32}, 0, {{(x * Expr::param(0)).node(), DType::f32}}),
                    "p0 of 0 parameters");
  EXPECT_KILN_ERROR(Program(ScalarType::i32, {DType::i32}, 0, {{x.exp().node(), DType::i32}}),
                    "exp needs a float type");
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {DType::f32}, 0, {{(x > x).node(), DType::f32}}), "output of dtype f32");
  // The key is the structure: shared subtrees once, constants by value, parameters by index.
  const Program twice(ScalarType::f32, {DType::f32}, 0, {{(x.exp() + x.exp()).node(), DType::f32}});
  EXPECT_EQ(twice.code().size(), 3u);  // in0, exp, add
  const Program half(ScalarType::f32, {DType::f32}, 0, {{(x * 0.5).node(), DType::f32}});
  const Program seven(ScalarType::f32, {DType::f32}, 0, {{(x * 0.7).node(), DType::f32}});
  EXPECT_NE(half.id(), seven.id());
}
