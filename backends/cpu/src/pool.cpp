// Pooling on NCHW tensors: max pooling (with PyTorch-format indices), average pooling and
// adaptive average pooling, forward and backward. The direct loops below are the reference
// and serve f64, max pooling and small inputs; f32 average pooling of larger inputs runs on
// oneDNN wherever oneDNN's padding rules give PyTorch's exact divisors. Max pooling stays our
// own: oneDNN's workspace is not PyTorch's indices, nor is its NaN rule PyTorch's. Its f32
// 2x2 windows at stride 2 take a vector kernel where AVX-512 is there.
// f16/bf16 compute through f32.
#include "internal.hpp"
#if KILN_CPU_ONEDNN
#include "onednn.hpp"
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace kiln::cpu {
namespace {

// Extents of one pooling problem: N*C planes of h x w in, oh x ow out.
struct Geometry {
  std::int64_t n, c, h, w, oh, ow;
  std::int64_t planes() const { return n * c; }
};

Geometry geometry(const Shape& x, const Shape& out) { return {x[0], x[1], x[2], x[3], out[2], out[3]}; }

// Rows of work handed to one thread at a time: about 32k window taps.
std::int64_t grain_for(std::int64_t work_per_item) {
  return std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, work_per_item));
}




// Runs `fn` on f32 copies of half-precision tensors and casts the result back.
template <class F>
CpuTensor via_f32(const CpuTensor& x, F&& fn) {
  return Cpu::cast(fn(Cpu::cast(x, DType::f32)), x.dtype);
}

// The output columns [lo, hi) whose input column c * stride + shift lies inside a row of
// `width`: the inner loops of the row-wise kernels run over exactly these.
struct ColumnRange {
  std::int64_t lo, hi, shift;
};
ColumnRange column_range(std::int64_t shift, std::int64_t stride, std::int64_t width, std::int64_t out) {
  const std::int64_t lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  const std::int64_t hi = width - 1 - shift < 0 ? 0 : std::min(out, (width - 1 - shift) / stride + 1);
  return {lo, std::max(lo, hi), shift};
}

// ---- max pooling

// One output row (plane p, row oh) of max pooling: each output's window is scanned in
// (kh, kw) order with its running maximum and position in registers, and written once.
// Ties keep the first position and NaN wins, as in PyTorch; a window of only -inf keeps its
// first position inside the plane. The updates are selects, not branches: on real data
// which tap wins is random, and a mispredicted branch per tap cost more than the tap.
template <class T>
void max_pool_row(const T* in, T* out, std::int64_t* index, std::int64_t oh, const Geometry& g,
                  const ops::Pool2dOptions& o) {
  const std::int64_t sw = o.stride[1], dh = o.dilation[0], dw = o.dilation[1];
  const std::int64_t ih0 = oh * o.stride[0] - o.padding[0];
  // The window's rows inside the plane: kh in [kh_lo, kh_hi).
  std::int64_t kh_lo = 0, kh_hi = o.kernel[0];
  while (kh_lo < kh_hi && ih0 + kh_lo * dh < 0) ++kh_lo;
  while (kh_hi > kh_lo && ih0 + (kh_hi - 1) * dh >= g.h) --kh_hi;
  for (std::int64_t x = 0; x < g.ow; ++x) {
    const std::int64_t iw0 = x * sw - o.padding[1];
    std::int64_t kw_lo = 0, kw_hi = o.kernel[1];
    while (kw_lo < kw_hi && iw0 + kw_lo * dw < 0) ++kw_lo;
    while (kw_hi > kw_lo && iw0 + (kw_hi - 1) * dw >= g.w) --kw_hi;
    T best = -std::numeric_limits<T>::infinity();
    std::int64_t at;
    if (kh_lo < kh_hi && kw_lo < kw_hi) {
      at = (ih0 + kh_lo * dh) * g.w + iw0 + kw_lo * dw;
    } else {  // no tap inside the plane (ceil mode's overhang): the nearest position
      std::int64_t ih = ih0, iw = iw0;
      while (ih < 0) ih += dh;
      while (iw < 0) iw += dw;
      at = std::min(ih, g.h - 1) * g.w + std::min(iw, g.w - 1);
    }
    for (std::int64_t kh = kh_lo; kh < kh_hi; ++kh) {
      const std::int64_t row = (ih0 + kh * dh) * g.w + iw0;
      for (std::int64_t kw = kw_lo; kw < kw_hi; ++kw) {
        const std::int64_t i = row + kw * dw;
        const T v = in[i];
        const bool take = (v > best) | (v != v);
        best = take ? v : best;
        at += (i - at) & -static_cast<std::int64_t>(take);
      }
    }
    out[x] = best;
    if (index) index[x] = at;
  }
}

