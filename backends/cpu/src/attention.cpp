// Scaled-dot-product attention in flash-attention form. The forward pass walks tiles of
// queries against tiles of keys with an online softmax (each query row keeps its running
// max and sum, and rescales its accumulated output when the max grows), so the [L, S]
// weights never exist; the backward pass recomputes each tile's weights from q, k and the
// saved row log-sum-exp. Both read their operands where they lie when each row is
// contiguous (Rows below). The tensor API's composition (kiln/tensor/attention.hpp) is the
// reference these kernels are tested against (tests/backend/attention_test.cpp).
#include "elementwise_kernels.hpp"
#include "gemm.hpp"
#include "internal.hpp"

#include "kiln/ops/attention.hpp"

#include <Eigen/Core>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace kiln::cpu {
namespace {

// Tile sizes, measured at L = S = 512 and 2048, D = 64 (docs/benchmarks.md). The forward
// pass takes 256 queries against 512 keys at a time (4 % faster than 128 x 256 on an
// AVX-512 Xeon: fewer, larger products, and each row's weights in fewer passes), so that
// its products are 256 x 512 x D and 256 x Dv x 512, run through the backend's GEMM
// (oneDNN's sgemm: 25% faster than Eigen's products on these tiles); its scores, 512 KiB,
// stay in L2. The backward pass takes 256 queries against 128 keys (3-4 % faster than 128 x
// 128 there; 128 keys were 10% faster than 64 on a Zen core): its dK and dV accumulators
// live per key tile, and smaller key tiles give it more work items to share out. Everything
// here is an online softmax over tiles: correct for any sizes.
constexpr std::int64_t kForwardQueryTile = 256;
constexpr std::int64_t kQueryTile = 256;  // backward
constexpr std::int64_t kForwardKeyTile = 512;
constexpr std::int64_t kKeyTile = 128;  // backward
// How far a tile's max may pass a row's shift before the shift moves (forward pass).
constexpr double kShiftSlack = 8;

template <class T> using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using ConstMap = Eigen::Map<const Matrix<T>>;
template <class T> using Map = Eigen::Map<Matrix<T>>;
// Rows `ld` elements apart.
template <class T> using ConstRowsMap = Eigen::Map<const Matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T> using RowsMap = Eigen::Map<Matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Where the rows of a [N, H, len, width] operand lie: row i of head bh (= n H + h) starts
// n_stride n + h_stride h + ld i elements into its data, and each row is contiguous. The
// kernels read and write the operands through these, so that heads cut out of [N, len, H,
// width] rows (nn::MultiHeadAttention's projections, permuted) need no copy, and the
// outputs can be laid out that way too.
struct Rows {
  std::int64_t n_stride = 0, h_stride = 0, ld = 0;
};

// The problem: sizes of q [N, H, L, D], k [N, H, S, D], v [N, H, S, Dv], where the rows of
// each operand lie, and the mask as bytes with its strides over [N, H, L, S] (0 along the
// dims it broadcasts).
struct Problem {
  std::int64_t n = 0, h = 0, l = 0, s = 0, d = 0, dv = 0;
  Rows q, k, v, out;     // the inputs and the output (read again by the backward pass)
  Rows d_out, d_q, d_k, d_v;  // the backward pass's: dout, and the gradients of q, k and v
  const bool* mask = nullptr;
  std::array<std::int64_t, 4> mask_strides{};
  bool causal = false;

  // The offset of head bh's first row in an operand laid out as `rows`.
  std::int64_t head(const Rows& rows, std::int64_t bh) const { return bh / h * rows.n_stride + bh % h * rows.h_stride; }

