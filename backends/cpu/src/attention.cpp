// Scaled-dot-product attention in flash-attention form. The forward pass walks tiles of
// queries against tiles of keys with an online softmax (each query row keeps its running
// max and sum, and rescales its accumulated output when the max grows), so the [L, S]
// weights never exist; the backward pass recomputes each tile's weights from q, k and the
// saved row log-sum-exp. The tensor API's composition (kiln/tensor/attention.hpp) is the
// reference these kernels are tested against (tests/backend/attention_test.cpp).
#include "gemm.hpp"
#include "internal.hpp"

#include "kiln/ops/attention.hpp"

#include <Eigen/Core>

#include <cmath>
#include <type_traits>
#include <limits>
#include <vector>

namespace kiln::cpu {
namespace {

// Tiles of 64 queries. The forward pass takes 256 keys at a time, so that its products are
// 64 x 256 x D and the online softmax rescales each row once per 256 keys (15% faster than
// 64 keys at L = S = 512, one thread), and runs them through the backend's GEMM (oneDNN's
// sgemm: 25% faster than Eigen's products on these tiles). The backward pass keeps 64 x 64
// tiles and Eigen's products: its dK and dV accumulators live per key tile, and smaller key
// tiles give its first pass more work items to share out.
constexpr std::int64_t kQueryTile = 64;
constexpr std::int64_t kForwardKeyTile = 256;
constexpr std::int64_t kKeyTile = 64;

template <class T> using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using ConstMap = Eigen::Map<const Matrix<T>>;
template <class T> using Map = Eigen::Map<Matrix<T>>;

// The problem: sizes of q [N, H, L, D], k [N, H, S, D], v [N, H, S, Dv], and the mask as
// bytes with its strides over [N, H, L, S] (0 along the dims it broadcasts).
struct Problem {
  std::int64_t n = 0, h = 0, l = 0, s = 0, d = 0, dv = 0;
  const bool* mask = nullptr;
  std::array<std::int64_t, 4> mask_strides{};
  bool causal = false;

  std::int64_t query_tiles() const { return (l + kQueryTile - 1) / kQueryTile; }
  std::int64_t key_tiles() const { return (s + kKeyTile - 1) / kKeyTile; }
  // The keys a query tile starting at i0 with `rows` rows may see: [0, end).
  std::int64_t key_end(std::int64_t i0, std::int64_t rows) const { return causal ? std::min(s, i0 + rows) : s; }
  // The first query a key tile starting at j0 is seen by (causal: query i sees keys j <= i).
  std::int64_t query_begin(std::int64_t j0) const { return causal ? j0 / kQueryTile * kQueryTile : 0; }
};

Problem problem(const CpuTensor& q, const CpuTensor& k, const CpuTensor& v, const std::optional<CpuTensor>& mask,
                bool causal) {
  Problem p{q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  p.causal = causal;
  if (mask) {
    p.mask = mask->data<bool>();
    std::int64_t stride = 1;
    for (std::size_t d = 4; d-- > 0;) {
      p.mask_strides[d] = mask->shape[d] == 1 ? 0 : stride;
      stride *= mask->shape[d];
    }
  }
  return p;
}

// Sets the scores of head bh's queries [i0, i0 + rows) against keys [j0, j0 + cols) that are
// masked (or, causal, in the future) to -inf.
template <class Scores>
void mask_tile(const Problem& p, std::int64_t bh, std::int64_t i0, std::int64_t j0, Scores& scores) {
  using T = typename Scores::Scalar;
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::int64_t rows = scores.rows(), cols = scores.cols();
  if (p.mask) {
    const auto& st = p.mask_strides;
    const bool* head = p.mask + bh / p.h * st[0] + bh % p.h * st[1] + j0 * st[3];
    for (std::int64_t r = 0; r < rows; ++r) {
      const bool* row = head + (i0 + r) * st[2];
      for (std::int64_t c = 0; c < cols; ++c)
        if (row[c * st[3]]) scores(r, c) = ninf;
    }
  }
  if (p.causal && j0 + cols - 1 > i0) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = std::max<std::int64_t>(0, i0 + r + 1 - j0); c < cols; ++c) scores(r, c) = ninf;
  }
}

// C [m, n] (rows ldc apart) = A [m, k] @ B [k, n] through the backend's GEMM (oneDNN's sgemm
// for f32 where it is built), on the calling thread: each takes a row-major layout or the
// transpose of one (GemmLayout).
template <class T>
void tile_gemm(GemmLayout a, GemmLayout b, std::int64_t m, std::int64_t n, std::int64_t k, const T* pa, const T* pb,
               T* pc, std::int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) gemm_f32(a, b, m, n, k, pa, pb, pc, ldc);
  else gemm_f64(a, b, m, n, k, pa, pb, pc, ldc);
}

