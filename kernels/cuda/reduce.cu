// Reductions, arg-reductions and scans of kiln::Cuda (backends/cuda/src/reduce.cpp). The
// input is contiguous and seen as [outer, n, inner] around the reduced dim: row r (one
// output, or one line of a scan), with o = r / inner and i = r % inner, is the n elements
// from o * n * inner + i at stride inner.
//
// Entry points, per element type t in f32, f64, i32, i64, u8 (u8 also runs bool):
// - reduce_<stage>_<op>_<t>, op in sum, prod, max, min (a mean is a sum with a divisor), all
//   with the parameters (out, in, rows, n, inner, parts, chunk, divisor):
//     rows:    one thread per row, in order;
//     tree:    one block of kTreeThreads threads per row, combined in shared memory;
//     parts:   one block per part of a row (`parts` parts of `chunk` elements), writing the
//              part's accumulator: out is [rows, parts] of the accumulator type;
//     combine: one thread per row reducing its parts' accumulators (in is [rows, parts]).
//   The finished value is the accumulator divided by `divisor` when it is not 0.
// - argmax_<rows|tree>_<t>, argmin_<rows|tree>_<t> (out i64, in, rows, n, inner): the first
//   index of the max (min), a NaN counting as the max (min).
// - cumsum_<t>, cumprod_<t> (out, in, rows, n, inner): one thread per line, a sequential scan.
//
// Accumulators: sums, products, means and scans of floats in double; of integers in the
// unsigned type of the element's width (u8 in 32 bits), which wraps exactly like a two's
// complement result cast back to the element type. Max and min compare in the element type
// and keep a NaN once seen.

// Threads per block of the tree kernels (the host launches them with this many).
#define KILN_TREE_THREADS 256

__device__ inline long long kiln_min(long long a, long long b) { return a < b ? a : b; }
__device__ inline long long thread_index() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

// False for every integer; --fmad=false and no fast-math keep it exact for floats.
template <class T> __device__ inline bool is_nan(T v) { return v != v; }

// The lowest and highest values of the max / min accumulators: their identities.
template <class T> struct Limits;
template <> struct Limits<float> {
  __device__ static float lowest() { return __uint_as_float(0xff800000u); }  // -inf
  __device__ static float highest() { return __uint_as_float(0x7f800000u); }  // +inf
};
template <> struct Limits<double> {
  __device__ static double lowest() { return __longlong_as_double((long long)0xfff0000000000000ull); }
  __device__ static double highest() { return __longlong_as_double(0x7ff0000000000000ll); }
};
template <> struct Limits<int> {
  __device__ static int lowest() { return -2147483647 - 1; }
  __device__ static int highest() { return 2147483647; }
};
template <> struct Limits<long long> {
  __device__ static long long lowest() { return -9223372036854775807ll - 1ll; }
  __device__ static long long highest() { return 9223372036854775807ll; }
};
template <> struct Limits<unsigned char> {
  __device__ static unsigned char lowest() { return 0; }
  __device__ static unsigned char highest() { return 255; }
};

template <class A> struct SumOp {
  __device__ static A identity() { return A(0); }
  __device__ static A combine(A a, A b) { return a + b; }
};
template <class A> struct ProdOp {
  __device__ static A identity() { return A(1); }
  __device__ static A combine(A a, A b) { return a * b; }
};
template <class A> struct MaxOp {
  __device__ static A identity() { return Limits<A>::lowest(); }
  __device__ static A combine(A a, A b) { return (b > a || is_nan(b)) ? b : a; }
};
template <class A> struct MinOp {
  __device__ static A identity() { return Limits<A>::highest(); }
  __device__ static A combine(A a, A b) { return (b < a || is_nan(b)) ? b : a; }
};

// The value written for an accumulator: divided by `divisor` (a mean) unless it is 0.
template <class A, class Out> __device__ inline Out finish(A acc, long long divisor) {
  return divisor != 0 ? Out(acc / A(divisor)) : Out(acc);
}

// One thread per row: out[r] = the reduction of row r, in order.
template <class Op, class In, class A, class Out>
__device__ void reduce_rows(Out* out, const In* in, long long rows, long long n, long long inner,
                            long long divisor) {
  const long long r = thread_index();
  if (r >= rows) return;
  const long long o = r / inner, i = r - o * inner;
  const In* row = in + o * n * inner + i;
  A acc = Op::identity();
  for (long long j = 0; j < n; ++j) acc = Op::combine(acc, A(row[j * inner]));
  out[r] = finish<A, Out>(acc, divisor);
}

