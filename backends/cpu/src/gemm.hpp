// How matmul's operands reach a GEMM without copies (matmul.cpp), shared with the matmul
// programs (matmul_program.cpp). Private to backends/cpu/src.
#pragma once

#include "internal.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::cpu {

// How a matrix's two dims map onto a row-major GEMM operand without a copy: either rows
// are `ld` elements apart with unit column stride ('N'), or it is the transpose of such a
// matrix ('T': columns `ld` apart with unit row stride).
struct GemmLayout {
  bool transposed = false;
  std::int64_t ld = 1;
};

// One operand as the GEMM sees it: its batch-broadcast view and its matrix layout.
struct GemmOperand {
  CpuTensor view;  // shape batch + [rows, cols]
  GemmLayout layout;
  Extents batch_offsets;  // element offset of each batch matrix, in row-major batch order
};

// x [..., rows, cols] broadcast over `batch`, as a GEMM operand (copied only where its
// matrices have no GEMM layout: a broadcast or sliced-column matrix).
GemmOperand gemm_operand(const CpuTensor& x, const Shape& batch);

// Whether the batch of products a @ b is one product: a's row-major matrices laid end to end
// times one shared b (or a batch of one), (count·m × k) @ (k × n).
bool folds_to_one_gemm(const GemmOperand& a, const GemmOperand& b, std::int64_t m);

// C [m, n] (rows ldc apart) = A @ B, or C += A @ B where `accumulate` (the GEMM adds C in as
// it writes it: no pass of its own), A and B in the layouts given: oneDNN's sgemm for f32
// (Eigen's in the embedded build), Eigen's for f64. On the calling thread's team.
void gemm_f32(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
              const float* pa, const float* pb, float* pc, std::int64_t ldc, bool accumulate = false);
// gemm_f32 for a product that runs many times with the same sizes and layouts (attention's
// tiles): through a oneDNN matmul primitive made once per calling thread and shape, where A is
// not transposed and oneDNN runs its AVX-512 kernels. One thread, at 256 x 512 x 64 (q kᵀ)
// and 256 x 64 x 512 (weights times v, accumulated) over a head of 2048 queries and keys,
// sgemm ran at 183-185 and 160-167 GFLOP/s, the primitive at 189-190 and 183-185. With A
// transposed (64 x 128 x 256) sgemm was faster, 172 against 165, and with oneDNN held to its
// AVX2 kernels the two ran within 3 % of each other, so those stay with sgemm, as do products of
// fewer than 2^16 multiply-adds, where the primitive's own cost per call outweighs its kernel.
void repeated_gemm_f32(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
                       const float* pa, const float* pb, float* pc, std::int64_t ldc, bool accumulate = false);
void gemm_f64(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
              const double* pa, const double* pb, double* pc, std::int64_t ldc, bool accumulate = false);

}  // namespace kiln::cpu