// Forward: one work item per (head, query tile).
template <class T>
void attention_forward(const Problem& p, const T* q, const T* k, const T* v, T scale, T* out, T* lse) {
  const std::int64_t tiles = p.query_tiles();
  parallel_for(p.n * p.h * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    Matrix<T> scaled_q(kQueryTile, p.d), scores(kQueryTile, kForwardKeyTile), acc(kQueryTile, p.dv),
        product(kQueryTile, p.dv);
    std::vector<T> row_max(kQueryTile), row_sum(kQueryTile);
    T* const running_max = row_max.data();  // each row's running max and sum of exp(score - max)
    T* const running_sum = row_sum.data();
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bh = item / tiles, i0 = item % tiles * kQueryTile, rows = std::min(kQueryTile, p.l - i0);
      // The scale is applied to q once, not to every score.
      auto qt = scaled_q.topRows(rows);
      qt = ConstMap<T>(q + (bh * p.l + i0) * p.d, rows, p.d) * scale;
      auto o = acc.topRows(rows);
      o.setZero();
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      const std::int64_t key_end = p.key_end(i0, rows);
      for (std::int64_t j0 = 0; j0 < key_end; j0 += kForwardKeyTile) {
        const std::int64_t cols = std::min(kForwardKeyTile, key_end - j0);
        const ConstMap<T> kt(k + (bh * p.s + j0) * p.d, cols, p.d), vt(v + (bh * p.s + j0) * p.dv, cols, p.dv);
        auto st = scores.topLeftCorner(rows, cols);
        tile_gemm<T>({false, p.d}, {true, p.d}, rows, cols, p.d, scaled_q.data(), kt.data(), scores.data(),
                     kForwardKeyTile);
        mask_tile(p, bh, i0, j0, st);
        // Online softmax: rescale what the row holds by exp(old max - new max).
        for (std::int64_t r = 0; r < rows; ++r) {
          const T new_max = std::max(running_max[r], st.row(r).maxCoeff());
          if (new_max == -std::numeric_limits<T>::infinity()) {  // every key so far is hidden
            st.row(r).setZero();
            continue;
          }
          const T correction = std::exp(running_max[r] - new_max);
          st.row(r) = (st.row(r).array() - new_max).exp().matrix();
          running_sum[r] = running_sum[r] * correction + st.row(r).sum();
          if (correction != T(1)) o.row(r) *= correction;
          running_max[r] = new_max;
        }
        tile_gemm<T>({false, kForwardKeyTile}, {false, p.dv}, rows, p.dv, cols, scores.data(), vt.data(),
                     product.data(), p.dv);
        o += product.topRows(rows);
      }
      // A row that saw no key has a sum of 0: its output is 0 / 0 = NaN and its lse -inf, as
      // the composition's softmax over -inf gives.
      Map<T> ot(out + (bh * p.l + i0) * p.dv, rows, p.dv);
      for (std::int64_t r = 0; r < rows; ++r) {
        ot.row(r) = o.row(r) / running_sum[r];
        lse[bh * p.l + i0 + r] = running_max[r] + std::log(running_sum[r]);
      }
    }
  });
}

// The weights of one tile, recomputed: exp(q kᵀ · scale - lse) with the masked ones 0.
template <class Q, class K, class Scores>
void recompute_weights(const Problem& p, std::int64_t bh, std::int64_t i0, std::int64_t j0, const Q& qt, const K& kt,
                       const typename Scores::Scalar* lse, typename Scores::Scalar scale, Scores& st) {
  st.noalias() = qt * kt.transpose();
  st *= scale;
  mask_tile(p, bh, i0, j0, st);
  for (std::int64_t r = 0; r < st.rows(); ++r) st.row(r) = (st.row(r).array() - lse[r]).exp().matrix();
}

