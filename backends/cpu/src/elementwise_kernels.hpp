// The machinery behind the CPU elementwise kernels (elementwise_unary.cpp,
// elementwise_binary.cpp): a one-register SIMD type that the op catalogue's formulas
// instantiate with, the inner loops over contiguous or strided runs, and dtype dispatch.
// Private to backends/cpu/src.
#pragma once

#include "internal.hpp"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <limits>
#include <span>
#include <type_traits>

// The loops below must inline their helpers: a call per register (through the PLT, from a
// shared library) costs more than the arithmetic it wraps.
#if defined(__GNUC__)
#define KILN_INLINE [[gnu::always_inline]] inline
#define KILN_INLINE_LAMBDA __attribute__((always_inline))
#else
#define KILN_INLINE inline
#define KILN_INLINE_LAMBDA
#endif

namespace kiln::cpu {

// ---------------------------------------------------------------- Simd<T>
// One SIMD register of T (8 floats or 4 doubles with AVX), offering the array methods
// that kiln::fn calls (x.exp(), a.max(b), mask.select(a, b)...). Formulas instantiated
// with it compile to straight-line packet code that stays in registers: Eigen's own
// arrays evaluate select, isNaN and comparisons one element at a time, and their
// temporaries go through memory. The math comes from Eigen's packet functions where
// Eigen vectorizes them (exp, log, erf, tanh... for float); the others run per lane.
template <class T> struct SimdMask;

template <class T> struct Simd {
  using Scalar = T;
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  using Traits = Eigen::internal::packet_traits<T>;
  static constexpr int width = Eigen::internal::unpacket_traits<Packet>::size;

  Packet v;

  static Simd of(Packet p) {
    Simd s;
    s.v = p;
    return s;
  }
  static Simd broadcast(T value) { return of(Eigen::internal::pset1<Packet>(value)); }
  static Simd load(const T* p) { return of(Eigen::internal::ploadu<Packet>(p)); }
  // `count` (< width) elements at stride `stride`; the other lanes hold 0.
  static Simd load_partial(const T* p, std::int64_t stride, std::int64_t count) {
    alignas(64) T lanes[width] = {};
    for (std::int64_t i = 0; i < count; ++i) lanes[i] = p[i * stride];
    return of(Eigen::internal::pload<Packet>(lanes));
  }
  static Simd gather(const T* p, std::int64_t stride) {
    alignas(64) T lanes[width];
    for (int i = 0; i < width; ++i) lanes[i] = p[i * stride];
    return of(Eigen::internal::pload<Packet>(lanes));
  }
  void store(T* p) const { Eigen::internal::pstoreu(p, v); }
  void store_partial(T* p, std::int64_t count) const {
    alignas(64) T lanes[width];
    Eigen::internal::pstore(lanes, v);
    for (std::int64_t i = 0; i < count; ++i) p[i] = lanes[i];
  }

  // What kiln::fn expects of an array type.
  static Simd Constant(std::int64_t, T value) { return broadcast(value); }
  static constexpr std::int64_t size() { return width; }
  Simd eval() const { return *this; }

  // Eigen's double exp clamps its argument near -709 (exp(-inf) would be 5.6e-309, not 0)
  // and its double log reads subnormals wrong: those lanes take the C library's. Float exp is
  // Kiln's own (exp_f32 below).
  Simd exp() const {
    if constexpr (std::is_same_v<T, float> && Traits::HasExp) return of(exp_f32(v));
    const Simd r = math<Traits::HasExp>([](auto p) { return Eigen::internal::pexp(p); }, std::exp);
    if constexpr (std::is_same_v<T, double>) return r.redo_where([](T x) { return x < -708.0; }, v, std::exp);
    return r;
  }
  Simd log() const {
    const Simd r = math<Traits::HasLog>([](auto p) { return Eigen::internal::plog(p); }, std::log);
    if constexpr (std::is_same_v<T, double>)
      return r.redo_where([](T x) { return x > 0 && x < std::numeric_limits<T>::min(); }, v, std::log);
    return r;
  }
  Simd log1p() const {
    return math<Traits::HasLog1p>([](auto p) { return Eigen::internal::plog1p(p); }, std::log1p);
  }
  // Eigen's float expm1 goes through its exp, so with AVX-512 it overflowed from x = 88.38 too;
  // past 88, where expm1(x) and exp(x) are the same float, the lanes take exp_f32.
  Simd expm1() const {
    const Simd r = math<Traits::HasExpm1>([](auto p) { return Eigen::internal::pexpm1(p); }, std::expm1);
    if constexpr (std::is_same_v<T, float> && Traits::HasExpm1) {
      using namespace Eigen::internal;
      return of(pselect(pcmp_lt(pset1<Packet>(88.0f), v), exp_f32(v), r.v));
    }
    return r;
  }
  // The exact instruction: Eigen's fast sqrt (an rsqrt estimate refined by Newton steps,
  // for float everywhere and for double with AVX-512) is off by an ulp, flushes tiny
  // results to 0 and gives NaN for inf.
  Simd sqrt() const {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && sizeof(Packet) == 64) return of(_mm512_sqrt_ps(v));
    if constexpr (std::is_same_v<T, double> && sizeof(Packet) == 64) return of(_mm512_sqrt_pd(v));
#endif
#if defined(__AVX__)
    if constexpr (std::is_same_v<T, float> && sizeof(Packet) == 32) return of(_mm256_sqrt_ps(v));
    if constexpr (std::is_same_v<T, double> && sizeof(Packet) == 32) return of(_mm256_sqrt_pd(v));
#endif
#if defined(__SSE2__)
    if constexpr (std::is_same_v<T, float> && sizeof(Packet) == 16) return of(_mm_sqrt_ps(v));
    if constexpr (std::is_same_v<T, double> && sizeof(Packet) == 16) return of(_mm_sqrt_pd(v));
#endif
    return math<Traits::HasSqrt>([](auto p) { return Eigen::internal::psqrt(p); }, std::sqrt);
  }
  Simd sin() const { return math<Traits::HasSin>([](auto p) { return Eigen::internal::psin(p); }, std::sin); }
  Simd cos() const { return math<Traits::HasCos>([](auto p) { return Eigen::internal::pcos(p); }, std::cos); }
  Simd tan() const { return math<false>([](auto p) { return p; }, std::tan); }
  // Eigen's tanh and erf clamp their argument, which would turn NaN into a number. Eigen's
  // float tanh reaches exactly ±1 at its clamp only where its clamp was tuned for the
  // target's rounding (x86); on aarch64 it stops at ±0.99999994, so that GELU's
  // x/2 (1 + tanh(...)) gave -inf at -inf (PyTorch: NaN) and -1e-6 at -30 (PyTorch: -0).
  // Past 9.02, where tanh rounds to ±1 in float, the result is the exact ±1.
  Simd tanh() const {
    const Simd r = keep_nan(math<Traits::HasTanh>([](auto p) { return Eigen::internal::ptanh(p); }, std::tanh));
    if constexpr (std::is_same_v<T, float>) {
      using namespace Eigen::internal;
      const Packet saturated = pcmp_lt(pset1<Packet>(T(9.02)), pabs(v));
      const Packet sign_one = por(pand(v, pset1<Packet>(T(-0.0))), pset1<Packet>(T(1)));  // copysign(1, x)
      return of(pselect(saturated, sign_one, r.v));
    }
    return r;
  }
  Simd erf() const {
    return keep_nan(math<Traits::HasErf>([](auto p) { return Eigen::internal::perf(p); }, std::erf));
  }
  Simd floor() const { return of(Eigen::internal::pfloor(v)); }
  Simd ceil() const { return of(Eigen::internal::pceil(v)); }
  Simd rint() const { return of(Eigen::internal::print(v)); }  // halves to even
  Simd abs() const { return of(Eigen::internal::pabs(v)); }
  // NaN handling is the caller's (kiln::fn::max checks isNaN first).
  Simd max(const Simd& o) const { return of(Eigen::internal::pmax(v, o.v)); }
  Simd min(const Simd& o) const { return of(Eigen::internal::pmin(v, o.v)); }
  Simd pow(const Simd& e) const {
    if constexpr (Eigen::internal::functor_traits<Eigen::internal::scalar_pow_op<T, T>>::PacketAccess) {
      return of(Eigen::internal::generic_pow(v, e.v));
    } else {
      alignas(64) T a[width], b[width];
      Eigen::internal::pstore(a, v);
      Eigen::internal::pstore(b, e.v);
      for (int i = 0; i < width; ++i) a[i] = std::pow(a[i], b[i]);
      return of(Eigen::internal::pload<Packet>(a));
    }
  }
  // Eigen has no packet atan2: the C library's, lane by lane.
  Simd atan2(const Simd& x) const {
    alignas(64) T a[width], b[width];
    Eigen::internal::pstore(a, v);
    Eigen::internal::pstore(b, x.v);
    for (int i = 0; i < width; ++i) a[i] = std::atan2(a[i], b[i]);
    return of(Eigen::internal::pload<Packet>(a));
  }
  SimdMask<T> isNaN() const;
  SimdMask<T> isInf() const;

