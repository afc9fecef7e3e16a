// Matrix multiplication on the CPU: [..., m, k] @ [..., k, n] with broadcast batch dims.
// f32 runs through oneDNN's sgemm, which reads transposed operands in place; f64 (and f32 in
// the embedded build, which has no oneDNN) through Eigen's GEMM on strided maps; f16/bf16
// compute in f32.
#include "gemm.hpp"

#include "kiln/ops/matmul.hpp"

#include <Eigen/Core>
#if KILN_CPU_ONEDNN
#include "onednn.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <map>
#endif

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::cpu {
namespace {

std::optional<GemmLayout> gemm_layout(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                      std::int64_t col_stride) {
  // A size-1 dim's stride is meaningless, so it never disqualifies a layout.
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<std::int64_t>(cols, 1)))
    return GemmLayout{false, rows == 1 ? std::max<std::int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<std::int64_t>(rows, 1)))
    return GemmLayout{true, cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

}  // namespace

GemmOperand gemm_operand(const CpuTensor& x, const Shape& batch) {
  const std::size_t r = x.shape.rank();
  const std::int64_t rows = x.shape[r - 2], cols = x.shape[r - 1];
  auto layout = gemm_layout(rows, cols, x.strides[r - 2], x.strides[r - 1]);
  CpuTensor source = x;
  if (!layout) {  // e.g. a broadcast (stride-0) or sliced-column matrix: copy this operand only
    source = contiguous(x);
    layout = gemm_layout(rows, cols, source.strides[r - 2], source.strides[r - 1]);
  }
  Extents full(batch.dims());
  full.push_back(rows);
  full.push_back(cols);
  GemmOperand op{broadcast_view(source, Shape(full)), *layout, {}};
  const std::int64_t count = batch.numel();
  op.batch_offsets.resize(static_cast<std::size_t>(count));
  const std::size_t nb = batch.rank();
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t rest = i, offset = op.view.offset;
    for (std::size_t d = nb; d-- > 0;) {
      offset += (rest % batch[d]) * op.view.strides[d];
      rest /= batch[d];
    }
    op.batch_offsets[static_cast<std::size_t>(i)] = offset;
  }
  return op;
}

bool folds_to_one_gemm(const GemmOperand& a, const GemmOperand& b, std::int64_t m) {
  const auto count = static_cast<std::int64_t>(a.batch_offsets.size());
  if (count == 1) return true;
  if (a.layout.transposed) return false;
  for (std::int64_t i = 1; i < count; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (b.batch_offsets[s] != b.batch_offsets[0] || a.batch_offsets[s] != a.batch_offsets[0] + i * m * a.layout.ld)
      return false;
  }
  return true;
}

namespace {

// C = A @ B (C += A @ B where `accumulate`) through Eigen's GEMM, A and B read in place: a
// transposed row-major operand is a column-major matrix with the same leading dimension.
// Both map with a unit inner stride, which Eigen's kernels (and its matrix-vector path, for
// one row) read without copying.
template <class T>
void eigen_gemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k, const T* pa,
                const T* pb, T* pc, std::int64_t ldc, bool accumulate) {
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Outer = Eigen::OuterStride<>;
  Eigen::Map<RowMajor, Eigen::Unaligned, Outer> mc(pc, m, n, Outer(ldc));
  const auto product = [&](const auto& ma, const auto& mb) {
    if (accumulate) mc.noalias() += ma * mb;
    else mc.noalias() = ma * mb;
  };
  const auto with_b = [&](const auto& ma) {
    if (b.transposed) product(ma, Eigen::Map<const ColMajor, Eigen::Unaligned, Outer>(pb, k, n, Outer(b.ld)));
    else product(ma, Eigen::Map<const RowMajor, Eigen::Unaligned, Outer>(pb, k, n, Outer(b.ld)));
  };
  if (a.transposed) with_b(Eigen::Map<const ColMajor, Eigen::Unaligned, Outer>(pa, m, k, Outer(a.ld)));
  else with_b(Eigen::Map<const RowMajor, Eigen::Unaligned, Outer>(pa, m, k, Outer(a.ld)));
}