// Backward, in two passes so that each output has one writer: dK and dV per (head, key
// tile), over the query tiles; then dQ per (head, query tile), over the key tiles. Both
// recompute the weights P of each tile, and dS = P ∘ (dO vᵀ - δ) with δ = rowsum(dO ∘ O),
// the softmax gradient without the row of weights.
template <class T>
void attention_backward(const Problem& p, const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout,
                        T scale, T* dq, T* dk, T* dv) {
  const std::int64_t heads = p.n * p.h, rows_total = heads * p.l;
  std::vector<T> delta_rows(static_cast<std::size_t>(rows_total));
  T* const delta = delta_rows.data();
  parallel_for(rows_total, 256, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r)
      delta[r] = (ConstMap<T>(dout + r * p.dv, 1, p.dv).array() * ConstMap<T>(out + r * p.dv, 1, p.dv).array()).sum();
  });

  const std::int64_t key_tiles = p.key_tiles();
  parallel_for(heads * key_tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    Matrix<T> weights(kQueryTile, kKeyTile), grad(kQueryTile, kKeyTile), dk_acc(kKeyTile, p.d), dv_acc(kKeyTile, p.dv);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bh = item / key_tiles, j0 = item % key_tiles * kKeyTile, cols = std::min(kKeyTile, p.s - j0);
      const ConstMap<T> kt(k + (bh * p.s + j0) * p.d, cols, p.d), vt(v + (bh * p.s + j0) * p.dv, cols, p.dv);
      auto dkt = dk_acc.topRows(cols);
      auto dvt = dv_acc.topRows(cols);
      dkt.setZero();
      dvt.setZero();
      for (std::int64_t i0 = p.query_begin(j0); i0 < p.l; i0 += kQueryTile) {
        const std::int64_t rows = std::min(kQueryTile, p.l - i0), row0 = bh * p.l + i0;
        const ConstMap<T> qt(q + row0 * p.d, rows, p.d), dot(dout + row0 * p.dv, rows, p.dv);
        auto pt = weights.topLeftCorner(rows, cols);
        auto ds = grad.topLeftCorner(rows, cols);
        recompute_weights(p, bh, i0, j0, qt, kt, lse + row0, scale, pt);
        dvt.noalias() += pt.transpose() * dot;
        ds.noalias() = dot * vt.transpose();
        for (std::int64_t r = 0; r < rows; ++r)
          ds.row(r) = (pt.row(r).array() * (ds.row(r).array() - delta[row0 + r])).matrix();
        dkt.noalias() += ds.transpose() * qt;
      }
      Map<T>(dk + (bh * p.s + j0) * p.d, cols, p.d) = dkt * scale;
      Map<T>(dv + (bh * p.s + j0) * p.dv, cols, p.dv) = dvt;
    }
  });

  const std::int64_t query_tiles = p.query_tiles();
  parallel_for(heads * query_tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    Matrix<T> weights(kQueryTile, kKeyTile), grad(kQueryTile, kKeyTile), dq_acc(kQueryTile, p.d);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bh = item / query_tiles, i0 = item % query_tiles * kQueryTile;
      const std::int64_t rows = std::min(kQueryTile, p.l - i0), row0 = bh * p.l + i0;
      const ConstMap<T> qt(q + row0 * p.d, rows, p.d), dot(dout + row0 * p.dv, rows, p.dv);
      auto dqt = dq_acc.topRows(rows);
      dqt.setZero();
      const std::int64_t key_end = p.key_end(i0, rows);
      for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const std::int64_t cols = std::min(kKeyTile, key_end - j0);
        const ConstMap<T> kt(k + (bh * p.s + j0) * p.d, cols, p.d), vt(v + (bh * p.s + j0) * p.dv, cols, p.dv);
        auto pt = weights.topLeftCorner(rows, cols);
        auto ds = grad.topLeftCorner(rows, cols);
        recompute_weights(p, bh, i0, j0, qt, kt, lse + row0, scale, pt);
        ds.noalias() = dot * vt.transpose();
        for (std::int64_t r = 0; r < rows; ++r)
          ds.row(r) = (pt.row(r).array() * (ds.row(r).array() - delta[row0 + r])).matrix();
        dqt.noalias() += ds * kt;
      }
      Map<T>(dq + row0 * p.d, rows, p.d) = dqt * scale;
    }
  });
}