 private:
  // Eigen's packet function where it has one, else the scalar function lane by lane.
  template <bool vectorized, class P> Simd math(P packet_fn, T (*scalar_fn)(T)) const {
    if constexpr (vectorized) {
      return of(packet_fn(v));
    } else {
      alignas(64) T lanes[width];
      Eigen::internal::pstore(lanes, v);
      for (int i = 0; i < width; ++i) lanes[i] = scalar_fn(lanes[i]);
      return of(Eigen::internal::pload<Packet>(lanes));
    }
  }
  // This result with the lanes whose input x satisfies `where` recomputed by scalar_fn(x).
  template <class Where> Simd redo_where(Where where, Packet x, T (*scalar_fn)(T)) const {
    alignas(64) T in[width], out[width];
    Eigen::internal::pstore(in, x);
    bool any = false;
    for (int i = 0; i < width; ++i) any = any || where(in[i]);
    if (!any) return *this;
    Eigen::internal::pstore(out, v);
    for (int i = 0; i < width; ++i)
      if (where(in[i])) out[i] = scalar_fn(in[i]);
    return of(Eigen::internal::pload<Packet>(out));
  }
  // exp over float lanes, right over the whole range: Eigen's float exp with AVX-512 builds
  // 2^m in the exponent bits, which gave inf from x = 88.38 (exp(88.5) is 2.7e38, below the
  // largest float) and 0 below -88.38, and its other builds clamp x at -88.72, which gave
  // exp(-100) = 2.9e-39 (3.8e-44). Here x is clamped to [-104, 89], past where the result
  // rounds to 0 or overflows, exp(x) = 2^m exp(r) with m = round(x log2 e) and
  // r = x - m ln 2 in two parts (Cody and Waite), exp(r) is Cephes' degree-6 polynomial, and
  // 2^m is applied by scaling, which rounds once into the subnormals: at most 1.3 ulp over
  // the normal range. With AVX-512 the scaling is one instruction (vscalefps), and the whole
  // is 15 % faster than Eigen's there.
  // A NaN stays NaN: Eigen's pmin(a, b) and pmax(a, b) return a where either is NaN.
  static Packet exp_f32(const Packet& x_in) {
    using namespace Eigen::internal;
    const Packet x = pmax(pmin(x_in, pset1<Packet>(89.0f)), pset1<Packet>(-104.0f));
    const Packet m = pfloor(pmadd(x, pset1<Packet>(1.44269504088896341f), pset1<Packet>(0.5f)));
    Packet r = pmadd(m, pset1<Packet>(-0.693359375f), x);
    r = pmadd(m, pset1<Packet>(2.12194440e-4f), r);
    Packet y = pset1<Packet>(1.9875691500e-4f);
    y = pmadd(y, r, pset1<Packet>(1.3981999507e-3f));
    y = pmadd(y, r, pset1<Packet>(8.3334519073e-3f));
    y = pmadd(y, r, pset1<Packet>(4.1665795894e-2f));
    y = pmadd(y, r, pset1<Packet>(1.6666665459e-1f));
    y = pmadd(y, r, pset1<Packet>(5.0000001201e-1f));
    y = pmadd(y, pmul(r, r), padd(r, pset1<Packet>(1.0f)));
#if defined(__AVX512F__)
    if constexpr (sizeof(Packet) == 64) return _mm512_scalef_ps(y, m);
#endif
    return pldexp(y, m);
  }
  Simd keep_nan(const Simd& r) const {
    return of(Eigen::internal::pselect(Eigen::internal::pcmp_eq(v, v), r.v, v));
  }
};

