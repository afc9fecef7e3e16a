// Gather and scatter along one dim (backends/cuda/src/indexing.cpp), torch.gather /
// torch.scatter semantics. The host hands every operand over contiguous and viewed as
// [outer, extent along dim, inner], with the input cut to the index's extents outside dim,
// so one flat index and the dim's extents locate every element.
//
// An index is i32 or i64, negative entries counting from the end. One out of range sets
// *bad (the host reads the flag back and raises the CPU backend's error); gather then reads
// entry 0 of the dim and scatter skips it, so no access leaves the buffers.
//
// - gather: one thread per output element: out[o, k, i] = x[o, index[o, k, i], i].
// - scatter: one thread per index position outside dim (o, i), walking its fiber along dim
//   in order: out[o, index[o, k, i], i] = combine(that element, src[o, k, i]). Two positions
//   write disjoint elements, and within a fiber the entries apply in index order (assign:
//   the last duplicate wins; add: duplicates accumulate in order), as on the CPU: the result
//   is deterministic and bit-for-bit the CPU's, with no atomics.
//
// Moves go by element size (unsigned char, unsigned short, uint, unsigned long long), so one
// entry serves every dtype of that size; adds go by dtype: bool adds as logical or, f16 and
// bf16 go through f32 and round back to 16 bits at each add, as the CPU adds them.
//
// Entries: gather_<u8|u16|u32|u64>_<i32|i64>, scatter_assign_<u8|u16|u32|u64>_<i32|i64>,
// scatter_add_<f32|f64|f16|bf16|i32|i64|u8|bool>_<i32|i64>.

template <class I> __device__ inline long long wrap_index(I value, long long size, int* bad) {
  long long j = (long long)value;
  if (j < 0) j += size;
  if (j < 0 || j >= size) {
    *bad = 1;
    return -1;
  }
  return j;
}

template <class T, class I>
__device__ inline void gather(T* out, const T* x, const I* index, long long n, long long x_dim, long long index_dim,
                              long long inner, int* bad) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const long long i = t % inner, o = t / inner / index_dim;
  long long j = wrap_index(index[t], x_dim, bad);
  if (j < 0) j = 0;
  out[t] = x[(o * x_dim + j) * inner + i];
}

struct Assign {
  template <class T> __device__ static T apply(T, T v) { return v; }
};
// Integers wrap on overflow (through their unsigned types, where it is defined).
struct Add {
  template <class T> __device__ static T apply(T acc, T v) { return (T)(acc + v); }
  __device__ static int apply(int acc, int v) { return (int)((uint)acc + (uint)v); }
  __device__ static long long apply(long long acc, long long v) {
    return (long long)((unsigned long long)acc + (unsigned long long)v);
  }
};
struct Or {
  __device__ static unsigned char apply(unsigned char acc, unsigned char v) {
    return (acc != 0 || v != 0) ? (unsigned char)1 : (unsigned char)0;
  }
};
struct AddF16 {
  __device__ static unsigned short apply(unsigned short acc, unsigned short v) {
    return (unsigned short)kiln_f32_to_f16(kiln_f16_to_f32(acc) + kiln_f16_to_f32(v));
  }
};
struct AddBF16 {
  __device__ static unsigned short apply(unsigned short acc, unsigned short v) {
    return (unsigned short)kiln_f32_to_bf16(kiln_bf16_to_f32(acc) + kiln_bf16_to_f32(v));
  }
};

// out [outer, out_dim, inner]; src and index [outer, fiber, inner]; `positions` = outer * inner.
template <class Op, class T, class I>
__device__ inline void scatter(T* out, const T* src, const I* index, long long positions, long long out_dim,
                               long long fiber, long long inner, int* bad) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= positions) return;
  const long long i = t % inner, o = t / inner;
  T* target = out + o * out_dim * inner + i;
  const T* from = src + o * fiber * inner + i;
  const I* at = index + o * fiber * inner + i;
  for (long long k = 0; k < fiber; ++k) {
    const long long j = wrap_index(at[k * inner], out_dim, bad);
    if (j < 0) continue;
    target[j * inner] = Op::apply(target[j * inner], from[k * inner]);
  }
}

#define KILN_GATHER(NAME, T, I)                                                                                   \
  extern "C" __global__ void NAME(T* out, const T* x, const I* index, long long n, long long x_dim,             \
                                  long long index_dim, long long inner, int* bad) {                            \
    gather<T, I>(out, x, index, n, x_dim, index_dim, inner, bad);                                              \
  }
#define KILN_SCATTER(NAME, OP, T, I)                                                                              \
  extern "C" __global__ void NAME(T* out, const T* src, const I* index, long long positions, long long out_dim, \
                                  long long fiber, long long inner, int* bad) {                                \
    scatter<OP, T, I>(out, src, index, positions, out_dim, fiber, inner, bad);                                 \
  }

KILN_GATHER(gather_u8_i32, unsigned char, int)
KILN_GATHER(gather_u16_i32, unsigned short, int)
KILN_GATHER(gather_u32_i32, uint, int)
KILN_GATHER(gather_u64_i32, unsigned long long, int)
KILN_GATHER(gather_u8_i64, unsigned char, long long)
KILN_GATHER(gather_u16_i64, unsigned short, long long)
KILN_GATHER(gather_u32_i64, uint, long long)
KILN_GATHER(gather_u64_i64, unsigned long long, long long)

KILN_SCATTER(scatter_assign_u8_i32, Assign, unsigned char, int)
KILN_SCATTER(scatter_assign_u16_i32, Assign, unsigned short, int)
KILN_SCATTER(scatter_assign_u32_i32, Assign, uint, int)
KILN_SCATTER(scatter_assign_u64_i32, Assign, unsigned long long, int)
KILN_SCATTER(scatter_assign_u8_i64, Assign, unsigned char, long long)
KILN_SCATTER(scatter_assign_u16_i64, Assign, unsigned short, long long)
KILN_SCATTER(scatter_assign_u32_i64, Assign, uint, long long)
KILN_SCATTER(scatter_assign_u64_i64, Assign, unsigned long long, long long)

KILN_SCATTER(scatter_add_f32_i32, Add, float, int)
KILN_SCATTER(scatter_add_f64_i32, Add, double, int)
KILN_SCATTER(scatter_add_f16_i32, AddF16, unsigned short, int)
KILN_SCATTER(scatter_add_bf16_i32, AddBF16, unsigned short, int)
KILN_SCATTER(scatter_add_i32_i32, Add, int, int)
KILN_SCATTER(scatter_add_i64_i32, Add, long long, int)
KILN_SCATTER(scatter_add_u8_i32, Add, unsigned char, int)
KILN_SCATTER(scatter_add_bool_i32, Or, unsigned char, int)
KILN_SCATTER(scatter_add_f32_i64, Add, float, long long)
KILN_SCATTER(scatter_add_f64_i64, Add, double, long long)
KILN_SCATTER(scatter_add_f16_i64, AddF16, unsigned short, long long)
KILN_SCATTER(scatter_add_bf16_i64, AddBF16, unsigned short, long long)
KILN_SCATTER(scatter_add_i32_i64, Add, int, long long)
KILN_SCATTER(scatter_add_i64_i64, Add, long long, long long)
KILN_SCATTER(scatter_add_u8_i64, Add, unsigned char, long long)
KILN_SCATTER(scatter_add_bool_i64, Or, unsigned char, long long)
