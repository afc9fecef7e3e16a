// Reductions (sum, prod, max, min, mean over one dim or all elements), arg-reductions
// and cumulative scans on the CPU. Each kernel sees its input as [outer, n, inner] with
// the reduced dim in the middle, so both "last dim" and "middle dim" run as unit-stride loops.
#include "internal.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kiln::cpu {
namespace {

using ops::ReduceOp;

using ops::keep_dim;
using ops::split_at;
using Split = ops::DimSplit;

// Tuning: columns of a [n, inner] block handled together (the accumulators stay in L1),
// rows summed linearly before pairwise combination, elements per work item along n when n
// is split, elements per thread at least, and the fewest work items that need no split.
constexpr std::int64_t kTile = 512;
constexpr std::int64_t kRowLeaf = 32;
constexpr std::int64_t kLeaf = 1024;
constexpr std::int64_t kPart = 32768;
constexpr std::int64_t kGrainElements = 65536;
constexpr std::int64_t kMinItems = 32;

// ---- op policies: identity and one accumulation step on the accumulator type A
template <class A> struct SumStep {
  static constexpr bool pairwise = true;
  static A identity() { return A(0); }
  static A step(A acc, A x) { return acc + x; }
};
template <class A> struct ProdStep {
  static constexpr bool pairwise = false;
  static A identity() { return A(1); }
  static A step(A acc, A x) { return acc * x; }
};
// max/min propagate NaN: once the accumulator is NaN every comparison is false and it stays.
template <class A> struct MaxStep {
  static constexpr bool pairwise = false;
  static A identity() {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  static A step(A acc, A x) {
    if constexpr (std::is_floating_point_v<A>) return (x > acc || x != x) ? x : acc;
    else return x > acc ? x : acc;
  }
};
template <class A> struct MinStep {
  static constexpr bool pairwise = false;
  static A identity() {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  static A step(A acc, A x) {
    if constexpr (std::is_floating_point_v<A>) return (x < acc || x != x) ? x : acc;
    else return x < acc ? x : acc;
  }
};

// Independent accumulators per run: enough for several vector registers (a 4-byte max needs
// 32 lanes to vectorize well; 8-byte accumulators do with 16, at less compile time).
template <class A> constexpr int lane_count = sizeof(A) >= 8 ? 16 : 32;

// Reduces a contiguous run with independent lanes (vectorizable, and shorter dependency chains).
template <class Op, class A, class T> A reduce_run(const T* __restrict p, std::int64_t n) {
  constexpr int kLanes = lane_count<A>;
  if (n < 2 * kLanes) {
    A acc = Op::identity();
    for (std::int64_t i = 0; i < n; ++i) acc = Op::step(acc, static_cast<A>(p[i]));
    return acc;
  }
  A lanes[kLanes], more[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = more[k] = Op::identity();
  std::int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes)
    for (int k = 0; k < kLanes; ++k) {
      lanes[k] = Op::step(lanes[k], static_cast<A>(p[i + k]));
      more[k] = Op::step(more[k], static_cast<A>(p[i + kLanes + k]));
    }
  for (int k = 0; k < kLanes; ++k) lanes[k] = Op::step(lanes[k], more[k]);
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = Op::step(lanes[k], static_cast<A>(p[i + k]));
  for (; i < n; ++i) lanes[0] = Op::step(lanes[0], static_cast<A>(p[i]));
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int k = 0; k < width; ++k) lanes[k] = Op::step(lanes[k], lanes[k + width]);
  return lanes[0];
}

// An f32 leaf's sum in f64: elements kLanes apart are added in pairs in f32, one rounding
// each (exact for two equal values), and the pairs widened
// and summed in f64, in 2 x 16 lanes. The error is at most half an f32 ulp of the sum of
// magnitudes, whatever n is. Widening every element instead (two conversions and two f64
// adds per 16 floats) kept the full sum compute-bound on an AVX-512 core (16M floats in
// 0.89-0.93 ms on 2 threads, 75 GB/s; PyTorch's f32 cascade 0.77 ms, the memory's speed).
inline double sum_f32_leaf(const float* __restrict p, std::int64_t n) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {}, more[kLanes] = {};
  std::int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes)
    for (int k = 0; k < kLanes; ++k) {
      lanes[k] += static_cast<double>(p[i + k] + p[i + kLanes + k]);
      more[k] += static_cast<double>(p[i + 2 * kLanes + k] + p[i + 3 * kLanes + k]);
    }
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(p[i + k]);
  for (; i < n; ++i) more[0] += static_cast<double>(p[i]);
  for (int k = 0; k < kLanes; ++k) lanes[k] += more[k];
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];
  return lanes[0];
}

