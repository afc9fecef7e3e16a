// The embedded CPU library's own products (kiln::cpu_embedded: no oneDNN; Eigen's GEMM, and
// Kiln's one-row product where a product has one row) under the flash-attention kernels,
// whose tiles accumulate inside the GEMM (C += A B): the f32 kernels against the same
// kernels in f64 (Eigen's dgemm, which tests/backend/attention_test.cpp holds to the
// composition), forward and backward, on sizes whose tiles have one row (L = 1 for the
// query tiles' products, S = 1 for the key tiles') and sizes past the tiles.
#include <kiln/cpu/backend.hpp>
#include <kiln/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace kiln;

namespace {

using T4 = Tensor<Cpu, 4>;

void expect_close(const Cpu::Primitive& f32, const Cpu::Primitive& f64, const char* what) {
  const std::vector<double> got = T4(f32).to_vec<double>(), want = T4(f64).to_vec<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::abs(want[i])) << what << " at " << i;
}

}  // namespace

TEST(EmbeddedAttention, F32TilesAgreeWithF64ForwardAndBackward) {
  struct Case {
    std::int64_t n, h, l, s, d, dv;
    bool causal;
  };
  manual_seed(21);
  for (const Case c : {Case{1, 2, 1, 1, 8, 8, false}, Case{2, 1, 1, 300, 16, 8, false}, Case{1, 2, 130, 1, 8, 16, false},
                       Case{1, 2, 300, 600, 16, 16, false}, Case{2, 2, 200, 200, 8, 8, true}}) {
    SCOPED_TRACE(testing::Message() << "N " << c.n << " H " << c.h << " L " << c.l << " S " << c.s << " causal "
                                    << c.causal);
    const auto q = T4::random({c.n, c.h, c.l, c.d}, Distribution::normal(0, 1)).primitive();
    const auto k = T4::random({c.n, c.h, c.s, c.d}, Distribution::normal(0, 1)).primitive();
    const auto v = T4::random({c.n, c.h, c.s, c.dv}, Distribution::normal(0, 1)).primitive();
    const auto dout = T4::random({c.n, c.h, c.l, c.dv}, Distribution::normal(0, 1)).primitive();
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    const auto wide = [](const Cpu::Primitive& x) { return Cpu::cast(x, DType::f64); };
    const auto [out, lse] = Cpu::attention(q, k, v, std::nullopt, c.causal, scale);
    const auto [out64, lse64] = Cpu::attention(wide(q), wide(k), wide(v), std::nullopt, c.causal, scale);
    expect_close(out, out64, "out");
    const auto grads = Cpu::attention_backward(q, k, v, std::nullopt, out, lse, dout, c.causal, scale);
    const auto grads64 =
        Cpu::attention_backward(wide(q), wide(k), wide(v), std::nullopt, out64, lse64, wide(dout), c.causal, scale);
    expect_close(grads[0], grads64[0], "dq");
    expect_close(grads[1], grads64[1], "dk");
    expect_close(grads[2], grads64[2], "dv");
  }
}
