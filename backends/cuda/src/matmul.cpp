// Matrix multiplication on the CUDA and ROCm backends, [..., m, k] @ [..., k, n] with
// NumPy-broadcast batch dims: cuBLAS on CUDA, kernels/cuda/gemm.cu on ROCm. Each operand is
// read in place when its matrices are row- or column-major (a transposed view is a
// transposed operand, no copy) and its batches lie at one stride (0 for a broadcast
// operand); otherwise it is copied first.
// cuBLAS: row-major C = A B is column-major C^T = B^T A^T, so it gets B first; a contiguous
// batch times one shared matrix is one GEMM of batch * m rows; f16 and bf16 multiply on
// tensor cores and accumulate in f32; f32 and f64 compute in their own precision. The own
// kernel computes f32 and f64, and f16 / bf16 through f32, rounding once.
#include "runtime.hpp"

#include "kiln/ops/matmul.hpp"

namespace kiln {

using gpu::Tensor;

namespace {

// One operand as a GEMM reads it: its matrices [rows, cols] at `data` + b * batch_stride,
// element (i, j) at i * ld + j, or at i + j * ld where `transposed` (column-major).
struct Operand {
  Tensor tensor;  // keeps the memory (a copy, where one was made)
  bool transposed = false;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;
};

// x's matrices [rows, cols] over the output's batch dims `batch`, read in place where their
// layout allows. `row_major_op`: the cuBLAS operation when the matrix is row-major (in the
// swapped column-major call, a row-major matrix is its own transpose's column-major form).
Operand operand(const Tensor& x, const Extents& batch, std::int64_t rows, std::int64_t cols) {
  const std::size_t r = x.shape.rank();
  const std::size_t nb = batch.size();
  // The operand's strides over the output's batch dims (0 where it broadcasts).
  auto batch_strides = [&](const Tensor& t) {
    std::vector<std::int64_t> s(nb, 0);
    const std::size_t own = t.shape.rank() - 2;
    for (std::size_t d = 0; d < own; ++d)
      if (t.shape[d] != 1) s[nb - own + d] = t.strides[d];
    return s;
  };
  // One stride for the flattened batch index, where the batches lie evenly spaced.
  auto even_stride = [&](const std::vector<std::int64_t>& s) -> std::optional<std::int64_t> {
    std::int64_t stride = 0;
    bool found = false;
    std::int64_t inner = 1;  // batches per step of dim d
    for (std::size_t d = nb; d-- > 0;) {
      if (batch[d] != 1) {
        if (!found && s[d] % inner == 0) {
          stride = s[d] / inner;
          found = true;
        }
        if (s[d] != stride * inner) return std::nullopt;
      }
      inner *= batch[d];
    }
    return stride;
  };
  const std::int64_t s_row = x.strides[r - 2], s_col = x.strides[r - 1];
  const bool row_major = (cols == 1 || s_col == 1) && (rows == 1 || s_row >= std::max<std::int64_t>(1, cols));
  const bool col_major = !row_major && (rows == 1 || s_row == 1) && (cols == 1 || s_col >= std::max<std::int64_t>(1, rows));
  if (row_major || col_major) {
    if (auto stride = even_stride(batch_strides(x))) {
      Operand o{x, !row_major, 0, *stride};
      if (row_major) o.ld = rows == 1 ? std::max<std::int64_t>(1, cols) : s_row;
      else o.ld = cols == 1 ? std::max<std::int64_t>(1, rows) : s_col;
      o.ld = std::max<std::int64_t>(o.ld, row_major ? cols : rows);
      return o;
    }
  }
  // A dense copy over the whole batch.
  Extents dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  const Tensor c = gpu::contiguous(strided::broadcast(x, Shape(dims)));
  return {c, false, std::max<std::int64_t>(1, cols), rows * cols};
}

#if !defined(KILN_GPU_HIP)
cudaDataType_t data_type(DType d) {
  switch (d) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: KILN_FAIL("matmul: the " KILN_GPU_NAME " backend multiplies float tensors, got {}", d);
  }
}

int as_int(std::int64_t v, std::string_view what) {
  KILN_CHECK(v <= 0x7fffffff, "matmul: {} {} exceeds cuBLAS's 32-bit sizes", what, v);
  return static_cast<int>(v);
}
#endif

}  // namespace

Gpu::Primitive Gpu::matmul(const Primitive& a, const Primitive& b) {
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  KILN_CHECK(a.device == b.device, "matmul: {} on " KILN_GPU_NAME " device {} @ {} on device {}", a.shape, a.device, b.shape,
             b.device);
  const std::int64_t m = shape.m, k = shape.k, n = shape.n;
  std::int64_t batches = 1;
  for (auto d : shape.batch) batches *= d;
  Tensor out = gpu::empty(shape.out(), a.dtype, a.device);
  if (out.numel() == 0) return out;
  gpu::Context& context = gpu::Context::get(a.device);
  context.activate();
  if (k == 0) return gpu::zeros(shape.out(), a.dtype, a.device);  // an empty sum
#if defined(KILN_GPU_HIP)
  // The own kernel: f32 and f64; f16 and bf16 through f32, rounded once.
  if (gpu::is_half(a.dtype)) return gpu::cast(matmul(gpu::cast(a, DType::f32), gpu::cast(b, DType::f32)), a.dtype);
  const Operand A = operand(a, shape.batch, m, k);
  const Operand B = operand(b, shape.batch, k, n);
  const std::int64_t a_row = A.transposed ? 1 : A.ld, a_col = A.transposed ? A.ld : 1;
  const std::int64_t b_row = B.transposed ? 1 : B.ld, b_col = B.transposed ? B.ld : 1;
  const std::int64_t tiles = ((m + 15) / 16) * ((n + 15) / 16) * batches;
  const gpu::Kernel& kernel = gpu::file_kernel(a.device, "gemm", {}, a.dtype == DType::f64 ? "gemm_f64" : "gemm_f32");
  const double started = context.profile_begin();
  gpu::launch_blocks(a.device, kernel, tiles, 256, 0, out.buffer->data, gpu::address(A.tensor),
                     gpu::address(B.tensor), m, n, k, a_row, a_col, A.batch_stride, b_row, b_col, B.batch_stride);
  context.profile_end("gemm", started);
  return out;
#else
  Operand A = operand(a, shape.batch, m, k);
  const Operand B = operand(b, shape.batch, k, n);
  // A contiguous batch of row-major A over one shared B: one GEMM of batches * m rows.
  std::int64_t rows = m, count = batches;
  if (batches > 1 && B.batch_stride == 0 && !A.transposed && A.batch_stride == m * A.ld) {
    rows = m * batches;
    count = 1;
  }
  const cudaDataType_t type = data_type(a.dtype);
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const bool f64 = a.dtype == DType::f64;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  auto op = [](const Operand& o) { return o.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; };
  // Column-major: C^T [n, rows] = op(B^T) [n, k] * op(A^T) [k, rows].
  const double started = context.profile_begin();
  KILN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      context.cublas(), op(B), op(A), as_int(n, "a size of"), as_int(rows, "a size of"), as_int(k, "a size of"),
      alpha, gpu::address(B.tensor), type, as_int(B.ld, "a leading dimension of"), B.batch_stride,
      gpu::address(A.tensor), type, as_int(A.ld, "a leading dimension of"), A.batch_stride, beta, out.buffer->data,
      type, as_int(n, "a size of"), m * n, as_int(count, "a batch count of"), compute, CUBLAS_GEMM_DEFAULT));
  context.profile_end("cublas gemm", started);
  return out;
#endif
}

}  // namespace kiln