#if defined(__AVX512F__) || defined(__AVX2__)
// The sums of eight vectors of lines 16 floats apart, as a tree of pairs. The lines are loaded
// in ascending order, pinned by compiler barriers: in the order the compiler chose (the block's
// last line first) the hardware prefetchers fell behind, and the sums below took twice as long
// past the cache (2.0-2.3 ms against 1.0-1.1 for 16M floats on 2 threads).
template <class Load, class Add> inline auto ordered_block_sum(const float* q, Load load, Add add) {
  constexpr int kStride = 16;
  const auto a0 = load(q), a1 = load(q + kStride);
  asm volatile("" ::: "memory");
  const auto a2 = load(q + 2 * kStride), a3 = load(q + 3 * kStride);
  asm volatile("" ::: "memory");
  const auto a4 = load(q + 4 * kStride), a5 = load(q + 5 * kStride);
  asm volatile("" ::: "memory");
  const auto a6 = load(q + 6 * kStride), a7 = load(q + 7 * kStride);
  return add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7)));
}

// An f32 run's sum in f64 with AVX-512 or AVX2: each of 16 lanes adds eight elements 16 apart in
// f32 as a tree of pairs (three roundings, each at most half an f32 ulp of the magnitudes below
// it; exact for equal values) and widens that sum of a 128-element block into its f64 lane. The
// error is at most 1.5 f32 ulps of the sum of magnitudes plus the f64 lanes' own (n / 128
// roundings each, under a quarter of an f32 ulp up to n = 2^34), so the run needs no cascade
// above it. Both levels add the same elements in the same order: their sums are the same bits.
// On a 2-core Zen 4 VM, sum_f32_leaf's cascade ran at 128 GB/s with 16 MiB of floats in the
// cache (101 with AVX2), where the loads alone run at 198 and this at 194 (202 with AVX2).
inline double sum_f32_run(const float* __restrict p, std::int64_t n) {
  constexpr int kLanes = 16;
  alignas(64) double lanes[kLanes];
  std::int64_t i = 0;
#if defined(__AVX512F__)
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  for (; i + 8 * kLanes <= n; i += 8 * kLanes) {
    const __m512 block = ordered_block_sum(
        p + i, [](const float* q) { return _mm512_loadu_ps(q); },
        [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
    low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(block)));
    high = _mm512_add_pd(high, _mm512_cvtps_pd(_mm512_extractf32x8_ps(block, 1)));
  }
  _mm512_store_pd(lanes, low);
  _mm512_store_pd(lanes + kLanes / 2, high);
#else
  // Lanes 0-7 and 8-15 as two 256-bit halves, each half's eight lines loaded in order.
  __m256d sums[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  for (; i + 8 * kLanes <= n; i += 8 * kLanes) {
    for (int half = 0; half < 2; ++half) {
      const __m256 block = ordered_block_sum(
          p + i + half * (kLanes / 2), [](const float* q) { return _mm256_loadu_ps(q); },
          [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
      sums[2 * half] = _mm256_add_pd(sums[2 * half], _mm256_cvtps_pd(_mm256_castps256_ps128(block)));
      sums[2 * half + 1] = _mm256_add_pd(sums[2 * half + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(block, 1)));
    }
  }
  for (int quarter = 0; quarter < 4; ++quarter) _mm256_store_pd(lanes + 4 * quarter, sums[quarter]);
#endif
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(p[i + k]);
  double rest = 0.0;
  for (; i < n; ++i) rest += static_cast<double>(p[i]);
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];
  return lanes[0] + rest;
}
#endif

// Sums a contiguous run pairwise over leaves of kLeaf elements: the rounding error grows
// with log(n) instead of n. With AVX-512 or AVX2 an f32 run summed in f64 needs no cascade.
template <class A, class T> A cascade_sum(const T* p, std::int64_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>) return sum_f32_run(p, n);
#endif
  if (n <= kLeaf) {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>) return sum_f32_leaf(p, n);
    else return reduce_run<SumStep<A>, A>(p, n);
  }
  const std::int64_t half = (n / 2 + kLeaf - 1) / kLeaf * kLeaf;
  return cascade_sum<A>(p, half) + cascade_sum<A>(p + half, n - half);
}

