// Batched GEMM, C[b] = A[b] B[b], for the backends without a vendor BLAS (ROCm on Debian, which
// has no rocBLAS): 16 x 16 output tiles, one block of 256 threads each, staging 16 x 16 tiles
// of A and B in shared memory per step along k. A(i, p) is a[b * a_batch + i * a_row + p * a_col],
// so row-major, transposed and broadcast (batch stride 0) operands are read in place; C is
// dense [batches, m, n]. Blocks cover batches * ceil(m / 16) * ceil(n / 16) tiles, in that order.

#define KILN_GEMM_TILE 16

template <class T>
__device__ void gemm(T* c, const T* a, const T* b, long long m, long long n, long long k, long long a_row,
                     long long a_col, long long a_batch, long long b_row, long long b_col, long long b_batch) {
  __shared__ T tile_a[KILN_GEMM_TILE][KILN_GEMM_TILE + 1];
  __shared__ T tile_b[KILN_GEMM_TILE][KILN_GEMM_TILE + 1];
  const long long tiles_n = (n + KILN_GEMM_TILE - 1) / KILN_GEMM_TILE;
  const long long tiles_m = (m + KILN_GEMM_TILE - 1) / KILN_GEMM_TILE;
  long long block = blockIdx.x;
  const long long tile_col = block % tiles_n;
  block /= tiles_n;
  const long long tile_row = block % tiles_m;
  const long long batch = block / tiles_m;
  const int tx = threadIdx.x % KILN_GEMM_TILE, ty = threadIdx.x / KILN_GEMM_TILE;
  const long long row = tile_row * KILN_GEMM_TILE + ty, col = tile_col * KILN_GEMM_TILE + tx;
  a += batch * a_batch;
  b += batch * b_batch;
  T sum = T(0);
  for (long long p0 = 0; p0 < k; p0 += KILN_GEMM_TILE) {
    tile_a[ty][tx] = row < m && p0 + tx < k ? a[row * a_row + (p0 + tx) * a_col] : T(0);
    tile_b[ty][tx] = p0 + ty < k && col < n ? b[(p0 + ty) * b_row + col * b_col] : T(0);
    __syncthreads();
    for (int q = 0; q < KILN_GEMM_TILE; ++q) sum += tile_a[ty][q] * tile_b[q][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[batch * m * n + row * n + col] = sum;
}

extern "C" __global__ void gemm_f32(float* c, const float* a, const float* b, long long m, long long n, long long k,
                                    long long a_row, long long a_col, long long a_batch, long long b_row,
                                    long long b_col, long long b_batch) {
  gemm<float>(c, a, b, m, n, k, a_row, a_col, a_batch, b_row, b_col, b_batch);
}

extern "C" __global__ void gemm_f64(double* c, const double* a, const double* b, long long m, long long n,
                                    long long k, long long a_row, long long a_col, long long a_batch, long long b_row,
                                    long long b_col, long long b_batch) {
  gemm<double>(c, a, b, m, n, k, a_row, a_col, a_batch, b_row, b_col, b_batch);
}