// One block per item = r * parts + p: part p of row r, elements [p * chunk, (p + 1) * chunk)
// of it; the block's threads stride over the part, then combine their accumulators with a
// tree in shared memory. out[item] = the part's value.
template <class Op, class In, class A, class Out>
__device__ void reduce_tree(Out* out, const In* in, long long rows, long long n, long long inner, long long parts,
                            long long chunk, long long divisor) {
  __shared__ A partial[KILN_TREE_THREADS];
  const long long item = blockIdx.x;
  if (item >= rows * parts) return;  // uniform over the block: no barrier is skipped by some only
  const int t = threadIdx.x;
  const long long r = item / parts, p = item - r * parts;
  const long long o = r / inner, i = r - o * inner;
  const In* row = in + o * n * inner + i;
  const long long end = kiln_min(n, (p + 1) * chunk);
  A acc = Op::identity();
  for (long long j = p * chunk + t; j < end; j += KILN_TREE_THREADS) acc = Op::combine(acc, A(row[j * inner]));
  partial[t] = acc;
  __syncthreads();
  for (int w = KILN_TREE_THREADS / 2; w > 0; w >>= 1) {
    if (t < w) partial[t] = Op::combine(partial[t], partial[t + w]);
    __syncthreads();
  }
  if (t == 0) out[item] = finish<A, Out>(partial[0], divisor);
}

// The four stages of one op on element type T with accumulator A.
#define KILN_REDUCE(op, Op, t, T, A)                                                                            \
  extern "C" __global__ void reduce_rows_##op##_##t(T* out, const T* in, long long rows, long long n,           \
                                                    long long inner, long long parts, long long chunk,           \
                                                    long long divisor) {                                        \
    reduce_rows<Op<A>, T, A, T>(out, in, rows, n, inner, divisor);                                              \
  }                                                                                                             \
  extern "C" __global__ void reduce_tree_##op##_##t(T* out, const T* in, long long rows, long long n,           \
                                                    long long inner, long long parts, long long chunk,           \
                                                    long long divisor) {                                        \
    reduce_tree<Op<A>, T, A, T>(out, in, rows, n, inner, parts, chunk, divisor);                                \
  }                                                                                                             \
  extern "C" __global__ void reduce_parts_##op##_##t(A* out, const T* in, long long rows, long long n,          \
                                                     long long inner, long long parts, long long chunk,          \
                                                     long long divisor) {                                       \
    reduce_tree<Op<A>, T, A, A>(out, in, rows, n, inner, parts, chunk, divisor);                                \
  }                                                                                                             \
  extern "C" __global__ void reduce_combine_##op##_##t(T* out, const A* in, long long rows, long long n,        \
                                                       long long inner, long long parts, long long chunk,        \
                                                       long long divisor) {                                     \
    reduce_rows<Op<A>, A, A, T>(out, in, rows, n, inner, divisor);                                              \
  }

// Sums and products: floats in double, integers in their width's unsigned type.
#define KILN_REDUCE_ADDITIVE(t, T, A) KILN_REDUCE(sum, SumOp, t, T, A) KILN_REDUCE(prod, ProdOp, t, T, A)
// Max and min: in the element type.
#define KILN_REDUCE_COMPARE(t, T) KILN_REDUCE(max, MaxOp, t, T, T) KILN_REDUCE(min, MinOp, t, T, T)

KILN_REDUCE_ADDITIVE(f32, float, double)
KILN_REDUCE_ADDITIVE(f64, double, double)
KILN_REDUCE_ADDITIVE(i32, int, unsigned int)
KILN_REDUCE_ADDITIVE(i64, long long, unsigned long long)
KILN_REDUCE_ADDITIVE(u8, unsigned char, unsigned int)
KILN_REDUCE_COMPARE(f32, float)
KILN_REDUCE_COMPARE(f64, double)
KILN_REDUCE_COMPARE(i32, int)
KILN_REDUCE_COMPARE(i64, long long)
KILN_REDUCE_COMPARE(u8, unsigned char)

// ---- arg-reductions

// Whether v replaces a best value of a lower index: strictly better, or the first NaN.
template <bool Max, class T> __device__ inline bool better(T v, T best) {
  const bool strict = Max ? v > best : v < best;
  return strict || (is_nan(v) && !is_nan(best));
}