template <class Op, class A, class T> A reduce_contiguous(const T* p, std::int64_t n) {
  if constexpr (Op::pairwise) return cascade_sum<A>(p, n);
  else return reduce_run<Op, A>(p, n);
}

// acc[0, w) = reduction over `rows` rows of width w, `stride` elements apart.
// Four rows per pass, so the accumulators are loaded and stored once per four rows.
template <class Op, class A, class T>
void reduce_rows(const T* __restrict p, std::int64_t rows, std::int64_t stride, std::int64_t w, A* __restrict acc) {
  for (std::int64_t i = 0; i < w; ++i) acc[i] = Op::identity();
  std::int64_t j = 0;
  for (; j + 4 <= rows; j += 4) {
    const T* __restrict row = p + j * stride;
    for (std::int64_t i = 0; i < w; ++i) {
      A a = acc[i];
      a = Op::step(a, static_cast<A>(row[i]));
      a = Op::step(a, static_cast<A>(row[stride + i]));
      a = Op::step(a, static_cast<A>(row[2 * stride + i]));
      a = Op::step(a, static_cast<A>(row[3 * stride + i]));
      acc[i] = a;
    }
  }
  for (; j < rows; ++j) {
    const T* __restrict row = p + j * stride;
    for (std::int64_t i = 0; i < w; ++i) acc[i] = Op::step(acc[i], static_cast<A>(row[i]));
  }
}

// Rows needed below sum_rows' recursion: one scratch row of width w per level.
std::int64_t pairwise_depth(std::int64_t rows) {
  std::int64_t depth = 0;
  while (rows > kRowLeaf) {
    rows -= rows / 2;
    ++depth;
  }
  return depth;
}

// Pairwise sum of rows: linear over kRowLeaf rows, then halves added together.
template <class A, class T>
void sum_rows(const T* p, std::int64_t rows, std::int64_t stride, std::int64_t w, A* acc, A* scratch) {
  if (rows <= kRowLeaf) {
    reduce_rows<SumStep<A>, A>(p, rows, stride, w, acc);
    return;
  }
  const std::int64_t half = rows / 2;
  sum_rows<A>(p, half, stride, w, acc, scratch);
  sum_rows<A>(p + half * stride, rows - half, stride, w, scratch, scratch + w);
  for (std::int64_t i = 0; i < w; ++i) acc[i] += scratch[i];
}

// Columns narrower than a vector (inner = W in 2, 3, 4, 8): the [rows, W] block is one contiguous run,
// reduced with L = U * W lanes so that lane k always sees column k % W, then folded per column.
template <class A, int W> constexpr int kNarrowRows = W >= lane_count<A> ? 1 : lane_count<A> / W;

template <class Op, class A, int W, class T> void narrow_run(const T* __restrict p, std::int64_t rows, A* lanes) {
  constexpr int L = kNarrowRows<A, W> * W;
  for (int k = 0; k < L; ++k) lanes[k] = Op::identity();
  const std::int64_t total = rows * W;
  std::int64_t e = 0;
  for (; e + L <= total; e += L)
    for (int k = 0; k < L; ++k) lanes[k] = Op::step(lanes[k], static_cast<A>(p[e + k]));
  for (std::int64_t k = 0; e + k < total; ++k) lanes[k] = Op::step(lanes[k], static_cast<A>(p[e + k]));
}

template <class Op, class A, int W, class T> void narrow_lanes(const T* p, std::int64_t rows, A* lanes) {
  constexpr int U = kNarrowRows<A, W>;
  if (!Op::pairwise || rows * W <= kLeaf) {
    narrow_run<Op, A, W>(p, rows, lanes);
    return;
  }
  const std::int64_t half = (rows / 2 + U - 1) / U * U;
  A other[U * W];
  narrow_lanes<Op, A, W>(p, half, lanes);
  narrow_lanes<Op, A, W>(p + half * W, rows - half, other);
  for (int k = 0; k < U * W; ++k) lanes[k] = Op::step(lanes[k], other[k]);
}

template <class Op, class A, int W, class T> void reduce_narrow(const T* p, std::int64_t rows, A* acc) {
  constexpr int U = kNarrowRows<A, W>;
  A lanes[U * W];
  narrow_lanes<Op, A, W>(p, rows, lanes);
  for (int i = 0; i < W; ++i) {
    A a = lanes[i];
    for (int u = 1; u < U; ++u) a = Op::step(a, lanes[u * W + i]);
    acc[i] = a;
  }
}

