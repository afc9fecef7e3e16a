// Conformance: elementwise ops against PyTorch golden values (tests/golden/gen_elementwise.py).
#include "backends.hpp"
#include "golden.hpp"

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Elementwise);

TYPED_TEST(Elementwise, ExpMatchesTorchInF32AndF64) {
  using B = TypeParam;
  const auto& c = golden("elementwise", "exp");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.exp(), c["out"], dtype == DType::f32 ? 1e-5 : 1e-12);
  }
}

TYPED_TEST(Elementwise, AddBroadcastsSizeOneAndMissingDims) {
  using B = TypeParam;
  const auto& c = golden("elementwise", "add_broadcast");
  const auto a = c.tensor<B, 3>("a");
  const auto b = c.tensor<B, 2>("b").template unsqueeze<3>();
  EXPECT_CLOSE(a + b, c["out"]);
}

TYPED_TEST(Elementwise, AddRejectsShapesThatDoNotBroadcast) {
  using B = TypeParam;
  const auto a = Tensor<B, 2>::zeros({2, 3});
  const auto b = Tensor<B, 2>::zeros({4, 3});
  EXPECT_KILN_ERROR(a + b, "add: shapes [2, 3] and [4, 3] do not broadcast");
}