#if defined(__AVX512F__)
// Max pooling of 2x2 windows at stride 2 without padding or dilation (MaxPool2d(2), the
// common case) in f32: output rows [begin, end) of the planes (row r is row r % oh of plane
// r / oh), 16 outputs per vector step, masked at a row's end. A row pair's 32 input columns
// are split into the windows' even and odd columns. The taps are combined as a tree, each
// row's pair and then the two pairs, each step the later operand winning when it is greater
// or NaN: the same winner as max_pool_row's scan in PyTorch's order (the last NaN, else the
// first maximum), with half the dependent steps. All in one loop: a call per row cost more
// than the row.
void max_pool_rows_2x2(const float* in, float* out, std::int64_t* index, std::int64_t begin, std::int64_t end,
                       const Geometry& g) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(static_cast<std::int32_t>(g.w));
  // The later of two taps wins where it is greater or NaN.
  const auto later_wins = [](__m512 earlier, __m512 later) {
    return static_cast<__mmask16>(_mm512_cmp_ps_mask(later, earlier, _CMP_GT_OQ) |
                                  _mm512_cmp_ps_mask(later, later, _CMP_UNORD_Q));
  };
  for (std::int64_t r = begin; r < end; ++r) {
    const std::int64_t p = r / g.oh, oh = r % g.oh;
    const float* plane = in + p * g.h * g.w;
    const std::int64_t top = 2 * oh * g.w;
    for (std::int64_t x = 0; x < g.ow; x += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, g.ow - x);
      const auto lanes = static_cast<__mmask16>((1u << n) - 1);
      const auto low = static_cast<__mmask16>(n >= 8 ? 0xffff : (1u << (2 * n)) - 1);
      const auto high = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
      const float* row0 = plane + top + 2 * x;
      const float* row1 = row0 + g.w;
      const __m512 a0 = _mm512_maskz_loadu_ps(low, row0), b0 = _mm512_maskz_loadu_ps(high, row0 + 16);
      const __m512 a1 = _mm512_maskz_loadu_ps(low, row1), b1 = _mm512_maskz_loadu_ps(high, row1 + 16);
      const __m512 t0 = _mm512_permutex2var_ps(a0, even, b0), t1 = _mm512_permutex2var_ps(a0, odd, b0);
      const __m512 t2 = _mm512_permutex2var_ps(a1, even, b1), t3 = _mm512_permutex2var_ps(a1, odd, b1);
      // Positions in the plane (int32: the caller checks that a plane has fewer than 2^31).
      const __m512i first = _mm512_add_epi32(_mm512_set1_epi32(static_cast<std::int32_t>(top + 2 * x)), even);
      const __m512i second = _mm512_add_epi32(first, below);
      const __mmask16 take1 = later_wins(t0, t1), take3 = later_wins(t2, t3);
      const __m512 top_best = _mm512_mask_mov_ps(t0, take1, t1), bottom_best = _mm512_mask_mov_ps(t2, take3, t3);
      const __m512i top_at = _mm512_mask_add_epi32(first, take1, first, one);
      const __m512i bottom_at = _mm512_mask_add_epi32(second, take3, second, one);
      const __mmask16 take_bottom = later_wins(top_best, bottom_best);
      const __m512 best = _mm512_mask_mov_ps(top_best, take_bottom, bottom_best);
      const __m512i at = _mm512_mask_mov_epi32(top_at, take_bottom, bottom_at);
      _mm512_mask_storeu_ps(out + r * g.ow + x, lanes, best);
      if (!index) continue;
      std::int64_t* idx = index + r * g.ow + x;
      _mm512_mask_storeu_epi64(idx, static_cast<__mmask8>(lanes), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at)));
      _mm512_mask_storeu_epi64(idx + 8, static_cast<__mmask8>(lanes >> 8),
                               _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1)));
    }
  }
}
#endif