  std::int64_t query_tiles() const { return (l + kForwardQueryTile - 1) / kForwardQueryTile; }
  std::int64_t key_tiles() const { return (s + kKeyTile - 1) / kKeyTile; }
  // The keys a query tile starting at i0 with `rows` rows may see: [0, end).
  std::int64_t key_end(std::int64_t i0, std::int64_t rows) const { return causal ? std::min(s, i0 + rows) : s; }
  // The first query a key tile starting at j0 is seen by (causal: query i sees keys j <= i).
  std::int64_t query_begin(std::int64_t j0) const { return causal ? j0 / kQueryTile * kQueryTile : 0; }
};

// The rows of x [N, H, len, width], whose rows are contiguous (rows_in_place).
Rows rows_of(const CpuTensor& x) {
  return {x.strides[0], x.strides[1], x.shape[2] > 1 ? x.strides[2] : x.shape[3]};
}

// Whether x's rows can be read where they lie: each contiguous, none overlapping the next.
bool rows_in_place(const CpuTensor& x) {
  return (x.shape[3] <= 1 || x.strides[3] == 1) && (x.shape[2] <= 1 || x.strides[2] >= x.shape[3]) &&
         x.strides[0] >= 0 && x.strides[1] >= 0;
}

Problem problem(const CpuTensor& q, const CpuTensor& k, const CpuTensor& v, const std::optional<CpuTensor>& mask,
                bool causal) {
  Problem p{q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  p.q = rows_of(q);
  p.k = rows_of(k);
  p.v = rows_of(v);
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

// exp(x) for the attention weights, where x = score - (row max or lse) <= 0 up to rounding:
// on AVX-512, ten instructions instead of Simd::exp's fifteen (the forward pass at 2048 keys
// spent 12 % of its time in exp): no upper clamp (x never overflows), n = round(x log2 e) by
// adding and subtracting 1.5 · 2^23, one-constant range reduction (its error, n · 1.5e-9,
// grows with -x), and a degree-5 polynomial fitted for relative error on |r| <= ln 2 / 2.
// Measured against exp in double over 4M points: at most 1.7e-7 relative (2.1 ulp) on
// [-1, 0], 2.2e-7 (2.6 ulp) on [-20, 0], 4e-7 (4.9 ulp) down to -87 (Simd::exp: within 1
// ulp). -inf and anything below -104 give exactly 0 (2^-150 rounds to 0), NaN stays NaN.
// Elsewhere (doubles, narrower vectors) it is Simd::exp.
template <class T> KILN_INLINE Simd<T> weight_exp(const Simd<T>& x) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && sizeof(typename Simd<T>::Packet) == 64) {
    const __m512 xc = _mm512_max_ps(_mm512_set1_ps(-104.0f), x.v);  // NaN in x passes through
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), shifter), shifter);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182f), xc);
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(8.312525e-3f), r, _mm512_set1_ps(4.1890115e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6667114e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.999923e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    return Simd<T>::of(_mm512_scalef_ps(y, n));
  }
#endif
  return x.exp();
}

// row[i] = exp(row[i] - shift) for the n weights of a row (weight_exp), and their sum; with
// kMax, also *max = the max of the row's scores before they are overwritten, in the same pass.
template <bool kMax, class T> T shifted_weights(T* row, T shift, std::int64_t n, T* max = nullptr) {
  using namespace Eigen::internal;
  constexpr std::int64_t W = Simd<T>::width;
  const Simd<T> s = Simd<T>::broadcast(shift);
  Simd<T> a0 = Simd<T>::broadcast(T(0)), a1 = a0;
  auto m0 = pset1<typename Simd<T>::Packet>(-std::numeric_limits<T>::infinity()), m1 = m0;
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const Simd<T> x0 = Simd<T>::load(row + i), x1 = Simd<T>::load(row + i + W);
    if constexpr (kMax) {
      m0 = pmax(m0, x0.v);
      m1 = pmax(m1, x1.v);
    }
    const Simd<T> e0 = weight_exp(x0 - s), e1 = weight_exp(x1 - s);
    e0.store(row + i);
    e1.store(row + i + W);
    a0 = a0 + e0;
    a1 = a1 + e1;
  }
  T sum = predux((a0 + a1).v);
  if constexpr (kMax) *max = predux_max(pmax(m0, m1));
  for (; i < n; ++i) {
    if constexpr (kMax) *max = std::max(*max, row[i]);
    sum += row[i] = std::exp(row[i] - shift);
  }
  return sum;
}