// A lane mask (all bits set where true), the result of comparisons and isNaN/isInf.
template <class T> struct SimdMask {
  using Packet = typename Simd<T>::Packet;
  static constexpr int width = Simd<T>::width;
  Packet v;

  static SimdMask of(Packet p) {
    SimdMask m;
    m.v = p;
    return m;
  }
  SimdMask eval() const { return *this; }
  Simd<T> select(const Simd<T>& a, const Simd<T>& b) const {
    return Simd<T>::of(Eigen::internal::pselect(v, a.v, b.v));
  }
  friend SimdMask operator&&(const SimdMask& a, const SimdMask& b) { return of(Eigen::internal::pand(a.v, b.v)); }
  friend SimdMask operator||(const SimdMask& a, const SimdMask& b) { return of(Eigen::internal::por(a.v, b.v)); }
  friend SimdMask operator!=(const SimdMask& a, const SimdMask& b) { return of(Eigen::internal::pxor(a.v, b.v)); }
  friend SimdMask operator!(const SimdMask& a) {
    return of(Eigen::internal::pandnot(Eigen::internal::ptrue(a.v), a.v));
  }

  void store(bool* p, std::int64_t count = width) const {
#if defined(__AVX__)
    if constexpr (sizeof(Packet) == 32 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
      if (count == width) {
        // One bit per lane, spread to one byte per lane: 0x01 in each byte whose bit is set.
        unsigned bits;
        if constexpr (std::is_same_v<T, float>) bits = static_cast<unsigned>(_mm256_movemask_ps(v));
        else bits = static_cast<unsigned>(_mm256_movemask_pd(v));
        std::uint64_t bytes = 0;
        for (int i = 0; i < width; ++i) bytes |= static_cast<std::uint64_t>((bits >> i) & 1u) << (8 * i);
        std::memcpy(p, &bytes, width);
        return;
      }
    }
#endif
    alignas(64) T lanes[width];
    Eigen::internal::pstore(lanes, v);
    for (std::int64_t i = 0; i < count; ++i) p[i] = !(lanes[i] == T(0));  // set bits read as NaN, never as 0
  }
};