// `indices` null: the maxima only (inference's form).
template <class T>
void max_pool_forward(const CpuTensor& x, CpuTensor& out, CpuTensor* indices, const Geometry& g,
                      const ops::Pool2dOptions& o) {
  const T* in = x.data<T>();
  T* dst = out.data<T>();
  std::int64_t* idx = indices ? indices->data<std::int64_t>() : nullptr;
#if defined(__AVX512F__)
  const bool two_by_two = std::is_same_v<T, float> && o.kernel == std::array<std::int64_t, 2>{2, 2} &&
                          o.stride == o.kernel && o.padding == std::array<std::int64_t, 2>{0, 0} &&
                          o.dilation == std::array<std::int64_t, 2>{1, 1} && 2 * g.oh <= g.h && 2 * g.ow <= g.w &&
                          g.h * g.w < (std::int64_t{1} << 31);
#else
  constexpr bool two_by_two = false;
#endif
  parallel_for(g.planes() * g.oh, grain_for(g.ow * o.kernel[0] * o.kernel[1]), [&](std::int64_t b, std::int64_t e) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
      if (two_by_two) return max_pool_rows_2x2(in, dst, idx, b, e, g);
    }
#endif
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t p = r / g.oh, oh = r % g.oh;
      max_pool_row(in + p * g.h * g.w, dst + r * g.ow, idx ? idx + r * g.ow : nullptr, oh, g, o);
    }
  });
}

// dx[plane][index] += dy; returns false when an index falls outside the plane.
template <class T>
bool max_pool_backward(const CpuTensor& dy, const CpuTensor& indices, CpuTensor& dx, const Geometry& g) {
  const T* grad = dy.data<T>();
  const std::int64_t* idx = indices.data<std::int64_t>();
  T* out = dx.data<T>();
  const std::int64_t plane_in = g.h * g.w, plane_out = g.oh * g.ow;
  std::atomic<bool> ok = true;
  parallel_for(g.planes(), grain_for(plane_out), [&](std::int64_t b, std::int64_t e) {
    bool local = true;
    for (std::int64_t p = b; p < e; ++p) {
      T* d = out + p * plane_in;
      std::fill(d, d + plane_in, T(0));
      for (std::int64_t i = p * plane_out; i < (p + 1) * plane_out; ++i) {
        const std::int64_t k = idx[i];
        if (k < 0 || k >= plane_in) {
          local = false;
          continue;
        }
        d[k] += grad[i];
      }
    }
    if (!local) ok = false;
  });
  return ok.load();
}

// ---- average pooling