// The shared shape rule, naming `op`; the output's shape.
Shape check_inputs(std::string_view op, const CpuTensor& q, const CpuTensor& k, const CpuTensor& v,
                   const std::optional<CpuTensor>& mask) {
  return ops::check_attention(op, q.shape, q.dtype, k.shape, k.dtype, v.shape, v.dtype,
                              mask ? std::optional(mask->shape) : std::nullopt,
                              mask ? std::optional(mask->dtype) : std::nullopt);
}

// The problem over contiguous copies of the inputs (the inputs themselves where they are).
struct Contiguous {
  CpuTensor q, k, v;
  std::optional<CpuTensor> mask;
  Problem problem;
  Contiguous(const CpuTensor& q_, const CpuTensor& k_, const CpuTensor& v_, const std::optional<CpuTensor>& mask_,
             bool causal)
      : q(contiguous(q_)), k(contiguous(k_)), v(contiguous(v_)) {
    if (mask_) mask = contiguous(*mask_);
    problem = cpu::problem(q, k, v, mask, causal);
  }
};

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

std::pair<Cpu::Primitive, Cpu::Primitive> Cpu::attention(const Primitive& q, const Primitive& k, const Primitive& v,
                                                          const std::optional<Primitive>& mask, bool causal,
                                                          double scale) {
  const Shape out_shape = cpu::check_inputs("attention", q, k, v, mask);
  // f16 / bf16 compute in f32 and round once; lse stays f32.
  if (!cpu::is_native_float(q.dtype)) {
    auto [out, lse] = attention(cast(q, DType::f32), cast(k, DType::f32), cast(v, DType::f32), mask, causal, scale);
    return {cast(out, q.dtype), std::move(lse)};
  }
  CpuTensor out = cpu::empty(out_shape, q.dtype);
  CpuTensor lse = cpu::empty(Shape{q.shape[0], q.shape[1], q.shape[2]}, q.dtype);
  if (lse.numel() == 0) return {out, lse};
  const cpu::Contiguous in(q, k, v, mask, causal);
  cpu::dispatch_float("attention", q.dtype, [&]<class T>() {
    cpu::attention_forward<T>(in.problem, in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), static_cast<T>(scale),
                              out.data<T>(), lse.data<T>());
  });
  return {out, lse};
}

std::array<Cpu::Primitive, 3> Cpu::attention_backward(const Primitive& q, const Primitive& k, const Primitive& v,
                                                       const std::optional<Primitive>& mask, const Primitive& out,
                                                       const Primitive& lse, const Primitive& dout, bool causal,
                                                       double scale) {
  const Shape out_shape = cpu::check_inputs("attention_backward", q, k, v, mask);
  KILN_CHECK(out.shape == out_shape && dout.shape == out_shape && out.dtype == q.dtype && dout.dtype == q.dtype,
             "attention_backward: out {} ({}) and dout {} ({}) must be {} ({})", out.shape, out.dtype, dout.shape,
             dout.dtype, out_shape, q.dtype);
  KILN_CHECK(lse.shape == Shape({q.shape[0], q.shape[1], q.shape[2]}),
             "attention_backward: lse {} must be [N, H, L] for q {}", lse.shape, q.shape);
  if (!cpu::is_native_float(q.dtype)) {
    const DType f32 = DType::f32;
    auto grads = attention_backward(cast(q, f32), cast(k, f32), cast(v, f32), mask, cast(out, f32), cast(lse, f32),
                                    cast(dout, f32), causal, scale);
    for (auto& g : grads) g = cast(g, q.dtype);
    return grads;
  }
  CpuTensor dq = cpu::empty(q.shape, q.dtype), dk = cpu::empty(k.shape, q.dtype), dv = cpu::empty(v.shape, q.dtype);
  const cpu::Contiguous in(q, k, v, mask, causal);
  const CpuTensor outc = cpu::contiguous(out), lsec = cpu::contiguous(cast(lse, q.dtype)), doutc = cpu::contiguous(dout);
  cpu::dispatch_float("attention_backward", q.dtype, [&]<class T>() {
    cpu::attention_backward<T>(in.problem, in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), outc.data<T>(), lsec.data<T>(),
                               doutc.data<T>(), static_cast<T>(scale), dq.data<T>(), dk.data<T>(), dv.data<T>());
  });
  return {dq, dk, dv};
}

}  // namespace kiln