#if KILN_CPU_ONEDNN
// oneDNN's sgemm with its AVX2 kernels takes a no-copy path when a non-transposed B is
// 32-byte aligned, and for m of a few hundred that path runs at about 2/3 the speed of its
// packing path (one core, 256x784 @ 784x1024: 13.7 ms aligned, 9.2 ms with B 16 bytes off).
// There, such a B is copied to a buffer 16 bytes off that alignment first; the copy is k*n
// moves, a few percent of the product's time. oneDNN's AVX-512 kernels run an aligned B as
// fast as a misaligned one (2 threads, 512^3: 1.18 ms either way, 1.29-1.64 ms with the
// copy), so where oneDNN runs those, B is read where it lies.
bool avx2_sgemm() {
  static const bool avx2 = [] {
    const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    return (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
  }();
  return avx2;
}

bool dodge_aligned_b(const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k, const float* pb) {
  return !b.transposed && reinterpret_cast<std::uintptr_t>(pb) % 32 == 0 && m >= 64 && m <= 512 && n >= 128 &&
         k >= 128 && avx2_sgemm();
}

const float* misaligned_copy(const float* pb, std::int64_t ldb, std::int64_t k, std::int64_t n) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<std::size_t>(k * n + 8));
  float* out = scratch.data();
  while (reinterpret_cast<std::uintptr_t>(out) % 32 != 16) ++out;
  for (std::int64_t r = 0; r < k; ++r) std::memcpy(out + r * n, pb + r * ldb, static_cast<std::size_t>(n) * sizeof(float));
  return out;
}

// oneDNN's sgemm with its AVX-512 kernels runs a transposed B with k of 512 and more and n
// up to a few hundred at 60-80 % of the speed of the same product with B row-major, and a
// linear layer's forward (x Wᵀ, W [out, in]) is such a product. Measured on 2 threads,
// GFLOP/s with B transposed before -> after a row-major copy of it (row-major B in brackets):
//   256 x 1024 @ (384 x 1024)ᵀ 146 -> 183 (233), 256 x 1024 @ (768 x 1024)ᵀ 146 -> 198 (232),
//   4096 x 1024 @ (256 x 1024)ᵀ 163 -> 208 (220), 1024 x 4096 @ (256 x 4096)ᵀ 174 -> 203 (221);
// with n = 1024 oneDNN's own path was as fast or faster (4096 x 1024 @ (1024 x 1024)ᵀ
// 220 -> 217), as for small m n, where the copy is most of the time (64 x 512 @ (256 x 512)ᵀ
// 97 -> 58). So B is transposed into a row-major buffer first (k n moves, in square blocks
// of one register width) where k >= 512, n <= 768 and m n >= 65536, and B is at most 16 MiB
// (the buffer stays with the calling thread). With oneDNN held to its AVX2 kernels
// (ONEDNN_MAX_CPU_ISA=AVX2, same machine) a transposed B ran as fast as a row-major one or
// faster, so there it is read in place.
bool transpose_b_first(const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k) {
  return b.transposed && k >= 512 && n <= 768 && m * n >= 65536 && k * n <= (std::int64_t{1} << 22) && !avx2_sgemm();
}

