// Elementwise kernels for every op of the catalogue. Floating types run the op's
// formula on Eigen arrays of up to kChunk elements (Eigen vectorizes exp, erf, tanh...);
// integer and Bool types run the scalar formula. Broadcasting and strides are handled by
// strided_walk, which hands each chunk its operands' offsets and inner strides.
#include "internal.hpp"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

namespace kiln::cpu {
namespace {

constexpr std::int64_t kChunk = 1024;
template <class T> using Vec = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kChunk, 1>;
template <class T> using MapOut = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T> void load(Vec<T>& v, const T* p, std::int64_t stride, std::int64_t n) {
  v.resize(n);
  if (stride == 1) {
    v = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(p, n);
  } else if (stride == 0) {
    v.setConstant(p[0]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) v[i] = p[i * stride];
  }
}

template <class Op> void check_domain(DType dtype) {
  using ops::Domain;
  if constexpr (Op::domain == Domain::float_only)
    KILN_CHECK(is_float(dtype), "{}: expected a float tensor, got {}", Op::name, dtype);
  else if constexpr (Op::domain == Domain::numeric)
    KILN_CHECK(!is_bool(dtype), "{}: expected a float or int tensor, got {}", Op::name, dtype);
  else
    KILN_CHECK(is_bool(dtype), "{}: expected a bool tensor, got {}", Op::name, dtype);
}

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

bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;
using cpu::kChunk;
using cpu::Vec;

template <class Op> Cpu::Primitive Cpu::unary(const Primitive& x) {
  cpu::check_domain<Op>(x.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (cpu::is_half(x.dtype)) {
    Primitive r = unary<Op>(cast(x, DType::f32));
    return predicate ? r : cast(r, x.dtype);
  }
  CpuTensor out = cpu::empty(x.shape, predicate ? DType::boolean : x.dtype);
  cpu::dispatch_domain<Op>(x.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    const T* src = x.data<T>();
    R* dst = out.data<R>();
    cpu::strided_walk<2>(x.shape, {&x.strides, &out.strides}, kChunk, [&](const auto& off, const auto& inner,
                                                                          std::int64_t n) {
      if constexpr (std::is_floating_point_v<T>) {
        Vec<T> v;
        cpu::load(v, src + off[0], inner[0], n);
        cpu::MapOut<R>(dst + off[1], n) = Op::apply(v);
      } else {
        for (std::int64_t i = 0; i < n; ++i) dst[off[1] + i] = static_cast<R>(Op::apply(src[off[0] + i * inner[0]]));
      }
    });
  });
  return out;
}

template <class Op> Cpu::Primitive Cpu::binary(const Primitive& a, const Primitive& b) {
  KILN_CHECK(a.dtype == b.dtype, "{}: both operands must have the same dtype, got {} {} and {} {}", Op::name,
             a.shape, a.dtype, b.shape, b.dtype);
  cpu::check_domain<Op>(a.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (cpu::is_half(a.dtype)) {
    Primitive r = binary<Op>(cast(a, DType::f32), cast(b, DType::f32));
    return predicate ? r : cast(r, a.dtype);
  }
  const Shape shape = broadcast_shapes(Op::name, a.shape, b.shape);
  const CpuTensor av = cpu::broadcast_view(a, shape), bv = cpu::broadcast_view(b, shape);
  CpuTensor out = cpu::empty(shape, predicate ? DType::boolean : a.dtype);
  cpu::dispatch_domain<Op>(a.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    const T* pa = av.data<T>();
    const T* pb = bv.data<T>();
    R* dst = out.data<R>();
    cpu::strided_walk<3>(shape, {&av.strides, &bv.strides, &out.strides}, kChunk,
                         [&](const auto& off, const auto& inner, std::int64_t n) {
                           if constexpr (std::is_floating_point_v<T>) {
                             Vec<T> va, vb;
                             cpu::load(va, pa + off[0], inner[0], n);
                             cpu::load(vb, pb + off[1], inner[1], n);
                             cpu::MapOut<R>(dst + off[2], n) = Op::apply(va, vb);
                           } else {
                             for (std::int64_t i = 0; i < n; ++i)
                               dst[off[2] + i] =
                                   static_cast<R>(Op::apply(pa[off[0] + i * inner[0]], pb[off[1] + i * inner[1]]));
                           }
                         });
  });
  return out;
}

template <class Op> Cpu::Primitive Cpu::binary_scalar(const Primitive& a, double b) {
  return binary<Op>(a, full(Shape{}, b, a.dtype, Device{}));
}

Cpu::Primitive Cpu::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  KILN_CHECK(cond.dtype == DType::boolean, "where: the condition must be bool, got {}", cond.dtype);
  KILN_CHECK(a.dtype == b.dtype, "where: both branches must have the same dtype, got {} {} and {} {}", a.shape,
             a.dtype, b.shape, b.dtype);
  const Shape shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape, a.shape), b.shape);
  const CpuTensor cv = cpu::broadcast_view(cond, shape), av = cpu::broadcast_view(a, shape),
                  bv = cpu::broadcast_view(b, shape);
  CpuTensor out = cpu::empty(shape, a.dtype);
  visit_dtype(a.dtype, [&]<class T>() {
    const bool* pc = cv.data<bool>();
    const T* pa = av.data<T>();
    const T* pb = bv.data<T>();
    T* dst = out.data<T>();
    cpu::strided_walk<4>(shape, {&cv.strides, &av.strides, &bv.strides, &out.strides}, kChunk,
                         [&](const auto& off, const auto& inner, std::int64_t n) {
                           for (std::int64_t i = 0; i < n; ++i)
                             dst[off[3] + i] = pc[off[0] + i * inner[0]] ? pa[off[1] + i * inner[1]]
                                                                         : pb[off[2] + i * inner[2]];
                         });
  });
  return out;
}

#define KILN_CPU_INSTANTIATE_UNARY(Op) template Cpu::Primitive Cpu::unary<ops::Op>(const Cpu::Primitive&);
#define KILN_CPU_INSTANTIATE_BINARY(Op)                                                     \
  template Cpu::Primitive Cpu::binary<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&); \
  template Cpu::Primitive Cpu::binary_scalar<ops::Op>(const Cpu::Primitive&, double);
KILN_UNARY_OPS(KILN_CPU_INSTANTIATE_UNARY)
KILN_BINARY_OPS(KILN_CPU_INSTANTIATE_BINARY)

}  // namespace kiln