template <class Op, class A, class T>
void reduce_block(const T* p, std::int64_t rows, std::int64_t stride, std::int64_t w, A* acc, A* scratch) {
  // Only the common float cases get a narrow kernel: each one costs compile time.
  if constexpr (std::is_floating_point_v<T>) {
    if (stride == w) {
      switch (w) {
        case 2: reduce_narrow<Op, A, 2>(p, rows, acc); return;
        case 3: reduce_narrow<Op, A, 3>(p, rows, acc); return;
        case 4: reduce_narrow<Op, A, 4>(p, rows, acc); return;
        case 8: reduce_narrow<Op, A, 8>(p, rows, acc); return;
        default: break;
      }
    }
  }
  if constexpr (Op::pairwise) sum_rows<A>(p, rows, stride, w, acc, scratch);
  else reduce_rows<Op, A>(p, rows, stride, w, acc);
}

// out[o, i] = finalize(reduction over j of x[o, j, i]). Work items are (o, part of n, tile of
// inner); with more than one part, per-part results go to a buffer and are combined after.
// The split depends on the shape only, so results do not depend on the thread count.
template <class Op, class A, class T, class Out, class Finalize>
void reduce_kernel(const T* x, const Split& s, Out* out, Finalize finalize) {
  const bool columns = s.inner > 1;
  const std::int64_t tile = columns ? std::min(s.inner, kTile) : 1;
  const std::int64_t tiles = (s.inner + tile - 1) / tile;
  // Split n only when (outer, tile) pairs are too few to keep the threads busy.
  const bool split = s.outer * tiles < kMinItems;
  const std::int64_t rows_per_part =
      !split ? std::max<std::int64_t>(s.n, 1) : columns ? std::max(kRowLeaf, kPart / tile) : kPart;
  const std::int64_t parts = std::max<std::int64_t>(1, (s.n + rows_per_part - 1) / rows_per_part);
  const std::int64_t part_rows = std::min(s.n, rows_per_part);
  // Partial results live in a pooled buffer: a fresh one would cost page faults on every call.
  const std::int64_t partial_bytes = parts > 1 ? s.outer * parts * s.inner * static_cast<std::int64_t>(sizeof(A)) : 0;
  const CpuTensor partial = empty(Shape{partial_bytes}, DType::u8);
  A* partial_data = reinterpret_cast<A*>(partial.bytes());

  // Rows of the last dim, whole: one value per row, no partial buffer.
  if (!columns && parts == 1) {
    parallel_for(s.outer, std::max<std::int64_t>(1, kGrainElements / std::max<std::int64_t>(1, s.n)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t o = begin; o < end; ++o)
                     out[o] = finalize(reduce_contiguous<Op, A>(x + o * s.n, s.n));
                 });
    return;
  }
  const std::int64_t items = s.outer * parts * tiles;
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainElements / std::max<std::int64_t>(1, part_rows * tile));
  parallel_for(items, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> acc(static_cast<std::size_t>(tile));
    std::vector<A> scratch(static_cast<std::size_t>(tile * pairwise_depth(part_rows)));
    // item = (o * parts + p) * tiles + t, stepped without divisions in the loop.
    std::int64_t t = begin % tiles, p = (begin / tiles) % parts, o = begin / (tiles * parts);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t j0 = p * rows_per_part, rows = std::min(rows_per_part, s.n - j0);
      const std::int64_t i0 = t * tile, w = std::min(tile, s.inner - i0);
      const T* base = x + (o * s.n + j0) * s.inner + i0;
      if (columns) reduce_block<Op, A>(base, rows, s.inner, w, acc.data(), scratch.data());
      else acc[0] = reduce_contiguous<Op, A>(base, rows);
      if (parts == 1) {
        Out* dst = out + o * s.inner + i0;
        for (std::int64_t i = 0; i < w; ++i) dst[i] = finalize(acc[static_cast<std::size_t>(i)]);
      } else {
        A* dst = partial_data + (o * parts + p) * s.inner + i0;
        for (std::int64_t i = 0; i < w; ++i) dst[i] = acc[static_cast<std::size_t>(i)];
      }
      if (++t == tiles) {
        t = 0;
        if (++p == parts) {
          p = 0;
          ++o;
        }
      }
    }
  });
  if (parts == 1) return;

  // Combine the parts of each (o, tile): `parts` rows of the partial buffer.
  const std::int64_t combine_tile = std::min(s.inner, kTile);
  const std::int64_t combine_tiles = (s.inner + combine_tile - 1) / combine_tile;
  parallel_for(s.outer * combine_tiles, std::max<std::int64_t>(1, kGrainElements / (parts * combine_tile)),
               [&](std::int64_t begin, std::int64_t end) {
                 std::vector<A> acc(static_cast<std::size_t>(combine_tile));
                 std::vector<A> scratch(static_cast<std::size_t>(combine_tile * pairwise_depth(parts)));
                 for (std::int64_t item = begin; item < end; ++item) {
                   const std::int64_t o = item / combine_tiles, i0 = (item % combine_tiles) * combine_tile;
                   const std::int64_t w = std::min(combine_tile, s.inner - i0);
                   reduce_block<Op, A>(partial_data + o * parts * s.inner + i0, parts, s.inner, w, acc.data(),
                                       scratch.data());
                   Out* dst = out + o * s.inner + i0;
                   for (std::int64_t i = 0; i < w; ++i) dst[i] = finalize(acc[static_cast<std::size_t>(i)]);
                 }
               });
}