// dst (rows `ld_dst` apart) = srcᵀ: src is `rows` x `cols` (rows `ld_src` apart), dst `cols` x
// `rows`. In square blocks of one register width, src's blocks of rows shared out among the
// threads (all on the calling thread inside a parallel region).
// Eigen's PacketBlock takes the vector type as a template argument, whose alignment attribute
// GCC notes it drops there (-Wignored-attributes); Eigen's own transposes do the same.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
void transpose_into(const float* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols, float* dst,
                    std::int64_t ld_dst) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  namespace ei = Eigen::internal;
  constexpr std::int64_t W = ei::packet_traits<float>::size;
  parallel_for((rows + W - 1) / W, 16, [&](std::int64_t block_begin, std::int64_t block_end) {
    for (std::int64_t r0 = block_begin * W; r0 < std::min(rows, block_end * W); r0 += W) {
      std::int64_t c0 = 0;
      if (r0 + W <= rows) {
        for (; c0 + W <= cols; c0 += W) {
          ei::PacketBlock<Packet, static_cast<int>(W)> block;
          for (std::int64_t i = 0; i < W; ++i) block.packet[i] = ei::ploadu<Packet>(src + (r0 + i) * ld_src + c0);
          ei::ptranspose(block);
          for (std::int64_t i = 0; i < W; ++i) ei::pstoreu(dst + (c0 + i) * ld_dst + r0, block.packet[i]);
        }
      }
      for (std::int64_t r = r0; r < std::min(rows, r0 + W); ++r)
        for (std::int64_t c = r0 + W <= rows ? c0 : 0; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
    }
  });
}
#pragma GCC diagnostic pop

// oneDNN's sgemm with its AVX-512 kernels runs a product whose A is transposed (Aᵀ B, as
// a gradient wᵀ dy) 10-30 % slower when its result is tall and narrow than the same product
// taken the other way, Cᵀ = Bᵀ A, and for a long k the transposition of that result into C
// costs less than the difference. Measured on 2 threads (1 thread in brackets), the product
// as given -> through Cᵀ with the transposition, in ms: Aᵀ B 2048 x 64 (k 2048) 2.72 -> 2.16
// (5.29 -> 4.47), 1024 x 256 (k 4096) 8.07 -> 7.18 (17.7 -> 14.5), 4096 x 256 (k 1024)
// 9.12 -> 7.84; Aᵀ Bᵀ 4096 x 256 (k 1024) 8.46 -> 7.57. Short products lost: 4096 x 256 with
// k 256 +-10 %, 4096 x 1024 with k 256 and 512 x 64 with k 512 slower. Attention's value
// gradient on whole heads (Pᵀ dO, n = the head's width) is such a product.
bool through_transposed_result(const GemmLayout& a, std::int64_t m, std::int64_t n, std::int64_t k) {
  return a.transposed && m >= 2 * n && k >= 1024 && m * n * k >= (std::int64_t{1} << 27) &&
         m * n <= (std::int64_t{1} << 22) && !avx2_sgemm();
}

// A row-major copy of the k x n matrix B whose element (r, c) is pb[c * ldb + r].
const float* row_major_copy(const float* pb, std::int64_t ldb, std::int64_t k, std::int64_t n) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<std::size_t>(k * n));
  transpose_into(pb, ldb, n, k, scratch.data(), n);
  return scratch.data();
}