// Row-wise like max pooling: each output row accumulates whole input rows per (kh, kw), so the
// inner loop runs along ow. Per output the taps are still summed in PyTorch's (ih, iw) order.
template <class T>
void avg_pool_forward(const CpuTensor& x, CpuTensor& out, const Geometry& g, const ops::Pool2dOptions& o) {
  const T* in = x.data<T>();
  T* dst = out.data<T>();
  const auto rows = ops::avg_pool_windows(g.h, g.oh, o, 0).divisor;
  const auto cols = ops::avg_pool_windows(g.w, g.ow, o, 1).divisor;
  const std::int64_t sw = o.stride[1];
  parallel_for(g.planes() * g.oh, grain_for(g.ow * o.kernel[0] * o.kernel[1]), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t p = r / g.oh, oh = r % g.oh;
      T* acc = dst + r * g.ow;
      std::fill(acc, acc + g.ow, T(0));
      for (std::int64_t kh = 0; kh < o.kernel[0]; ++kh) {
        const std::int64_t ih = oh * o.stride[0] - o.padding[0] + kh;
        if (ih < 0 || ih >= g.h) continue;
        const T* row = in + (p * g.h + ih) * g.w;
        for (std::int64_t kw = 0; kw < o.kernel[1]; ++kw) {
          const auto [lo, hi, shift] = column_range(kw - o.padding[1], sw, g.w, g.ow);
          for (std::int64_t c = lo; c < hi; ++c) acc[c] += row[c * sw + shift];
        }
      }
      const std::int64_t row_extent = rows[static_cast<std::size_t>(oh)];
      for (std::int64_t c = 0; c < g.ow; ++c) {
        const std::int64_t divisor = row_extent * cols[static_cast<std::size_t>(c)];
        acc[c] = divisor == 0 ? T(0) : acc[c] / static_cast<T>(divisor);
      }
    }
  });
}

template <class T>
void avg_pool_backward(const CpuTensor& dy, CpuTensor& dx, const Geometry& g, const ops::Pool2dOptions& o) {
  const T* grad = dy.data<T>();
  T* out = dx.data<T>();
  const auto rows = ops::avg_pool_windows(g.h, g.oh, o, 0).divisor;
  const auto cols = ops::avg_pool_windows(g.w, g.ow, o, 1).divisor;
  const std::int64_t sw = o.stride[1];
  // One plane per task: the scatter stays inside the plane.
  parallel_for(g.planes(), grain_for(g.oh * g.ow * o.kernel[0] * o.kernel[1]), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> delta(static_cast<std::size_t>(g.ow));
    for (std::int64_t p = b; p < e; ++p) {
      T* plane = out + p * g.h * g.w;
      std::fill(plane, plane + g.h * g.w, T(0));
      for (std::int64_t oh = 0; oh < g.oh; ++oh) {
        const T* grad_row = grad + (p * g.oh + oh) * g.ow;
        const std::int64_t row_extent = rows[static_cast<std::size_t>(oh)];
        for (std::int64_t c = 0; c < g.ow; ++c) {
          const std::int64_t divisor = row_extent * cols[static_cast<std::size_t>(c)];
          delta[static_cast<std::size_t>(c)] = divisor == 0 ? T(0) : grad_row[c] / static_cast<T>(divisor);
        }
        for (std::int64_t kh = 0; kh < o.kernel[0]; ++kh) {
          const std::int64_t ih = oh * o.stride[0] - o.padding[0] + kh;
          if (ih < 0 || ih >= g.h) continue;
          T* row = plane + ih * g.w;
          for (std::int64_t kw = 0; kw < o.kernel[1]; ++kw) {
            const auto [lo, hi, shift] = column_range(kw - o.padding[1], sw, g.w, g.ow);
            for (std::int64_t c = lo; c < hi; ++c) row[c * sw + shift] += delta[static_cast<std::size_t>(c)];
          }
        }
      }
    }
  });
}

#if KILN_CPU_ONEDNN
// ---- oneDNN average pooling (f32)