template <class T> SimdMask<T> Simd<T>::isNaN() const {
  return SimdMask<T>::of(Eigen::internal::pandnot(Eigen::internal::ptrue(v), Eigen::internal::pcmp_eq(v, v)));
}
template <class T> SimdMask<T> Simd<T>::isInf() const {
  const Packet inf = Eigen::internal::pset1<Packet>(std::numeric_limits<T>::infinity());
  return SimdMask<T>::of(Eigen::internal::pcmp_eq(Eigen::internal::pabs(v), inf));
}

// Arithmetic between registers, and with a scalar on either side.
#define KILN_SIMD_ARITH(op, pfn)                                                                              \
  template <class T> Simd<T> operator op(const Simd<T>& a, const Simd<T>& b) {                              \
    return Simd<T>::of(Eigen::internal::pfn(a.v, b.v));                                                       \
  }                                                                                                           \
  template <class T> Simd<T> operator op(const Simd<T>& a, std::type_identity_t<T> b) {                     \
    return a op Simd<T>::broadcast(b);                                                                        \
  }                                                                                                           \
  template <class T> Simd<T> operator op(std::type_identity_t<T> a, const Simd<T>& b) {                     \
    return Simd<T>::broadcast(a) op b;                                                                        \
  }
KILN_SIMD_ARITH(+, padd)
KILN_SIMD_ARITH(-, psub)
KILN_SIMD_ARITH(*, pmul)
KILN_SIMD_ARITH(/, pdiv)
#undef KILN_SIMD_ARITH
template <class T> Simd<T> operator-(const Simd<T>& a) { return Simd<T>::of(Eigen::internal::pnegate(a.v)); }