// One thread per row scans it in order.
template <bool Max, class T>
__device__ void arg_rows(long long* out, const T* in, long long rows, long long n, long long inner) {
  const long long r = thread_index();
  if (r >= rows) return;
  const long long o = r / inner, i = r - o * inner;
  const T* row = in + o * n * inner + i;
  T best = row[0];
  long long index = 0;
  for (long long j = 1; j < n; ++j) {
    const T v = row[j * inner];
    if (better<Max>(v, best)) {
      best = v;
      index = j;
    }
  }
  out[r] = index;
}

// One block per row: each thread keeps the first best of its strided elements (ascending
// indices); the tree takes the better value, or on a tie (or two NaNs) the lower index.
template <bool Max, class T>
__device__ void arg_tree(long long* out, const T* in, long long rows, long long n, long long inner) {
  __shared__ T best_value[KILN_TREE_THREADS];
  __shared__ long long best_index[KILN_TREE_THREADS];
  const long long r = blockIdx.x;
  if (r >= rows) return;  // uniform over the block
  const int t = threadIdx.x;
  const long long o = r / inner, i = r - o * inner;
  const T* row = in + o * n * inner + i;
  long long index = -1;  // none yet: a thread past the row's end keeps it
  T best = T(0);
  for (long long j = t; j < n; j += KILN_TREE_THREADS) {
    const T v = row[j * inner];
    if (index < 0 || better<Max>(v, best)) {
      best = v;
      index = j;
    }
  }
  best_value[t] = best;
  best_index[t] = index;
  __syncthreads();
  for (int w = KILN_TREE_THREADS / 2; w > 0; w >>= 1) {
    if (t < w) {
      const T av = best_value[t], bv = best_value[t + w];
      const long long ai = best_index[t], bi = best_index[t + w];
      const bool take = bi >= 0 && (ai < 0 || better<Max>(bv, av) || (!better<Max>(av, bv) && bi < ai));
      if (take) {
        best_value[t] = bv;
        best_index[t] = bi;
      }
    }
    __syncthreads();
  }
  if (t == 0) out[r] = best_index[0];
}

#define KILN_ARG_REDUCE(t, T)                                                                                   \
  extern "C" __global__ void argmax_rows_##t(long long* out, const T* in, long long rows, long long n,          \
                                             long long inner) {                                                 \
    arg_rows<true, T>(out, in, rows, n, inner);                                                                 \
  }                                                                                                             \
  extern "C" __global__ void argmin_rows_##t(long long* out, const T* in, long long rows, long long n,          \
                                             long long inner) {                                                 \
    arg_rows<false, T>(out, in, rows, n, inner);                                                                \
  }                                                                                                             \
  extern "C" __global__ void argmax_tree_##t(long long* out, const T* in, long long rows, long long n,          \
                                             long long inner) {                                                 \
    arg_tree<true, T>(out, in, rows, n, inner);                                                                 \
  }                                                                                                             \
  extern "C" __global__ void argmin_tree_##t(long long* out, const T* in, long long rows, long long n,          \
                                             long long inner) {                                                 \
    arg_tree<false, T>(out, in, rows, n, inner);                                                                \
  }

KILN_ARG_REDUCE(f32, float)
KILN_ARG_REDUCE(f64, double)
KILN_ARG_REDUCE(i32, int)
KILN_ARG_REDUCE(i64, long long)
KILN_ARG_REDUCE(u8, unsigned char)

// ---- scans: out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], each step rounded (or wrapped)
// to the element type from the running accumulator. The output is contiguous.
template <bool Sum, class T, class A>
__device__ void scan(T* out, const T* in, long long rows, long long n, long long inner) {
  const long long r = thread_index();
  if (r >= rows) return;
  const long long o = r / inner, i = r - o * inner;
  const long long base = o * n * inner + i;
  A acc = A(Sum ? 0 : 1);
  for (long long j = 0; j < n; ++j) {
    const long long k = base + j * inner;
    acc = Sum ? acc + A(in[k]) : acc * A(in[k]);
    out[k] = T(acc);
  }
}

#define KILN_SCAN(t, T, A)                                                                                      \
  extern "C" __global__ void cumsum_##t(T* out, const T* in, long long rows, long long n, long long inner) {     \
    scan<true, T, A>(out, in, rows, n, inner);                                                                  \
  }                                                                                                             \
  extern "C" __global__ void cumprod_##t(T* out, const T* in, long long rows, long long n, long long inner) {    \
    scan<false, T, A>(out, in, rows, n, inner);                                                                 \
  }

KILN_SCAN(f32, float, double)
KILN_SCAN(f64, double, double)
KILN_SCAN(i32, int, unsigned int)
KILN_SCAN(i64, long long, unsigned long long)
KILN_SCAN(u8, unsigned char, unsigned int)