// oneDNN has no ceil_mode: the extra windows come from right padding large enough to give
// the requested output size. oneDNN's include-padding divisor is the full kernel area, PyTorch's
// is the window clipped to the padded input, so with count_include_pad the two agree only
// when no window reaches past the symmetric padding.
std::optional<std::array<std::int64_t, 2>> onednn_right_padding(const Geometry& g, const ops::Pool2dOptions& o) {
  std::array<std::int64_t, 2> right{};
  const std::array<std::int64_t, 2> in{g.h, g.w}, out{g.oh, g.ow};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t needed = (out[i] - 1) * o.stride[i] + o.kernel[i] - in[i] - o.padding[i];
    if (o.count_include_pad && needed > o.padding[i]) return std::nullopt;
    right[i] = std::max(needed, o.padding[i]);
  }
  return right;
}

struct OnednnPoolKey {
  std::int64_t n, c, h, w, oh, ow;
  std::array<std::int64_t, 2> kernel, stride, padding;
  bool include_pad, backward;
  auto tie() const { return std::tie(n, c, h, w, oh, ow, kernel, stride, padding, include_pad, backward); }
  bool operator<(const OnednnPoolKey& other) const { return tie() < other.tie(); }
};

// oneDNN's vectorized pooling wants channel-blocked data; on plain NCHW it runs a scalar loop
// slower than ours. So the plain operand is reordered into blocks, pooled, and reordered back:
// `source` (x forward, dy backward) -> blocked_source -> blocked_result -> `result`.
struct OnednnPool {
  dnnl::reorder to_blocked, from_blocked;
  dnnl::primitive pool;
  dnnl::memory::desc source, blocked_source, blocked_result, result;
};

std::shared_ptr<const OnednnPool> make_onednn_pool(const OnednnPoolKey& key, const std::array<std::int64_t, 2>& right) {
  using dnnl::memory;
  const memory::dims in_dims{key.n, key.c, key.h, key.w}, out_dims{key.n, key.c, key.oh, key.ow};
  const memory::dims strides{key.stride[0], key.stride[1]}, kernel{key.kernel[0], key.kernel[1]},
      left{key.padding[0], key.padding[1]}, padding_r{right[0], right[1]};
  const auto algorithm =
      key.include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto f32 = memory::data_type::f32;
  const memory::desc plain_in(in_dims, f32, memory::format_tag::nchw),
      plain_out(out_dims, f32, memory::format_tag::nchw);
  // The widest channel block this CPU has a vectorized kernel for, found once (the caller holds the cache lock).
  static std::vector<memory::format_tag> tags{memory::format_tag::nChw16c, memory::format_tag::nChw8c};
  for (const auto tag : std::vector(tags)) {
    const memory::desc blocked_in(in_dims, f32, tag), blocked_out(out_dims, f32, tag);
    const dnnl::pooling_forward::primitive_desc forward(
        {key.backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, algorithm, blocked_in,
         blocked_out, strides, kernel, left, padding_r},
        onednn_engine(), /*allow_empty=*/true);
    if (!forward || std::string_view(forward.impl_info_str()).substr(0, 3) != "jit") continue;
    auto p = std::make_shared<OnednnPool>();
    if (key.backward) {
      const dnnl::pooling_backward::primitive_desc backward(
          {algorithm, blocked_in, blocked_out, strides, kernel, left, padding_r}, onednn_engine(), forward,
          /*allow_empty=*/true);
      if (!backward || std::string_view(backward.impl_info_str()).substr(0, 3) != "jit") continue;
      p->pool = dnnl::pooling_backward(backward);
      p->source = plain_out, p->blocked_source = blocked_out, p->blocked_result = blocked_in, p->result = plain_in;
    } else {
      p->pool = dnnl::pooling_forward(forward);
      p->source = plain_in, p->blocked_source = blocked_in, p->blocked_result = blocked_out, p->result = plain_out;
    }
    p->to_blocked =
        dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), p->source, onednn_engine(), p->blocked_source));
    p->from_blocked =
        dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), p->blocked_result, onednn_engine(), p->result));
    tags = {tag};
    return p;
  }
  return nullptr;
}