// Comparisons: ordered, so NaN compares false (and != true), as in IEEE and PyTorch.
#define KILN_SIMD_COMPARE(op, expr)                                                                           \
  template <class T> SimdMask<T> operator op(const Simd<T>& a, const Simd<T>& b) {                          \
    using namespace Eigen::internal;                                                                          \
    return SimdMask<T>::of(expr);                                                                             \
  }                                                                                                           \
  template <class T> SimdMask<T> operator op(const Simd<T>& a, std::type_identity_t<T> b) {                 \
    return a op Simd<T>::broadcast(b);                                                                        \
  }
KILN_SIMD_COMPARE(==, pcmp_eq(a.v, b.v))
KILN_SIMD_COMPARE(!=, pandnot(ptrue(a.v), pcmp_eq(a.v, b.v)))
KILN_SIMD_COMPARE(<, pcmp_lt(a.v, b.v))
KILN_SIMD_COMPARE(<=, pcmp_le(a.v, b.v))
KILN_SIMD_COMPARE(>, pcmp_lt(b.v, a.v))
KILN_SIMD_COMPARE(>=, pcmp_le(b.v, a.v))
#undef KILN_SIMD_COMPARE

// ---------------------------------------------------------------- stores
// Outputs larger than half the usable last-level cache (elementwise.cpp), or of ops whose
// operands together are more than twice its size, are written with non-temporal stores by the
// light ops (light_op below) and by Fusion<Cpu>'s programs: they skip the read-for-ownership
// of each output line (a third less memory traffic for a binary op) and would be evicted
// before the next op reads them anyway. A smaller output of an op that touches little more
// than the cache stays there for its reader (rms_norm's passes over 16 MiB on a 32 MiB cache).
bool use_streaming_stores(std::int64_t bytes_written, std::int64_t bytes_touched);

template <class T> void stream_store(T* p, const typename Simd<T>::Packet& v) {
  [[maybe_unused]] constexpr std::size_t bytes = sizeof(typename Simd<T>::Packet);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && bytes == 64) return _mm512_stream_ps(p, v);
  if constexpr (std::is_same_v<T, double> && bytes == 64) return _mm512_stream_pd(p, v);
#endif
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float> && bytes == 32) return _mm256_stream_ps(p, v);
  if constexpr (std::is_same_v<T, double> && bytes == 32) return _mm256_stream_pd(p, v);
#endif
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> && bytes == 16) return _mm_stream_ps(p, v);
  if constexpr (std::is_same_v<T, double> && bytes == 16) return _mm_stream_pd(p, v);