void sgemm(const GemmLayout& a, GemmLayout b, std::int64_t m, std::int64_t n, std::int64_t k, const float* pa,
           const float* pb, float* pc, std::int64_t ldc, bool accumulate) {
  if (!accumulate && through_transposed_result(a, m, n, k)) {
    // Cᵀ [n, m] = Bᵀ Aᵀ: B read as the transpose of its layout, A as its own matrix.
    thread_local std::vector<float> result;
    result.resize(static_cast<std::size_t>(m * n));
    sgemm({!b.transposed, b.ld}, {false, a.ld}, n, m, k, pb, pa, result.data(), m, /*accumulate=*/false);
    transpose_into(result.data(), m, n, m, pc, ldc);
    return;
  }
  if (transpose_b_first(b, m, n, k)) {
    pb = row_major_copy(pb, b.ld, k, n);
    b = {false, n};
  } else if (dodge_aligned_b(b, m, n, k, pb)) {
    pb = misaligned_copy(pb, b.ld, k, n);
    b.ld = n;
  }
  prepare_team();  // oneDNN's sgemm runs on this thread's OpenMP team
  const dnnl_status_t status = dnnl_sgemm(a.transposed ? 'T' : 'N', b.transposed ? 'T' : 'N', m, n, k, 1.0f, pa, a.ld,
                                          pb, b.ld, accumulate ? 1.0f : 0.0f, pc, ldc);
  KILN_CHECK(status == dnnl_success, "matmul: oneDNN sgemm failed (status {}) for m={}, n={}, k={}",
             static_cast<int>(status), m, n, k);
}
#else
// One row times a matrix (a fully connected layer on one sample), the embedded build's
// common product: Eigen's matrix-vector path costs several times the arithmetic at these
// sizes. The row's elements are k apart by a.ld when a is transposed, else adjacent.
void row_times_matrix(const GemmLayout& a, const GemmLayout& b, std::int64_t n, std::int64_t k, const float* pa,
                      const float* pb, float* pc, bool accumulate) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  namespace ei = Eigen::internal;
  constexpr std::int64_t lanes = ei::packet_traits<float>::size;
  const std::int64_t sa = a.transposed ? a.ld : 1;
  thread_local std::vector<float> row;
  if (sa != 1) {  // gathered once, so that the loops below read it in vectors
    row.resize(static_cast<std::size_t>(k));
    for (std::int64_t i = 0; i < k; ++i) row[static_cast<std::size_t>(i)] = pa[i * sa];
    pa = row.data();
  }
  if (b.transposed) {
    // Column j of B is a row of b.ld-apart memory: a dot product each, four at a time.
    const auto dots = [&]<std::size_t... c>(std::index_sequence<c...>, std::int64_t j) {
      Packet acc[sizeof...(c)] = {(static_cast<void>(c), ei::pset1<Packet>(0.0f))...};
      std::int64_t i = 0;
      for (; i + lanes <= k; i += lanes) {
        const Packet x = ei::ploadu<Packet>(pa + i);
        ((acc[c] = ei::pmadd(x, ei::ploadu<Packet>(pb + (j + static_cast<std::int64_t>(c)) * b.ld + i), acc[c])), ...);
      }
      float sums[sizeof...(c)] = {ei::predux(acc[c])...};
      for (; i < k; ++i) ((sums[c] += pa[i] * pb[(j + static_cast<std::int64_t>(c)) * b.ld + i]), ...);
      if (accumulate) ((pc[j + static_cast<std::int64_t>(c)] += sums[c]), ...);
      else ((pc[j + static_cast<std::int64_t>(c)] = sums[c]), ...);
    };
    std::int64_t j = 0;
    for (; j + 4 <= n; j += 4) dots(std::make_index_sequence<4>{}, j);
    for (; j < n; ++j) dots(std::make_index_sequence<1>{}, j);
    return;
  }
  // Rows of B are contiguous: C accumulates a[i] times row i, in vectors along n.
  if (!accumulate) std::fill(pc, pc + n, 0.0f);
  std::int64_t j = 0;
  for (; j + lanes <= n; j += lanes) {
    Packet acc = ei::ploadu<Packet>(pc + j);
    for (std::int64_t i = 0; i < k; ++i) acc = ei::pmadd(ei::pset1<Packet>(pa[i]), ei::ploadu<Packet>(pb + i * b.ld + j), acc);
    ei::pstoreu(pc + j, acc);
  }
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t jj = j; jj < n; ++jj) pc[jj] += pa[i] * pb[i * b.ld + jj];
}

void sgemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k, const float* pa,
           const float* pb, float* pc, std::int64_t ldc, bool accumulate) {
  if (m == 1) return row_times_matrix(a, b, n, k, pa, pb, pc, accumulate);
  eigen_gemm(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}
#endif

void dgemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k, const double* pa,
           const double* pb, double* pc, std::int64_t ldc, bool accumulate) {
  eigen_gemm(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}

template <class T>
void gemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k, const T* pa,
          const T* pb, T* pc, std::int64_t ldc, bool accumulate = false) {
  if constexpr (std::is_same_v<T, float>) sgemm(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
  else dgemm(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}

// Batches whose products are smaller than this (m·n·k), or batches of at least
// kBatchPerThread products per thread, run one product per thread at a time (attention's
// [batch · heads] products of a few M multiply-adds each: a fork and join per product costs
// more than the imbalance of splitting whole products); other batches run one after the
// other, each GEMM using every thread.
constexpr std::int64_t kSmallProduct = std::int64_t{1} << 18;
constexpr std::int64_t kBatchPerThread = 8;

}  // namespace

// Runs a batch of count equal f32 products, a's and b's matrices evenly spaced, into out's
// contiguous matrices as one oneDNN matmul over the batch, kept per calling thread and shape.
// False (nothing written) where no such matmul runs it: uneven or shared matrices, oneDNN held
// to its AVX2 kernels, or no oneDNN.
bool batched_primitive_f32(const GemmOperand& a, const GemmOperand& b, std::int64_t count, std::int64_t m,
                           std::int64_t n, std::int64_t k, const float* pa, const float* pb, float* pc);

namespace {

template <class T> void batched_gemm(const GemmOperand& a, const GemmOperand& b, const CpuTensor& out) {
  const std::size_t r = out.shape.rank();
  const std::int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.view.shape[r - 1];
  const auto count = static_cast<std::int64_t>(a.batch_offsets.size());
  const T* pa = reinterpret_cast<const T*>(a.view.storage->ptr);
  const T* pb = reinterpret_cast<const T*>(b.view.storage->ptr);
  T* pc = out.data<T>();

  // A batch of row-major A matrices laid end to end times one shared B is a single
  // (count·m × k) @ (k × n) product: one big GEMM instead of many small ones.
  if (folds_to_one_gemm(a, b, m)) {
    gemm<T>(a.layout, b.layout, count * m, n, k, pa + a.batch_offsets[0], pb + b.batch_offsets[0], pc, n);
    return;
  }
  // Small products as one batched oneDNN matmul, which pays for its call and its work split once
  // for the batch instead of once a product. On two threads of a Xeon VM, against sgemm called
  // per product in a parallel loop: 256 products of 17 x 33 x 9 in 0.021 ms against 0.065, 64 of
  // 64 x 64 x 32 in 0.055 against 0.070; at 128 x 64 x 128 (past kSmallProduct) the two were even.
  if constexpr (std::is_same_v<T, float>) {
    if (m * n * k <= kSmallProduct && batched_primitive_f32(a, b, count, m, n, k, pa, pb, pc)) return;
  }
  auto run = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto s = static_cast<std::size_t>(i);
      gemm<T>(a.layout, b.layout, m, n, k, pa + a.batch_offsets[s], pb + b.batch_offsets[s], pc + i * m * n, n);
    }
  };
  const std::int64_t team = prepare_team();
  if (m * n * k > kSmallProduct && count < kBatchPerThread * team && !(count >= team && count % team == 0))
    return run(0, count);
  // One product per thread. On one thread, oneDNN's AVX-512 sgemm runs a narrow result (n <= 64)
  // with A as it lies at 140-160 GFLOP/s where a oneDNN matmul primitive, kept for the shape
  // (repeated_gemm_f32, which keeps sgemm where it is as fast), runs it at 160-180: attention's
  // weights times v, 2048 x 64 (k 2048), went from 142-146 to 171-176.
  if constexpr (std::is_same_v<T, float>) {
    if (!a.layout.transposed && n <= 64) {
      return parallel_for(count, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const auto s = static_cast<std::size_t>(i);
          repeated_gemm_f32(a.layout, b.layout, m, n, k, pa + a.batch_offsets[s], pb + b.batch_offsets[s],
                            pc + i * m * n, n);
        }
      });
    }
  }
  parallel_for(count, 1, run);
}

}  // namespace

