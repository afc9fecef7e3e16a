// Convolution and max pooling, NCHW (backends/cuda/src/conv.cpp), f32 and f64 (the host
// runs f16 / bf16 through f32).
//
// GEMM convolution's column matrices: for a chunk of samples, column entry (n, g, k, p), with
// k = (ic * KH + ky) * KW + kx over the group's input channels and the kernel taps and
// p = oy * OW + ox over the output positions, holds x[n, g * CG + ic, oy * SH - PH + ky * DH,
// ox * SW - PW + kx * DW], 0 where that falls in the padding. It sits at
// cols + n * cols_sample + g * cols_group + k * cols_row + p (p is contiguous), so the host
// picks the layout its matmul needs. x is read (im2col) or written (col2im) through its
// strides xs_n, xs_c, xs_h, xs_w. Both kernels take the same parameters (KILN_COLUMN_PARAMS).
// - im2col: one thread per column entry, ox fastest, so neighbouring threads write
//   neighbouring entries.
// - col2im: one thread per input element, summing the entries that read it over the taps
//   (ky, kx) in a fixed order: deterministic, no atomics.
//
// Max pooling: one thread per output, the window scanned in (kh, kw) order with the CPU's
// rules: padding never wins (it is -inf, and only taps inside the plane are read), ties keep
// the first tap, NaN wins (a later NaN replaces an earlier one), and a window of only -inf
// keeps its first tap inside the plane (or, with no tap inside, the nearest position). The
// index is the flat ih * W + iw of the input plane, i64.
//
// add_bias adds bias[c] to every element of channel c of an NCHW tensor; accumulate adds one
// contiguous tensor into another (the weight gradient's chunks).
//
// Entries, each for f32 (float) and f64 (double): im2col_<t>, col2im_<t>, max_pool2d_<t>,
// add_bias_<t>, accumulate_<t>.

struct Columns {
  long long C, H, W, KH, KW, OH, OW, CG, SH, SW, PH, PW, DH, DW;
  long long cols_sample, cols_group, cols_row, xs_n, xs_c, xs_h, xs_w;
};

#define KILN_COLUMN_PARAMS                                                                                     \
  long long n, long long C, long long H, long long W, long long KH, long long KW, long long OH, long long OW,  \
      long long CG, long long SH, long long SW, long long PH, long long PW, long long DH, long long DW,        \
      long long cols_sample, long long cols_group, long long cols_row, long long xs_n, long long xs_c,         \
      long long xs_h, long long xs_w
#define KILN_COLUMN_ARGS                                                                                       \
  n, Columns { C, H, W, KH, KW, OH, OW, CG, SH, SW, PH, PW, DH, DW, cols_sample, cols_group, cols_row, xs_n,   \
               xs_c, xs_h, xs_w }

// Where column entry (sample, channel, ky, kx, p) sits.
__device__ inline long long column_index(const Columns& c, long long sample, long long channel, long long ky,
                                         long long kx, long long p) {
  const long long k = ((channel % c.CG) * c.KH + ky) * c.KW + kx;
  return sample * c.cols_sample + (channel / c.CG) * c.cols_group + k * c.cols_row + p;
}

template <class T> __device__ inline void im2col(T* cols, const T* x, long long n, const Columns c) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // i runs over (sample, channel, ky, kx, oy, ox).
  const long long ox = i % c.OW, oy = (i / c.OW) % c.OH;
  long long rest = i / (c.OW * c.OH);
  const long long kx = rest % c.KW, ky = (rest / c.KW) % c.KH;
  rest /= c.KW * c.KH;
  const long long channel = rest % c.C, sample = rest / c.C;
  const long long iy = oy * c.SH - c.PH + ky * c.DH, ix = ox * c.SW - c.PW + kx * c.DW;
  T v = T(0);
  if (iy >= 0 && iy < c.H && ix >= 0 && ix < c.W) v = x[sample * c.xs_n + channel * c.xs_c + iy * c.xs_h + ix * c.xs_w];
  cols[column_index(c, sample, channel, ky, kx, oy * c.OW + ox)] = v;
}

// The output row (or column) that input position i meets through tap k, or -1.
__device__ inline long long source_index(long long i, long long k, long long s, long long p, long long d,
                                         long long n) {
  const long long t = i + p - k * d;
  if (t < 0 || t % s != 0) return -1;
  const long long o = t / s;
  return o < n ? o : -1;
}