#endif
  Eigen::internal::pstoreu(p, v);
}
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// y[i] = exp(x[i] - shift) for the n elements of a row, and their sum, in one pass (softmax's
// numerator and denominator, Simd<T>::exp's accuracy); y may be x.
template <class T> T exp_shifted_sum(const T* x, T shift, T* y, std::int64_t n) {
  constexpr std::int64_t W = Simd<T>::width;
  const Simd<T> s = Simd<T>::broadcast(shift);
  Simd<T> a0 = Simd<T>::broadcast(T(0)), a1 = a0;
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const Simd<T> e0 = (Simd<T>::load(x + i) - s).exp(), e1 = (Simd<T>::load(x + i + W) - s).exp();
    e0.store(y + i);
    e1.store(y + i + W);
    a0 = a0 + e0;
    a1 = a1 + e1;
  }
  for (; i + W <= n; i += W) {
    const Simd<T> e = (Simd<T>::load(x + i) - s).exp();
    e.store(y + i);
    a0 = a0 + e;
  }
  T sum = Eigen::internal::predux((a0 + a1).v);
  for (; i < n; ++i) sum += y[i] = std::exp(x[i] - shift);
  return sum;
}

// ---------------------------------------------------------------- inner loops
// Each computes out[i] = Op::apply(in[i * stride]...) for i in [0, n); the output is
// contiguous, inputs have any stride (0 = broadcast). Floating types run the formula on
// Simd registers, the tail on a partially filled register; integer and Bool types run the
// scalar formula (the compiler vectorizes the simple ones over contiguous operands).

// The contiguous inputs of a forward loop whose data is larger than the usable cache (the caller's
// `stream`) and whose op is not light (light_op below): for each register of output, the line
// kAheadBytes ahead of each is fetched. Such an op computes long enough per register that the
// hardware prefetchers, which stop at each 4 KiB page, leave the memory idle at each page's
// start and the loads waiting on it. On a 2-core Xeon VM, GELU over 16M f32 on 2 threads
// (a loop of its own, 2 MiB pages) took 4.3-4.4 ms without, 3.1-3.4 fetching 1 KiB ahead and
// 2.8-3.0 fetching 2-8 KiB ahead; Tensor::gelu (`gelu_16M`) went from 4.2-4.4 to 2.6 ms. A
// light op keeps up with the memory without it. Fusion<Cpu>'s programs fetch ahead likewise
// (program.cpp). The gradient loops do not (elementwise_backward.cpp).
inline constexpr std::int64_t kAheadBytes = 4096;
template <class T, std::size_t K> struct Ahead {
  std::array<const T*, K> inputs{};  // null where an input is not contiguous
  bool on = false;

  KILN_INLINE void fetch(std::int64_t i) const {
    for (const T* p : inputs)
      if (p != nullptr) __builtin_prefetch(p + i + kAheadBytes / static_cast<std::int64_t>(sizeof(T)));
  }
};

// Writes y[0..n) from `compute(i, count)` (a Simd or SimdMask for elements i..i+count),
// in full registers except at the ends; streamed when asked and the output is a float type;
// `ahead`'s inputs fetched ahead when it is on.
// compute is called from one place only, so the op's formula is inlined once per loop.
template <class T, class R, std::size_t K, class Compute>
KILN_INLINE void simd_loop(R* y, std::int64_t n, bool stream, const Ahead<T, K>& ahead, Compute&& compute) {
  constexpr std::int64_t W = Simd<T>::width;
  constexpr bool streamable = !std::is_same_v<R, bool>;
  std::int64_t count = std::min(W, n);
  if constexpr (streamable) {
    // Streaming stores need aligned addresses: a short first block reaches the alignment.
    constexpr std::uintptr_t align = sizeof(typename Simd<T>::Packet);
    const auto misaligned = reinterpret_cast<std::uintptr_t>(y) % align;
    if (!stream || misaligned % sizeof(R) != 0) {
      stream = false;
    } else if (misaligned != 0) {
      count = std::min<std::int64_t>(n, static_cast<std::int64_t>((align - misaligned) / sizeof(R)));
    }
  }
  for (std::int64_t i = 0; i < n; i += count, count = std::min(W, n - i)) {
    if (ahead.on) ahead.fetch(i);
    const auto r = compute(i, count);
    if constexpr (streamable) {
      if (count == W) {
        if (stream) stream_store(y + i, r.v);
        else r.store(y + i);
      } else {
        r.store_partial(y + i, count);
      }
    } else {
      r.store(y + i, count);
    }
  }
  if (stream) stream_fence();
}