// The accumulator of sums and products: f32 sums in f64 (PyTorch-level accuracy or better at
// memory speed); integers in u64, whose wrap-around is the two's-complement i64 result.
template <class T> using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, std::uint64_t>;

// Converts an accumulator to the output element; a mean divides by n first (0/0 gives NaN for
// an empty dim, as in PyTorch). One type for sum and mean, so they share one instantiation.
template <class A, class Out> struct Finalize {
  double divisor = 0.0;  // 0: no division
  Out operator()(A a) const {
    if constexpr (std::is_same_v<Out, bool>) return a != 0;
    else if constexpr (std::is_floating_point_v<A>) return static_cast<Out>(divisor != 0.0 ? a / divisor : a);
    else return static_cast<Out>(a);
  }
};

template <class T> void reduce_typed(const T* x, const Split& s, ReduceOp op, T* out) {
  using A = SumAcc<T>;
  switch (op) {
    case ReduceOp::sum: reduce_kernel<SumStep<A>, A>(x, s, out, Finalize<A, T>{}); return;
    case ReduceOp::mean:
      if constexpr (std::is_floating_point_v<T>) {
        reduce_kernel<SumStep<A>, A>(x, s, out, Finalize<A, T>{s.n == 0 ? std::nan("") : static_cast<double>(s.n)});
        return;
      }
      break;
    case ReduceOp::prod: reduce_kernel<ProdStep<A>, A>(x, s, out, Finalize<A, T>{}); return;
    case ReduceOp::max: reduce_kernel<MaxStep<T>, T>(x, s, out, Finalize<T, T>{}); return;
    case ReduceOp::min: reduce_kernel<MinStep<T>, T>(x, s, out, Finalize<T, T>{}); return;
  }
  KILN_FAIL("mean: expected a float tensor, got an integer tensor");
}

// Bool tensors reduce with max (any) and min (all), read as bytes: the identities make an
// empty any false and an empty all true.
void reduce_bool(const std::uint8_t* x, const Split& s, ReduceOp op, bool* out) {
  using F = Finalize<std::uint8_t, bool>;
  if (op == ReduceOp::max) reduce_kernel<MaxStep<std::uint8_t>, std::uint8_t>(x, s, out, F{});
  else reduce_kernel<MinStep<std::uint8_t>, std::uint8_t>(x, s, out, F{});
}


bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// Runs the reduction of the contiguous tensor `x` viewed as `s` into `out`.
void run_reduce(const CpuTensor& x, const Split& s, ReduceOp op, const CpuTensor& out) {
  if (x.dtype == DType::boolean) {
    reduce_bool(x.data<std::uint8_t>(), s, op, out.data<bool>());
    return;
  }
  visit_dtype(x.dtype, [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      reduce_typed<T>(x.data<T>(), s, op, out.data<T>());
  });
}

// True when x's elements fill one gap-free block of its buffer in some order (a permuted or
// contiguous view), so an order-independent reduction can read that block directly.
bool is_dense(const CpuTensor& x) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
  for (std::size_t d = 0; d < x.shape.rank(); ++d)
    if (x.shape[d] != 1) dims.emplace_back(x.strides[d], x.shape[d]);
  std::sort(dims.begin(), dims.end());
  std::int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// ---- arg-reductions: the first index of the max (min); a NaN counts as the max (min).