template <class T> __device__ inline void col2im(T* dx, const T* cols, long long n, const Columns c) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long ix = i % c.W, iy = (i / c.W) % c.H, channel = (i / (c.W * c.H)) % c.C,
                  sample = i / (c.W * c.H * c.C);
  T acc = T(0);
  for (long long ky = 0; ky < c.KH; ++ky) {
    const long long oy = source_index(iy, ky, c.SH, c.PH, c.DH, c.OH);
    if (oy < 0) continue;
    for (long long kx = 0; kx < c.KW; ++kx) {
      const long long ox = source_index(ix, kx, c.SW, c.PW, c.DW, c.OW);
      if (ox < 0) continue;
      acc += cols[column_index(c, sample, channel, ky, kx, oy * c.OW + ox)];
    }
  }
  dx[sample * c.xs_n + channel * c.xs_c + iy * c.xs_h + ix * c.xs_w] = acc;
}

template <class T> __device__ inline T negative_infinity();
template <> __device__ inline float negative_infinity<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ inline double negative_infinity<double>() {
  return -__longlong_as_double(0x7ff0000000000000ll);
}

// x contiguous [planes, H, W]; out and index contiguous [planes, OH, OW]; n = their elements.
template <class T>
__device__ inline void max_pool2d(T* out, long long* index, const T* x, long long n, long long H, long long W,
                                  long long OH, long long OW, long long KH, long long KW, long long SH, long long SW,
                                  long long PH, long long PW, long long DH, long long DW) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long ow = i % OW, oh = (i / OW) % OH, plane = i / (OW * OH);
  const T* in = x + plane * H * W;
  const long long ih0 = oh * SH - PH, iw0 = ow * SW - PW;
  T best = negative_infinity<T>();
  long long at = -1;
  for (long long kh = 0; kh < KH; ++kh) {
    const long long ih = ih0 + kh * DH;
    if (ih < 0 || ih >= H) continue;
    for (long long kw = 0; kw < KW; ++kw) {
      const long long iw = iw0 + kw * DW;
      if (iw < 0 || iw >= W) continue;
      const T v = in[ih * W + iw];
      if (v > best || v != v) {
        best = v;
        at = ih * W + iw;
      }
    }
  }
  if (at < 0) {
    // No tap won (only -inf, or no tap inside the plane): the first position of the window
    // inside the plane, or the nearest one to it.
    long long a = ih0, b = iw0;
    while (a < 0) a += DH;
    while (b < 0) b += DW;
    at = (a < H - 1 ? a : H - 1) * W + (b < W - 1 ? b : W - 1);
  }
  out[i] = best;
  index[i] = at;
}

// y contiguous NCHW with n elements; bias read at c * bias_stride.
template <class T>
__device__ inline void add_bias(T* y, const T* bias, long long n, long long channels, long long plane,
                                long long bias_stride) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = y[i] + bias[((i / plane) % channels) * bias_stride];
}

template <class T> __device__ inline void accumulate(T* dst, const T* src, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  dst[i] = dst[i] + src[i];
}

#define KILN_CONV_ENTRIES(SUFFIX, T)                                                                           \
  extern "C" __global__ void im2col_##SUFFIX(T* cols, const T* x, KILN_COLUMN_PARAMS) {                       \
    im2col<T>(cols, x, KILN_COLUMN_ARGS);                                                                      \
  }                                                                                                            \
  extern "C" __global__ void col2im_##SUFFIX(T* dx, const T* cols, KILN_COLUMN_PARAMS) {                      \
    col2im<T>(dx, cols, KILN_COLUMN_ARGS);                                                                     \
  }                                                                                                            \
  extern "C" __global__ void max_pool2d_##SUFFIX(T* out, long long* index, const T* x, long long n,           \
                                                 long long H, long long W, long long OH, long long OW,         \
                                                 long long KH, long long KW, long long SH, long long SW,       \
                                                 long long PH, long long PW, long long DH, long long DW) {     \
    max_pool2d<T>(out, index, x, n, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW);                             \
  }                                                                                                            \
  extern "C" __global__ void add_bias_##SUFFIX(T* y, const T* bias, long long n, long long channels,          \
                                               long long plane, long long bias_stride) {                       \
    add_bias<T>(y, bias, n, channels, plane, bias_stride);                                                     \
  }                                                                                                            \
  extern "C" __global__ void accumulate_##SUFFIX(T* dst, const T* src, long long n) {                         \
    accumulate<T>(dst, src, n);                                                                                \
  }

KILN_CONV_ENTRIES(f32, float)
KILN_CONV_ENTRIES(f64, double)