// `count` elements of operand p at `stride` from element i (stride 0 broadcasts p[0]).
template <class T>
[[gnu::noinline]] Simd<T> load_run_slow(const T* p, std::int64_t stride, std::int64_t i, std::int64_t count) {
  if (count != Simd<T>::width) return Simd<T>::load_partial(p + i * stride, stride, count);
  return Simd<T>::gather(p + i * stride, stride);
}
template <class T> KILN_INLINE Simd<T> load_run(const T* p, std::int64_t stride, std::int64_t i, std::int64_t count) {
  if (stride == 0) return Simd<T>::broadcast(*p);
  if (stride == 1 && count == Simd<T>::width) [[likely]] return Simd<T>::load(p + i);
  return load_run_slow(p, stride, i, count);
}

// Ops whose formula is a few instructions per register, so that their loops over a large
// tensor are bound by memory: only these stream their outputs (and their gradients'). On a
// 2-core Xeon VM, over 16M f32 on 2 threads, streaming took add from 5.9 to 4.2 ms, mul 5.9
// to 4.1, relu 3.6 to 2.6 and exp 4.0 to 3.2, but made ops with longer formulas slower: gelu
// 4.3 to 6.5, tanh 4.4 to 7.8, sigmoid 4.1 to 5.4, log 10.7 to 20.3 (computing blocks into an
// L1 buffer and streaming each block out helped log, 8.2, and still slowed the others).
template <class Op, class... Light> inline constexpr bool is_light_among = (std::is_same_v<Op, Light> || ...);
template <class Op>
inline constexpr bool light_op =
    is_light_among<Op, ops::Add, ops::Sub, ops::Mul, ops::Div, ops::Maximum, ops::Minimum, ops::Copysign, ops::Neg,
                   ops::Abs, ops::Sign, ops::Relu, ops::Floor, ops::Ceil, ops::Round, ops::Trunc, ops::Frac,
                   ops::Sqrt, ops::Rsqrt, ops::Recip, ops::Exp, ops::Exp2>;

// The Ahead of an Op's loop over `inputs` at element `strides` (ahead_of<Op>(stream, {a, b}, {sa, sb})).
template <class Op, class T, std::size_t K>
KILN_INLINE Ahead<T, K> ahead_of(bool out_of_cache, const T* const (&inputs)[K], const std::int64_t (&strides)[K]) {
  Ahead<T, K> ahead;
  ahead.on = out_of_cache && !light_op<Op>;
  for (std::size_t k = 0; k < K; ++k) ahead.inputs[k] = strides[k] == 1 ? inputs[k] : nullptr;
  return ahead;
}

template <class Op, class T, class R>
void unary_run(const T* x, std::int64_t sx, R* y, std::int64_t n, bool stream) {
  if constexpr (std::is_floating_point_v<T>) {
    simd_loop<T>(y, n, stream && light_op<Op>, ahead_of<Op>(stream, {x}, {sx}),
                 [=](std::int64_t i, std::int64_t count) KILN_INLINE_LAMBDA {
      return Op::apply(load_run(x, sx, i, count));
    });
  } else if (sx == 1) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(Op::apply(x[i]));
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(Op::apply(x[i * sx]));
  }
}