template <bool Max, class T> bool better(T x, T best) {
  const bool strict = Max ? x > best : x < best;
  if constexpr (std::is_floating_point_v<T>) return strict || (x != x && best == best);
  else return strict;
}

// Arg-reduction of a contiguous row in two vectorizable passes: the row's max (min), NaN
// propagating, then the first index holding it (or the first NaN).
template <bool Max, class T> std::int64_t arg_run(const T* __restrict p, std::int64_t n) {
  using Op = std::conditional_t<Max, MaxStep<T>, MinStep<T>>;
  const T target = reduce_run<Op, T>(p, n);
  const auto hit = [target](T v) {
    if constexpr (std::is_floating_point_v<T>) return target != target ? v != v : v == target;
    else return v == target;
  };
  constexpr int kBlock = 32;
  std::int64_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    bool any = false;
    for (int k = 0; k < kBlock; ++k) any |= hit(p[j + k]);
    if (any) break;
  }
  for (; j < n; ++j)
    if (hit(p[j])) return j;
  return 0;  // unreachable: the target is one of the row's values
}

template <bool Max, class T> void arg_kernel(const T* x, const Split& s, std::int64_t* out) {
  if (s.inner == 1) {
    parallel_for(s.outer, std::max<std::int64_t>(1, kGrainElements / s.n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) out[o] = arg_run<Max>(x + o * s.n, s.n);
    });
    return;
  }
  const std::int64_t tile = std::min(s.inner, kTile);
  const std::int64_t tiles = (s.inner + tile - 1) / tile;
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainElements / (s.n * tile));
  parallel_for(s.outer * tiles, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> best(static_cast<std::size_t>(tile));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t o = item / tiles, i0 = (item % tiles) * tile, w = std::min(tile, s.inner - i0);
      const T* base = x + o * s.n * s.inner + i0;
      std::int64_t* __restrict dst = out + o * s.inner + i0;
      T* __restrict bv = best.data();
      for (std::int64_t i = 0; i < w; ++i) {
        bv[i] = base[i];
        dst[i] = 0;
      }
      for (std::int64_t j = 1; j < s.n; ++j) {
        const T* __restrict row = base + j * s.inner;
        for (std::int64_t i = 0; i < w; ++i) {
          const bool take = better<Max>(row[i], bv[i]);
          bv[i] = take ? row[i] : bv[i];
          dst[i] = take ? j : dst[i];
        }
      }
    }
  });
}

// ---- scans: out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], accumulated as SumAcc (f32 in f64).
template <bool Sum, class A> A scan_step(A acc, A x) { return Sum ? acc + x : acc * x; }

// Scans of the last dim: a scan is one long dependency chain, so kRows rows run interleaved.
template <bool Sum, class T> void scan_rows(const T* x, const Split& s, T* out) {
  using A = SumAcc<T>;
  constexpr std::int64_t kRows = 4;
  const std::int64_t groups = (s.outer + kRows - 1) / kRows;
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainElements / (kRows * s.n));
  parallel_for(groups, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::int64_t o0 = g * kRows;
      if (o0 + kRows <= s.outer) {
        const T* __restrict src = x + o0 * s.n;
        T* __restrict dst = out + o0 * s.n;
        A a[kRows];
        for (auto& v : a) v = A(Sum ? 0 : 1);
        for (std::int64_t j = 0; j < s.n; ++j) {
          for (std::int64_t r = 0; r < kRows; ++r) {
            a[r] = scan_step<Sum>(a[r], static_cast<A>(src[r * s.n + j]));
            dst[r * s.n + j] = static_cast<T>(a[r]);
          }
        }
      } else {
        for (std::int64_t o = o0; o < s.outer; ++o) {
          A a = A(Sum ? 0 : 1);
          for (std::int64_t j = 0; j < s.n; ++j) {
            a = scan_step<Sum>(a, static_cast<A>(x[o * s.n + j]));
            out[o * s.n + j] = static_cast<T>(a);
          }
        }
      }
    }
  });
}