void gemm_f32(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
              const float* pa, const float* pb, float* pc, std::int64_t ldc, bool accumulate) {
  gemm<float>(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}
void gemm_f64(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
              const double* pa, const double* pb, double* pc, std::int64_t ldc, bool accumulate) {
  gemm<double>(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}

#if KILN_CPU_ONEDNN
namespace {

// A oneDNN matmul for one product's sizes and layouts with its operands' memory objects,
// which each call points at its data.
struct RepeatedProduct {
  std::optional<dnnl::matmul> product;  // nullopt: oneDNN has no kernel for it (sgemm runs it)
  dnnl::memory a, b, c;
};

// What a kept matmul is made of: its operands' descriptions and its attributes.
struct ProductDescs {
  dnnl::memory::desc a, b, c;
  dnnl::primitive_attr attr;
};

// Runs the matmul kept in this thread's `products` under `key`, made from `describe()` (a
// ProductDescs) on first use, on a, b and c. False (nothing written) where oneDNN has no kernel
// for it, which is kept as well. At most 256 are kept: sizes that keep changing start over.
template <std::size_t N, class Describe>
bool run_kept_product(std::map<std::array<std::int64_t, N>, RepeatedProduct>& products,
                      const std::array<std::int64_t, N>& key, Describe&& describe, const float* a, const float* b,
                      float* c) {
  auto it = products.find(key);
  if (it == products.end()) {
    if (products.size() >= 256) products.clear();
    RepeatedProduct made;
    try {
      const ProductDescs d = describe();
      dnnl::engine& engine = onednn_engine();
      made.a = dnnl::memory(d.a, engine, nullptr);
      made.b = dnnl::memory(d.b, engine, nullptr);
      made.c = dnnl::memory(d.c, engine, nullptr);
      made.product = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(d.a, d.b, d.c), d.attr, engine));
    } catch (const dnnl::error&) {
      made.product.reset();  // no kernel for these sizes, layouts or strides
    }
    it = products.emplace(key, std::move(made)).first;
  }
  RepeatedProduct& r = it->second;
  if (!r.product) return false;
  r.a.set_data_handle(const_cast<float*>(a));
  r.b.set_data_handle(const_cast<float*>(b));
  r.c.set_data_handle(c);
  dnnl::stream& stream = onednn_stream();
  r.product->execute(stream, {{DNNL_ARG_SRC, r.a}, {DNNL_ARG_WEIGHTS, r.b}, {DNNL_ARG_DST, r.c}});
  stream.wait();
  return true;
}

dnnl::memory::desc matrix_desc(std::int64_t rows, std::int64_t cols, const GemmLayout& layout) {
  using dnnl::memory;
  return memory::desc({rows, cols}, memory::data_type::f32,
                      layout.transposed ? memory::dims{1, layout.ld} : memory::dims{layout.ld, 1});
}

}  // namespace

