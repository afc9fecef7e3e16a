// Stable sort along a dim of kiln::Cuda (backends/cuda/src/sort.cpp), exactly the CPU
// backend's order: NaN sorts last ascending and first descending, equal values (and NaNs
// among themselves) keep their input order in both directions, -0.0 and 0.0 compare equal.
//
// A bottom-up merge sort of every line of the contiguous input seen as [outer, n, inner] (a
// line is n elements at stride inner). Elements carry their input position, and compare by
// (key, position): a strict total order, so sorting by it is stable, and an element's place
// in the merge of two sorted runs is its place in its own run plus the count of the other
// run's elements before it, found by binary search. One thread per element and pass,
// log2(n) passes, every buffer keeping the input's layout.
//
// Entry points, per element type t in f32, f64, i32, i64, u8 (u8 also runs bool):
// - sort_init_<t>(values, indices, in, total, n, inner): values = in, indices = position
//   along the line (runs of one element);
// - sort_merge_<ascending|descending>_<t>(dst_values, dst_indices, src_values, src_indices,
//   total, n, inner, width): merges each pair of sorted runs of `width` elements into one
//   of 2 * width (the last runs of a line may be shorter).

__device__ inline long long kiln_min(long long a, long long b) { return a < b ? a : b; }
__device__ inline long long thread_index() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

// False for every integer; --fmad=false and no fast-math keep it exact for floats.
template <class T> __device__ inline bool is_nan(T v) { return v != v; }

// Whether key a sorts strictly before key b; same_key: neither does (two NaNs are the same).
template <bool Descending, class T> __device__ inline bool key_before(T a, T b) {
  if (Descending) return (is_nan(a) && !is_nan(b)) || a > b;
  return (!is_nan(a) && is_nan(b)) || a < b;
}
template <class T> __device__ inline bool same_key(T a, T b) { return a == b || (is_nan(a) && is_nan(b)); }

// The strict total order of a line's elements: key, then input position.
template <bool Descending, class T> __device__ inline bool before(T a, long long ia, T b, long long ib) {
  return key_before<Descending>(a, b) || (same_key(a, b) && ia < ib);
}

template <class T>
__device__ void sort_init(T* values, long long* indices, const T* in, long long total, long long n,
                          long long inner) {
  const long long t = thread_index();
  if (t >= total) return;
  values[t] = in[t];
  indices[t] = (t / inner) % n;
}

template <bool Descending, class T>
__device__ void sort_merge(T* dst_values, long long* dst_indices, const T* src_values, const long long* src_indices,
                           long long total, long long n, long long inner, long long width) {
  const long long t = thread_index();
  if (t >= total) return;
  const long long o = t / (n * inner), r = t - o * n * inner;
  const long long j = r / inner, i = r - j * inner;
  const long long base = o * n * inner + i;  // the line's element 0
  // The pair of runs holding j: [start, mid) and [mid, end).
  const long long start = j - j % (2 * width);
  const long long mid = kiln_min(start + width, n), end = kiln_min(start + 2 * width, n);
  long long own, lo, hi;  // j's place in its run, and the other run [lo, hi)
  if (j < mid) {
    own = j - start;
    lo = mid;
    hi = end;
  } else {
    own = j - mid;
    lo = start;
    hi = mid;
  }
  const T v = src_values[t];
  const long long vi = src_indices[t];
  // The other run is sorted: its elements before (v, vi) are a prefix; find its end.
  long long a = lo, b = hi;
  while (a < b) {
    const long long m = a + (b - a) / 2;
    const long long k = base + m * inner;
    if (before<Descending>(src_values[k], src_indices[k], v, vi)) a = m + 1;
    else b = m;
  }
  const long long p = base + (start + own + (a - lo)) * inner;
  dst_values[p] = v;
  dst_indices[p] = vi;
}

#define KILN_SORT(t, T)                                                                                         \
  extern "C" __global__ void sort_init_##t(T* values, long long* indices, const T* in, long long total,         \
                                           long long n, long long inner) {                                      \
    sort_init<T>(values, indices, in, total, n, inner);                                                         \
  }                                                                                                             \
  extern "C" __global__ void sort_merge_ascending_##t(T* dst_values, long long* dst_indices,                    \
                                                      const T* src_values, const long long* src_indices,        \
                                                      long long total, long long n, long long inner,             \
                                                      long long width) {                                        \
    sort_merge<false, T>(dst_values, dst_indices, src_values, src_indices, total, n, inner, width);             \
  }                                                                                                             \
  extern "C" __global__ void sort_merge_descending_##t(T* dst_values, long long* dst_indices,                   \
                                                       const T* src_values, const long long* src_indices,       \
                                                       long long total, long long n, long long inner,            \
                                                       long long width) {                                       \
    sort_merge<true, T>(dst_values, dst_indices, src_values, src_indices, total, n, inner, width);              \
  }

KILN_SORT(f32, float)
KILN_SORT(f64, double)
KILN_SORT(i32, int)
KILN_SORT(i64, long long)
KILN_SORT(u8, unsigned char)