// The cached pipeline for a problem (creating primitives costs far more than running small
// ones), or null when oneDNN has no vectorized kernel for it.
std::shared_ptr<const OnednnPool> onednn_avg_pool(const OnednnPoolKey& key, const std::array<std::int64_t, 2>& right) {
  static std::mutex mutex;
  static auto& cache = *new std::map<OnednnPoolKey, std::shared_ptr<const OnednnPool>>();  // outlives static destruction
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::shared_ptr<const OnednnPool> pool;
  try {
    pool = make_onednn_pool(key, right);
  } catch (const dnnl::error&) {
    pool = nullptr;  // the direct loop takes over
  }
  if (cache.size() >= 512) cache.clear();  // many distinct shapes: start over rather than grow without bound
  cache.emplace(key, pool);
  return pool;
}

// Runs f32 average pooling forward (source = x, result = out) or backward (source = dy,
// result = dx) on oneDNN; false when oneDNN cannot match PyTorch's semantics or has no fast kernel.
bool onednn_avg_pool_run(const CpuTensor& source, CpuTensor& result, const Geometry& g, const ops::Pool2dOptions& o,
                         bool backward) {
  // Below this size three oneDNN calls (each a parallel region on every thread) cost more than the direct loop.
  constexpr std::int64_t kMinElements = std::int64_t{1} << 15;
  if (g.planes() * g.h * g.w < kMinElements) return false;
  const auto right = onednn_right_padding(g, o);
  if (!right) return false;
  const OnednnPoolKey key{g.n, g.c, g.h, g.w, g.oh, g.ow, o.kernel, o.stride, o.padding, o.count_include_pad, backward};
  const auto p = onednn_avg_pool(key, *right);
  if (!p) return false;
  using dnnl::memory;
  // The blocked copies live in Kiln's caching allocator, not in fresh pages per call.
  const auto scratch = [](const memory::desc& md) {
    return empty(Shape{static_cast<std::int64_t>((md.get_size() + sizeof(float) - 1) / sizeof(float))}, DType::f32);
  };
  const CpuTensor blocked_source = scratch(p->blocked_source), blocked_result = scratch(p->blocked_result);
  const dnnl::engine& engine = onednn_engine();
  memory src(p->source, engine, source.data<float>()), src_b(p->blocked_source, engine, blocked_source.data<float>());
  memory dst_b(p->blocked_result, engine, blocked_result.data<float>()), dst(p->result, engine, result.data<float>());
  dnnl::stream& stream = onednn_stream();
  p->to_blocked.execute(stream, src, src_b);
  if (backward)
    p->pool.execute(stream, {{DNNL_ARG_DIFF_DST, src_b}, {DNNL_ARG_DIFF_SRC, dst_b}});
  else
    p->pool.execute(stream, {{DNNL_ARG_SRC, src_b}, {DNNL_ARG_DST, dst_b}});
  p->from_blocked.execute(stream, dst_b, dst);
  stream.wait();
  return true;
}

// ---- adaptive average pooling: output i covers [floor(i * in / out), ceil((i + 1) * in / out)).

#endif

std::int64_t adaptive_start(std::int64_t i, std::int64_t out, std::int64_t in) {
  return (i / out) * in + ((i % out) * in) / out;
}
std::int64_t adaptive_end(std::int64_t i, std::int64_t out, std::int64_t in) { return 1 + ((i + 1) * in - 1) / out; }

template <class T>
void adaptive_avg_forward(const CpuTensor& x, CpuTensor& out, const Geometry& g) {
  const T* in = x.data<T>();
  T* dst = out.data<T>();
  const std::int64_t window = (g.h / g.oh + 2) * (g.w / g.ow + 2);
  parallel_for(g.planes() * g.oh, grain_for(g.ow * window), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t p = r / g.oh, oh = r % g.oh;
      const std::int64_t h0 = adaptive_start(oh, g.oh, g.h), h1 = adaptive_end(oh, g.oh, g.h);
      const T* plane = in + p * g.h * g.w;
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t w0 = adaptive_start(ow, g.ow, g.w), w1 = adaptive_end(ow, g.ow, g.w);
        T sum = 0;
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw) sum += plane[ih * g.w + iw];
        dst[r * g.ow + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
  });
}