// Sets the entries of head bh's queries [i0, i0 + rows) against keys [j0, j0 + cols) that are
// masked (or, causal, in the future) to `hidden`: -inf in scores, 0 in weights.
template <class Scores>
void mask_tile(const Problem& p, std::int64_t bh, std::int64_t i0, std::int64_t j0, Scores& scores,
               typename Scores::Scalar hidden) {
  const std::int64_t rows = scores.rows(), cols = scores.cols();
  if (p.mask) {
    const auto& st = p.mask_strides;
    const bool* head = p.mask + bh / p.h * st[0] + bh % p.h * st[1] + j0 * st[3];
    for (std::int64_t r = 0; r < rows; ++r) {
      const bool* row = head + (i0 + r) * st[2];
      for (std::int64_t c = 0; c < cols; ++c)
        if (row[c * st[3]]) scores(r, c) = hidden;
    }
  }
  if (p.causal && j0 + cols - 1 > i0) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = std::max<std::int64_t>(0, i0 + r + 1 - j0); c < cols; ++c) scores(r, c) = hidden;
  }
}

// C [m, n] (rows ldc apart) = A [m, k] @ B [k, n], or C += A @ B where `accumulate`, through
// the backend's GEMM (oneDNN's sgemm for f32 where it is built), on the calling thread: each
// takes a row-major layout or the transpose of one (GemmLayout). Accumulating in the GEMM
// spares the tile a product buffer and a pass adding it in: in the backward pass at 2048
// keys those additions were a third of the time outside the products.
template <class T>
void tile_gemm(GemmLayout a, GemmLayout b, std::int64_t m, std::int64_t n, std::int64_t k, const T* pa, const T* pb,
               T* pc, std::int64_t ldc, bool accumulate = false) {
  if (k == 0) {  // an empty sum: zeros (or C as it is), which a GEMM given k = 0 need not write
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(pc + i * ldc, pc + i * ldc + n, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) repeated_gemm_f32(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
  else gemm_f64(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}

// Forward: one work item per (head, query tile). The first key tile's product P V is written,
// not added, so the accumulator is never cleared; where that tile is the only one (every key
// at once, as at 128 or 512 keys), it goes straight into the output rows, which are then
// scaled by 1 / sum in place: no accumulator and no pass copying it out. Rows are scaled by
// the reciprocal of their sum: a profile at 128 keys had put ~9 % of this kernel's own time
// in the division pass. On a noisy 2-core AVX-512 VM the 128-key row's time moved within its
// run-to-run spread (docs/benchmarks.md, the tenth session of 2026-12-07).
template <class T>
void attention_forward(const Problem& p, const T* q, const T* k, const T* v, T scale, T* out, T* lse) {
  const std::int64_t tiles = p.query_tiles();
  parallel_for(p.n * p.h * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    Matrix<T> scaled_q(kForwardQueryTile, p.d), scores(kForwardQueryTile, kForwardKeyTile), acc;
    std::vector<T> row_shift(kForwardQueryTile), row_sum(kForwardQueryTile);
    T* const running_shift = row_shift.data();  // each row's shift and sum of exp(score - shift)
    T* const running_sum = row_sum.data();
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bh = item / tiles, i0 = item % tiles * kForwardQueryTile,
                         rows = std::min(kForwardQueryTile, p.l - i0);
      // The scale is applied to q once, not to every score.
      auto qt = scaled_q.topRows(rows);
      qt = ConstRowsMap<T>(q + p.head(p.q, bh) + i0 * p.q.ld, rows, p.d, Eigen::OuterStride<>(p.q.ld)) * scale;
      T* const out_rows = out + p.head(p.out, bh) + i0 * p.out.ld;
      const std::int64_t key_end = p.key_end(i0, rows);
      // P V accumulates here: the output rows themselves where one key tile covers every key.
      const bool one_tile = key_end <= kForwardKeyTile;
      if (!one_tile && acc.size() == 0) acc.resize(kForwardQueryTile, p.dv);
      T* const o = one_tile ? out_rows : acc.data();
      const std::int64_t o_ld = one_tile ? p.out.ld : p.dv;
      std::fill(row_shift.begin(), row_shift.end(), -std::numeric_limits<T>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      for (std::int64_t j0 = 0; j0 < key_end; j0 += kForwardKeyTile) {
        const std::int64_t cols = std::min(kForwardKeyTile, key_end - j0);
        const T* const kt = k + p.head(p.k, bh) + j0 * p.k.ld;
        const T* const vt = v + p.head(p.v, bh) + j0 * p.v.ld;
        auto st = scores.topLeftCorner(rows, cols);
        tile_gemm<T>({false, p.d}, {true, p.k.ld}, rows, cols, p.d, scaled_q.data(), kt, scores.data(), kForwardKeyTile);
        mask_tile(p, bh, i0, j0, st, -std::numeric_limits<T>::infinity());
        // Online softmax: each row's weights are exp(score - shift), its shift a max of its
        // scores so far. A row with a shift takes its weights and the tile's max in one pass,
        // and keeps its shift unless the tile's max passes it by more than kShiftSlack (then
        // its scores, overwritten by that pass, are recomputed): the weights stay below
        // e^kShiftSlack, and a separate pass for each tile's max is spared (5 % of the time
        // at 2048 keys). When the shift moves, what the row holds is rescaled by exp(old - new)
        // (from the second key tile on: the first one's product is written over the rows).
        for (std::int64_t r = 0; r < rows; ++r) {
          T* const row = &st(r, 0);
          const T shift = running_shift[r];
          if (shift != -std::numeric_limits<T>::infinity()) {
            T tile_max;
            const T sum = shifted_weights<true>(row, shift, cols, &tile_max);
            if (!(tile_max > shift + T(kShiftSlack))) {
              running_sum[r] += sum;
              continue;
            }
            st.row(r).noalias() = qt.row(r) * ConstRowsMap<T>(kt, cols, p.d, Eigen::OuterStride<>(p.k.ld)).transpose();
            auto scores_row = st.middleRows(r, 1);
            mask_tile(p, bh, i0 + r, j0, scores_row, -std::numeric_limits<T>::infinity());
          }
          const T new_shift = std::max(shift, st.row(r).maxCoeff());
          if (new_shift == -std::numeric_limits<T>::infinity()) {  // every key so far is hidden
            st.row(r).setZero();
            continue;
          }
          const T correction = std::exp(shift - new_shift);
          running_sum[r] = running_sum[r] * correction + shifted_weights<false>(row, new_shift, cols);
          if (j0 > 0 && correction != T(1)) RowsMap<T>(o + r * o_ld, 1, p.dv, Eigen::OuterStride<>(o_ld)) *= correction;
          running_shift[r] = new_shift;
        }
        tile_gemm<T>({false, kForwardKeyTile}, {false, p.v.ld}, rows, p.dv, cols, scores.data(), vt, o, o_ld,
                     /*accumulate=*/j0 > 0);
      }
      // A row that saw no key has a sum of 0: its output is 0 · (1 / 0) = NaN and its lse
      // -inf, as the composition's softmax over -inf gives. (With no key at all, no product
      // wrote the rows: they are zeroed first.)
      RowsMap<T> ot(out_rows, rows, p.dv, Eigen::OuterStride<>(p.out.ld));
      if (key_end == 0) ot.setZero();
      for (std::int64_t r = 0; r < rows; ++r) {
        const T by = T(1) / running_sum[r];
        if (one_tile) ot.row(r) *= by;
        else ot.row(r) = RowsMap<T>(o + r * o_ld, 1, p.dv, Eigen::OuterStride<>(o_ld)) * by;
        lse[bh * p.l + i0 + r] = running_shift[r] + std::log(running_sum[r]);
      }
    }
  });
}

// The weights of one tile, recomputed: exp(q kᵀ · scale - lse) with the masked ones 0, into
// st (a block of rows x cols whose rows are st.outerStride() apart). Scale, shift and exp
// are one pass over the tile, and the masked weights are zeroed after it: masking the
// scores to -inf first would give exp(-inf · scale) = inf, not 0, for a scale <= 0.
template <class T, class Scores>
void recompute_weights(const Problem& p, std::int64_t bh, std::int64_t i0, std::int64_t j0, const T* qt, const T* kt,
                       const T* lse, T scale, Scores& st) {
  tile_gemm<T>({false, p.q.ld}, {true, p.k.ld}, st.rows(), st.cols(), p.d, qt, kt, st.data(), st.outerStride());
  constexpr std::int64_t W = Simd<T>::width;
  const std::int64_t cols = st.cols();
  const Simd<T> by = Simd<T>::broadcast(scale);
  for (std::int64_t r = 0; r < st.rows(); ++r) {
    T* const row = &st(r, 0);
    const Simd<T> shift = Simd<T>::broadcast(lse[r]);
    std::int64_t c = 0;
    for (; c + W <= cols; c += W) weight_exp(Simd<T>::load(row + c) * by - shift).store(row + c);
    for (; c < cols; ++c) row[c] = std::exp(row[c] * scale - lse[r]);
  }
  mask_tile(p, bh, i0, j0, st, T(0));
}

// Backward, one pass over (head, key tile) work items (flash-attention 2's order): each
// recomputes the weights P of its key tile against every query tile that sees it, and with
// dS = P ∘ (dO vᵀ - δ), δ = rowsum(dO ∘ O) (the softmax gradient without the row of weights),
// accumulates dV += Pᵀ dO and dK += dSᵀ q for its keys and dQ += dS k for the queries. dQ rows
// take contributions from every key tile, so each thread adds them into its own buffer over
// the heads its items cover, and the buffers are summed after: five tile products per tile
// pair, where recomputing dQ in a second pass took seven.
template <class T>
void attention_backward(const Problem& p, const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout,
                        T scale, T* dq, T* dk, T* dv) {
  const std::int64_t heads = p.n * p.h, rows_total = heads * p.l;
  std::vector<T> delta_rows(static_cast<std::size_t>(rows_total));
  T* const delta = delta_rows.data();
  parallel_for(rows_total, 256, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t bh = r / p.l, i = r % p.l;
      delta[r] = (ConstMap<T>(dout + p.head(p.d_out, bh) + i * p.d_out.ld, 1, p.dv).array() *
                  ConstMap<T>(out + p.head(p.out, bh) + i * p.out.ld, 1, p.dv).array())
                     .sum();
    }
  });

  const std::int64_t key_tiles = p.key_tiles(), items = heads * key_tiles, head_size = p.l * p.d;
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min<std::int64_t>(items, prepare_team()));
  auto block_items = [&](std::int64_t b) { return std::pair{items * b / blocks, items * (b + 1) / blocks}; };
  // dQ of a head whose key tiles all fall in one block accumulates in dq itself (zeroed at its
  // first key tile, scaled after its last). A head split between blocks (at most the first and
  // the last of each block) accumulates in a buffer of that block's, summed after. So the
  // temporary memory is a few heads' dQ, not a whole dQ's worth of buffers and a pass summing
  // them (the same speed on the transformer layer's step; 32 MiB less for f32 heads of 2048 x 64, batch 8 x 8).
  struct Partial {
    std::int64_t head = 0;
    std::vector<T> rows;  // [L, D]
  };
  std::vector<std::vector<Partial>> partials(static_cast<std::size_t>(blocks));
  if (items == 0)  // no keys: no work items, and a dQ of zeros
    for (std::int64_t bh = 0; bh < heads; ++bh)
      RowsMap<T>(dq + p.head(p.d_q, bh), p.l, p.d, Eigen::OuterStride<>(p.d_q.ld)).setZero();
  parallel_for(blocks, 1, [&](std::int64_t block_begin, std::int64_t block_end) {
    // dK and dV of the key tile accumulate transposed, [D, keys]: oneDNN runs dOᵀ P and qᵀ dS,
    // wide, faster than Pᵀ dO and dSᵀ q, tall (one thread, 256 queries x 128 keys x 64:
    // 155-158 GFLOP/s against 132-148).
    Matrix<T> weights(kQueryTile, kKeyTile), grad(kQueryTile, kKeyTile), dk_acc(p.d, kKeyTile), dv_acc(p.dv, kKeyTile);
    for (std::int64_t b = block_begin; b < block_end; ++b) {
      const auto [begin, end] = block_items(b);
      std::vector<Partial>& split = partials[static_cast<std::size_t>(b)];
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t bh = item / key_tiles, j0 = item % key_tiles * kKeyTile, cols = std::min(kKeyTile, p.s - j0);
        const bool owned = bh * key_tiles >= begin && (bh + 1) * key_tiles <= end;
        T* dq_head = dq + p.head(p.d_q, bh);
        std::int64_t dq_ld = p.d_q.ld;
        if (owned && j0 == 0) {
          RowsMap<T>(dq_head, p.l, p.d, Eigen::OuterStride<>(dq_ld)).setZero();
        } else if (!owned) {
          if (split.empty() || split.back().head != bh)
            split.push_back({bh, std::vector<T>(static_cast<std::size_t>(head_size), T(0))});
          dq_head = split.back().rows.data();
          dq_ld = p.d;
        }
        const T* const kt = k + p.head(p.k, bh) + j0 * p.k.ld;
        const T* const vt = v + p.head(p.v, bh) + j0 * p.v.ld;
        auto dkt = dk_acc.leftCols(cols);
        auto dvt = dv_acc.leftCols(cols);
        dkt.setZero();
        dvt.setZero();
        for (std::int64_t i0 = p.query_begin(j0); i0 < p.l; i0 += kQueryTile) {
          const std::int64_t rows = std::min(kQueryTile, p.l - i0), row0 = bh * p.l + i0;
          const T* const qt = q + p.head(p.q, bh) + i0 * p.q.ld;
          const T* const dot = dout + p.head(p.d_out, bh) + i0 * p.d_out.ld;
          auto pt = weights.topLeftCorner(rows, cols);
          auto ds = grad.topLeftCorner(rows, cols);
          recompute_weights(p, bh, i0, j0, qt, kt, lse + row0, scale, pt);
          // dVᵀ += dOᵀ P; dP = dO Vᵀ; dS = P ∘ (dP - δ); dKᵀ += qᵀ dS; dQ += dS K (both scaled at the end)
          tile_gemm<T>({true, p.d_out.ld}, {false, kKeyTile}, p.dv, cols, rows, dot, pt.data(), dv_acc.data(), kKeyTile,
                       /*accumulate=*/true);
          tile_gemm<T>({false, p.d_out.ld}, {true, p.v.ld}, rows, cols, p.dv, dot, vt, ds.data(), kKeyTile);
          for (std::int64_t r = 0; r < rows; ++r)
            ds.row(r) = (pt.row(r).array() * (ds.row(r).array() - delta[row0 + r])).matrix();
          tile_gemm<T>({true, p.q.ld}, {false, kKeyTile}, p.d, cols, rows, qt, ds.data(), dk_acc.data(), kKeyTile,
                       /*accumulate=*/true);
          tile_gemm<T>({false, kKeyTile}, {false, p.k.ld}, rows, p.d, cols, ds.data(), kt, dq_head + i0 * dq_ld, dq_ld,
                       /*accumulate=*/true);
        }
        RowsMap<T>(dk + p.head(p.d_k, bh) + j0 * p.d_k.ld, cols, p.d, Eigen::OuterStride<>(p.d_k.ld)) =
            dkt.transpose() * scale;
        RowsMap<T>(dv + p.head(p.d_v, bh) + j0 * p.d_v.ld, cols, p.dv, Eigen::OuterStride<>(p.d_v.ld)) = dvt.transpose();
        if (owned && item % key_tiles == key_tiles - 1)
          RowsMap<T>(dq_head, p.l, p.d, Eigen::OuterStride<>(dq_ld)) *= scale;
      }
    }
  });

  // dQ of each split head: the sum of its blocks' buffers, scaled.
  std::vector<std::int64_t> split_heads;
  for (const auto& block : partials)
    for (const Partial& part : block)
      if (split_heads.empty() || split_heads.back() != part.head) split_heads.push_back(part.head);
  parallel_for(static_cast<std::int64_t>(split_heads.size()), 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) {
      const std::int64_t bh = split_heads[static_cast<std::size_t>(i)];
      RowsMap<T> dqh(dq + p.head(p.d_q, bh), p.l, p.d, Eigen::OuterStride<>(p.d_q.ld));
      dqh.setZero();
      for (const auto& block : partials)
        for (const Partial& part : block)
          if (part.head == bh) dqh += ConstMap<T>(part.rows.data(), p.l, p.d);
      dqh *= scale;
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

// An operand as the kernels read it: x itself where its rows lie in place, else a copy.
CpuTensor readable(const CpuTensor& x) { return rows_in_place(x) ? x : contiguous(x); }

// A fresh tensor of `shape` [N, H, len, width] laid out as `like` [N, H, len, ...] is: where
// like's heads lie within its rows (heads cut out of [N, len, H * width] projections and
// permuted, as nn::MultiHeadAttention's are), as [N, len, H, width] permuted, so that the
// output over such heads and their gradients go back to [N, len, H * width] without a copy
// (PyTorch's CPU attention lays its output out the same way); else contiguous.
CpuTensor empty_like_heads(const CpuTensor& like, const Shape& shape) {
  const bool heads_in_rows = like.shape[1] > 1 && like.shape[2] > 1 && like.strides[1] < like.strides[2];
  if (!heads_in_rows) return empty(shape, like.dtype);
  const CpuTensor rows = empty(Shape{shape[0], shape[2], shape[1], shape[3]}, like.dtype);
  return view_of(rows, shape, Strides{rows.strides[0], rows.strides[2], rows.strides[1], rows.strides[3]}, 0);
}

// The problem over the inputs as the kernels read them.
struct Inputs {
  CpuTensor q, k, v;
  std::optional<CpuTensor> mask;
  Problem problem;
  Inputs(const CpuTensor& q_, const CpuTensor& k_, const CpuTensor& v_, const std::optional<CpuTensor>& mask_,
         bool causal)
      : q(readable(q_)), k(readable(k_)), v(readable(v_)) {
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
  CpuTensor out = cpu::empty_like_heads(q, out_shape);
  CpuTensor lse = cpu::empty(Shape{q.shape[0], q.shape[1], q.shape[2]}, q.dtype);
  if (lse.numel() == 0) return {out, lse};
  cpu::Inputs in(q, k, v, mask, causal);
  in.problem.out = cpu::rows_of(out);
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
  CpuTensor dq = cpu::empty_like_heads(q, q.shape), dk = cpu::empty_like_heads(k, k.shape),
            dv = cpu::empty_like_heads(v, v.shape);
  cpu::Inputs in(q, k, v, mask, causal);
  const CpuTensor outc = cpu::readable(out), lsec = cpu::contiguous(cast(lse, q.dtype)), doutc = cpu::readable(dout);
  cpu::Problem& p = in.problem;
  p.out = cpu::rows_of(outc);
  p.d_out = cpu::rows_of(doutc);
  p.d_q = cpu::rows_of(dq);
  p.d_k = cpu::rows_of(dk);
  p.d_v = cpu::rows_of(dv);
  cpu::dispatch_float("attention_backward", q.dtype, [&]<class T>() {
    cpu::attention_backward<T>(in.problem, in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), outc.data<T>(), lsec.data<T>(),
                               doutc.data<T>(), static_cast<T>(scale), dq.data<T>(), dk.data<T>(), dv.data<T>());
  });
  return {dq, dk, dv};
}

}  // namespace kiln