void repeated_gemm_f32(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
                       const float* pa, const float* pb, float* pc, std::int64_t ldc, bool accumulate) {
  // Below 2^16 multiply-adds sgemm is as fast or faster (one thread on a Xeon VM: 17 x 9 x 33 at
  // 27 GFLOP/s against the primitive's 24, 32 x 32 x 32 at 99 against 90; 64 x 16 x 64 at 115
  // against 121). An empty product is below it too.
  constexpr std::int64_t kPrimitiveFloor = std::int64_t{1} << 16;
  if (a.transposed || avx2_sgemm() || m * n * k < kPrimitiveFloor)
    return gemm_f32(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
  // The key holds the team this thread runs (one thread inside a parallel region): oneDNN fixes
  // a matmul's thread count when it creates it.
  const std::array<std::int64_t, 9> key{m, n, k, b.transposed, a.ld, b.ld, ldc, accumulate, prepare_team()};
  thread_local std::map<std::array<std::int64_t, 9>, RepeatedProduct> products;
  const auto describe = [&] {
    ProductDescs d{matrix_desc(m, k, a), matrix_desc(k, n, b),
                   dnnl::memory::desc({m, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{ldc, 1}), {}};
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      d.attr.set_post_ops(sum);
    }
    return d;
  };
  // No kernel for these sizes or layouts: sgemm runs the product.
  if (!run_kept_product(products, key, describe, pa, pb, pc)) gemm_f32(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}

namespace {

// The distance between consecutive matrices of a batch, where they are evenly spaced in
// ascending order; nullopt otherwise.
std::optional<std::int64_t> batch_stride(const Extents& offsets) {
  if (offsets.size() < 2) return std::nullopt;
  const std::int64_t stride = offsets[1] - offsets[0];
  if (stride <= 0) return std::nullopt;
  for (std::size_t i = 2; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != stride) return std::nullopt;
  return stride;
}

// A batch of matrices [count, rows, cols], `stride` elements apart, in the layout given.
dnnl::memory::desc batch_desc(std::int64_t count, std::int64_t rows, std::int64_t cols, std::int64_t stride,
                              const GemmLayout& layout) {
  using dnnl::memory;
  return memory::desc({count, rows, cols}, memory::data_type::f32,
                      layout.transposed ? memory::dims{stride, 1, layout.ld} : memory::dims{stride, layout.ld, 1});
}

}  // namespace

bool batched_primitive_f32(const GemmOperand& a, const GemmOperand& b, std::int64_t count, std::int64_t m,
                           std::int64_t n, std::int64_t k, const float* pa, const float* pb, float* pc) {
  if (avx2_sgemm() || m == 0 || n == 0 || k == 0) return false;
  const std::optional<std::int64_t> sa = batch_stride(a.batch_offsets), sb = batch_stride(b.batch_offsets);
  if (!sa || !sb) return false;
  const std::array<std::int64_t, 11> key{count, m, n, k, a.layout.transposed, b.layout.transposed, a.layout.ld,
                                         b.layout.ld, *sa, *sb, prepare_team()};
  thread_local std::map<std::array<std::int64_t, 11>, RepeatedProduct> products;
  const auto describe = [&] {
    const dnnl::memory::desc c({count, m, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{m * n, n, 1});
    return ProductDescs{batch_desc(count, m, k, *sa, a.layout), batch_desc(count, k, n, *sb, b.layout), c, {}};
  };
  // Strides oneDNN takes no kernel for: the products run one by one.
  return run_kept_product(products, key, describe, pa + a.batch_offsets[0], pb + b.batch_offsets[0], pc);
}
#else
bool batched_primitive_f32(const GemmOperand&, const GemmOperand&, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, const float*, const float*, float*) {
  return false;
}
void repeated_gemm_f32(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
                       const float* pa, const float* pb, float* pc, std::int64_t ldc, bool accumulate) {
  gemm_f32(a, b, m, n, k, pa, pb, pc, ldc, accumulate);
}
#endif

}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::matmul(const Primitive& a, const Primitive& b) {
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  const std::int64_t m = shape.m, k = shape.k, n = shape.n;
  const Extents& batch = shape.batch;

  if (!cpu::is_native_float(a.dtype)) return cast(matmul(cast(a, DType::f32), cast(b, DType::f32)), a.dtype);

  CpuTensor out = cpu::empty(shape.out(), a.dtype);
  if (out.numel() == 0) return out;
  if (k == 0) return full(out.shape, 0.0, a.dtype, {});

  const Shape batch_shape(batch);
  const cpu::GemmOperand pa = cpu::gemm_operand(a, batch_shape), pb = cpu::gemm_operand(b, batch_shape);
  cpu::dispatch_float("matmul", a.dtype, [&]<class T>() { cpu::batched_gemm<T>(pa, pb, out); });
  return out;
}

}  // namespace kiln