template <class T>
void adaptive_avg_backward(const CpuTensor& dy, CpuTensor& dx, const Geometry& g) {
  const T* grad = dy.data<T>();
  T* out = dx.data<T>();
  parallel_for(g.planes(), grain_for(g.h * g.w * 4), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      T* d = out + p * g.h * g.w;
      std::fill(d, d + g.h * g.w, T(0));
      for (std::int64_t oh = 0; oh < g.oh; ++oh) {
        const std::int64_t h0 = adaptive_start(oh, g.oh, g.h), h1 = adaptive_end(oh, g.oh, g.h);
        for (std::int64_t ow = 0; ow < g.ow; ++ow) {
          const std::int64_t w0 = adaptive_start(ow, g.ow, g.w), w1 = adaptive_end(ow, g.ow, g.w);
          const T delta = grad[(p * g.oh + oh) * g.ow + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (std::int64_t ih = h0; ih < h1; ++ih)
            for (std::int64_t iw = w0; iw < w1; ++iw) d[ih * g.w + iw] += delta;
        }
      }
    }
  });
}


}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

std::pair<Cpu::Primitive, Cpu::Primitive> Cpu::max_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  ops::check_pool_input_float("max_pool2d", x.shape, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape("max_pool2d", x.shape, options);
  if (!cpu::is_native_float(x.dtype)) {
    auto [out, indices] = max_pool2d(cast(x, DType::f32), options);
    return {cast(out, x.dtype), indices};
  }
  const cpu::ContiguousInput in(x);
  CpuTensor out = cpu::empty(out_shape, x.dtype), indices = cpu::empty(out_shape, DType::i64);
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
  cpu::dispatch_float("max_pool2d", x.dtype,
                      [&]<class T>() { cpu::max_pool_forward<T>(*in, out, &indices, g, options); });
  return {out, indices};
}

Cpu::Primitive Cpu::max_pool2d_values(const Primitive& x, const ops::Pool2dOptions& options) {
  ops::check_pool_input_float("max_pool2d_values", x.shape, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape("max_pool2d_values", x.shape, options);
  if (!cpu::is_native_float(x.dtype)) return cast(max_pool2d_values(cast(x, DType::f32), options), x.dtype);
  const cpu::ContiguousInput in(x);
  CpuTensor out = cpu::empty(out_shape, x.dtype);
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
  cpu::dispatch_float("max_pool2d_values", x.dtype,
                      [&]<class T>() { cpu::max_pool_forward<T>(*in, out, nullptr, g, options); });
  return out;
}

Cpu::Primitive Cpu::max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                        const ops::Pool2dOptions& options) {
  ops::check_pool_input_float("max_pool2d_backward", x.shape, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape("max_pool2d_backward", x.shape, options);
  ops::check_pool_gradient("max_pool2d_backward", x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  KILN_CHECK(indices.dtype == DType::i64 && indices.shape == out_shape,
             "max_pool2d_backward: indices must be i64 of shape {}, got {} {}", out_shape, indices.shape,
             indices.dtype);
  if (!cpu::is_native_float(x.dtype))
    return cast(max_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), indices, options), x.dtype);
  const CpuTensor grad = cpu::contiguous(dy), idx = cpu::contiguous(indices);
  CpuTensor dx = cpu::empty(x.shape, x.dtype);
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
  const bool ok = cpu::dispatch_float("max_pool2d_backward", x.dtype,
                                      [&]<class T>() { return cpu::max_pool_backward<T>(grad, idx, dx, g); });
  KILN_CHECK(ok, "max_pool2d_backward: an index is outside the {}x{} input plane", g.h, g.w);
  return dx;
}