template <bool Sum, class T> void scan_kernel(const T* x, const Split& s, T* out) {
  using A = SumAcc<T>;
  if (s.inner == 1) {
    scan_rows<Sum>(x, s, out);
    return;
  }
  // Columns: a tile of accumulators walks down the rows, a vectorizable row at a time.
  const std::int64_t tile = std::min(s.inner, kTile);
  const std::int64_t tiles = (s.inner + tile - 1) / tile;
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainElements / std::max<std::int64_t>(1, s.n * tile));
  parallel_for(s.outer * tiles, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> acc(static_cast<std::size_t>(tile));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t o = item / tiles, i0 = (item % tiles) * tile, w = std::min(tile, s.inner - i0);
      const std::int64_t base = o * s.n * s.inner + i0;
      A* __restrict a = acc.data();
      for (std::int64_t i = 0; i < w; ++i) a[i] = A(Sum ? 0 : 1);
      for (std::int64_t j = 0; j < s.n; ++j) {
        const T* __restrict src = x + base + j * s.inner;
        T* __restrict dst = out + base + j * s.inner;
        for (std::int64_t i = 0; i < w; ++i) {
          a[i] = scan_step<Sum>(a[i], static_cast<A>(src[i]));
          dst[i] = static_cast<T>(a[i]);
        }
      }
    }
  });
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim) {
  const auto name = ops::reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  ops::check_reduce_dtype(op, x.dtype);
  if (cpu::is_half(x.dtype)) return cast(reduce(cast(x, DType::f32), op, dim), x.dtype);
  const cpu::Split s = cpu::split_at(x.shape, d);
  ops::check_reduce_dim_extent(op, x.dtype, x.shape, d);
  CpuTensor out = cpu::empty(cpu::keep_dim(x.shape, d), x.dtype);
  if (out.numel() == 0) return out;
  cpu::run_reduce(cpu::contiguous(x), s, op, out);
  return out;
}

Cpu::Primitive Cpu::reduce_all(const Primitive& x, ops::ReduceOp op) {
  const auto name = ops::reduce_name(op);
  ops::check_reduce_dtype(op, x.dtype);
  if (cpu::is_half(x.dtype)) return cast(reduce_all(cast(x, DType::f32), op), x.dtype);
  ops::check_reduce_all_extent(op, x.dtype, x.shape);
  // A dense view (e.g. a transpose) is reduced in memory order without a copy.
  CpuTensor flat = x;
  if (!x.is_contiguous() && !cpu::is_dense(x)) flat = cpu::contiguous(x);
  CpuTensor out = cpu::empty(Shape{1}, x.dtype);
  cpu::run_reduce(flat, cpu::Split{1, x.numel(), 1}, op, out);
  return out;
}

Cpu::Primitive Cpu::arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim) {
  const auto name = ops::arg_reduce_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  if (cpu::is_half(x.dtype)) return arg_reduce(cast(x, DType::f32), op, dim);
  const cpu::Split s = cpu::split_at(x.shape, d);
  KILN_CHECK(s.n > 0, "{}: cannot reduce over dim {} of size 0 in shape {}", name, d, x.shape);
  CpuTensor out = cpu::empty(cpu::keep_dim(x.shape, d), DType::i64);
  if (out.numel() == 0) return out;
  const CpuTensor c = cpu::contiguous(x);
  const DType as = x.dtype == DType::boolean ? DType::u8 : x.dtype;  // bool compares as its 0/1 bytes
  visit_dtype(as, [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (op == ops::ArgReduceOp::argmax) cpu::arg_kernel<true>(c.data<T>(), s, out.data<std::int64_t>());
      else cpu::arg_kernel<false>(c.data<T>(), s, out.data<std::int64_t>());
    }
  });
  return out;
}

Cpu::Primitive Cpu::cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim) {
  const auto name = ops::cumulative_name(op);
  const std::size_t d = normalize_dim(name, dim, x.shape.rank());
  KILN_CHECK(!is_bool(x.dtype), "{}: expected a float or int tensor, got {}", name, x.dtype);
  if (cpu::is_half(x.dtype)) return cast(cumulative(cast(x, DType::f32), op, dim), x.dtype);
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (out.numel() == 0) return out;
  const CpuTensor c = cpu::contiguous(x);
  const cpu::Split s = cpu::split_at(x.shape, d);
  visit_dtype(x.dtype, [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (op == ops::CumulativeOp::sum) cpu::scan_kernel<true>(c.data<T>(), s, out.data<T>());
      else cpu::scan_kernel<false>(c.data<T>(), s, out.data<T>());
    }
  });
  return out;
}

}  // namespace kiln