template <class Op, class T, class R>
void binary_run(const T* a, std::int64_t sa, const T* b, std::int64_t sb, R* y, std::int64_t n, bool stream) {
  if constexpr (std::is_floating_point_v<T>) {
    simd_loop<T>(y, n, stream && light_op<Op>, ahead_of<Op>(stream, {a, b}, {sa, sb}),
                 [=](std::int64_t i, std::int64_t count) KILN_INLINE_LAMBDA {
      return Op::apply(load_run(a, sa, i, count), load_run(b, sb, i, count));
    });
  } else if (sa == 1 && sb == 1) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(Op::apply(a[i], b[i]));
  } else if (sa == 1 && sb == 0) {
    const T scalar = *b;
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(Op::apply(a[i], scalar));
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(Op::apply(a[i * sa], b[i * sb]));
  }
}

// ---------------------------------------------------------------- driving the loops
// The inner loop of one op and dtype, behind a plain function pointer: the walk over
// shapes, strides and threads (run_elementwise, in elementwise.cpp) is compiled once,
// not once per op and dtype. inputs[k] points at the run's first element of operand k,
// strides[k] is its element stride (0 = broadcast); the output run is contiguous.
using RunKernel = void (*)(const void* context, const std::byte* const* inputs, const std::int64_t* strides,
                           std::byte* out, std::int64_t count, bool stream);

// Computes `out` (contiguous, of the broadcast shape) from 1 to kMaxElementwiseInputs inputs
// of any strides that broadcast to out.shape, splitting the work among the threads.
inline constexpr std::size_t kMaxElementwiseInputs = 8;
void run_elementwise(std::span<const CpuTensor* const> inputs, const CpuTensor& out, RunKernel kernel,
                     const void* context = nullptr);

template <class Op, class T, class R>
void unary_kernel(const void*, const std::byte* const* in, const std::int64_t* s, std::byte* out, std::int64_t n,
                  bool stream) {
  unary_run<Op>(reinterpret_cast<const T*>(in[0]), s[0], reinterpret_cast<R*>(out), n, stream);
}
// Not inlined into binary_scalar_kernel: one copy of each op's loops serves both.
template <class Op, class T, class R>
[[gnu::noinline]] void binary_kernel(const void*, const std::byte* const* in, const std::int64_t* s, std::byte* out,
                                     std::int64_t n, bool stream) {
  binary_run<Op>(reinterpret_cast<const T*>(in[0]), s[0], reinterpret_cast<const T*>(in[1]), s[1],
                 reinterpret_cast<R*>(out), n, stream);
}
// The right operand is the scalar that `context` points at.
template <class Op, class T, class R>
void binary_scalar_kernel(const void* context, const std::byte* const* in, const std::int64_t* s, std::byte* out,
                          std::int64_t n, bool stream) {
  const std::byte* operands[2] = {in[0], static_cast<const std::byte*>(context)};
  const std::int64_t strides[2] = {s[0], 0};
  binary_kernel<Op, T, R>(nullptr, operands, strides, out, n, stream);
}

// ---------------------------------------------------------------- dtype dispatch

// Runs fn.template operator()<T>() for the dtypes an op's domain admits (f16/bf16 excluded: they compute via f32).
template <class Op, class F> void dispatch_domain(DType dtype, F&& fn) {
  using ops::Domain;
  if constexpr (Op::domain == Domain::boolean) {
    fn.template operator()<bool>();
  } else {
    switch (dtype) {
      case DType::f32: fn.template operator()<float>(); return;
      case DType::f64: fn.template operator()<double>(); return;
      default: break;
    }
    if constexpr (Op::domain == Domain::numeric) {
      switch (dtype) {
        case DType::i32: fn.template operator()<std::int32_t>(); return;
        case DType::i64: fn.template operator()<std::int64_t>(); return;
        case DType::u8: fn.template operator()<std::uint8_t>(); return;
        default: break;
      }
    }
    KILN_FAIL("{}: the CPU backend has no kernel for {}", Op::name, dtype);
  }
}

inline bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

}  // namespace kiln::cpu