Cpu::Primitive Cpu::avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  ops::check_pool_input_float("avg_pool2d", x.shape, x.dtype);
  ops::check_no_dilation("avg_pool2d", options);
  const Shape out_shape = ops::pool2d_output_shape("avg_pool2d", x.shape, options);
  if (!cpu::is_native_float(x.dtype))
    return cpu::via_f32(x, [&](const CpuTensor& f) { return avg_pool2d(f, options); });
  const CpuTensor in = cpu::contiguous(x);
  CpuTensor out = cpu::empty(out_shape, x.dtype);
  if (out.numel() == 0) return out;
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
#if KILN_CPU_ONEDNN
  if (x.dtype == DType::f32 && cpu::onednn_avg_pool_run(in, out, g, options, false)) return out;
#endif
  cpu::dispatch_float("avg_pool2d", x.dtype, [&]<class T>() { cpu::avg_pool_forward<T>(in, out, g, options); });
  return out;
}

Cpu::Primitive Cpu::avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& options) {
  ops::check_pool_input_float("avg_pool2d_backward", x.shape, x.dtype);
  ops::check_no_dilation("avg_pool2d_backward", options);
  const Shape out_shape = ops::pool2d_output_shape("avg_pool2d_backward", x.shape, options);
  ops::check_pool_gradient("avg_pool2d_backward", x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (!cpu::is_native_float(x.dtype))
    return cast(avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), options), x.dtype);
  const CpuTensor grad = cpu::contiguous(dy);
  CpuTensor dx = cpu::empty(x.shape, x.dtype);
  if (dx.numel() == 0) return dx;
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
#if KILN_CPU_ONEDNN
  if (x.dtype == DType::f32 && cpu::onednn_avg_pool_run(grad, dx, g, options, true)) return dx;
#endif
  cpu::dispatch_float("avg_pool2d_backward", x.dtype,
                      [&]<class T>() { cpu::avg_pool_backward<T>(grad, dx, g, options); });
  return dx;
}

Cpu::Primitive Cpu::adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size) {
  ops::check_pool_input_float("adaptive_avg_pool2d", x.shape, x.dtype);
  const Shape out_shape = ops::adaptive_output_shape("adaptive_avg_pool2d", x.shape, output_size);
  if (!cpu::is_native_float(x.dtype))
    return cpu::via_f32(x, [&](const CpuTensor& f) { return adaptive_avg_pool2d(f, output_size); });
  const CpuTensor in = cpu::contiguous(x);
  CpuTensor out = cpu::empty(out_shape, x.dtype);
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
  cpu::dispatch_float("adaptive_avg_pool2d", x.dtype, [&]<class T>() { cpu::adaptive_avg_forward<T>(in, out, g); });
  return out;
}

Cpu::Primitive Cpu::adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy) {
  ops::check_pool_input_float("adaptive_avg_pool2d_backward", x.shape, x.dtype);
  KILN_CHECK(dy.shape.rank() == 4, "adaptive_avg_pool2d_backward: dy must be NCHW, got shape {}", dy.shape);
  const std::array<std::int64_t, 2> size{dy.shape[2], dy.shape[3]};
  const Shape out_shape = ops::adaptive_output_shape("adaptive_avg_pool2d_backward", x.shape, size);
  ops::check_pool_gradient("adaptive_avg_pool2d_backward", x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (!cpu::is_native_float(x.dtype))
    return cast(adaptive_avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32)), x.dtype);
  const CpuTensor grad = cpu::contiguous(dy);
  CpuTensor dx = cpu::empty(x.shape, x.dtype);
  const cpu::Geometry g = cpu::geometry(x.shape, out_shape);
  cpu::dispatch_float("adaptive_avg_pool2d_backward", x.dtype,
                      [&]<class T>() { cpu::adaptive_avg_backward<T>(grad, dx, g); });
  return dx;
}

}  // namespace kiln
