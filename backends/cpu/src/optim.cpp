// Fused optimizer steps: one pass over a parameter, its gradient and its moments, with
// the catalogue's scalar formula (kiln/ops/optim.hpp), where the same step from tensor
// ops takes about a dozen passes.
#include "internal.hpp"

namespace kiln {

std::array<Cpu::Primitive, 3> Cpu::adam_step(const Primitive& param, const Primitive& grad, const Primitive& m,
                                             const Primitive& v, const ops::AdamStep& options) {
  for (const Primitive* t : {&grad, &m, &v}) {
    KILN_CHECK(t->shape == param.shape && t->dtype == param.dtype,
               "adam_step: param {} {}, grad {} {}, m {} {}, v {} {} must share shape and dtype", param.shape,
               param.dtype, grad.shape, grad.dtype, m.shape, m.dtype, v.shape, v.dtype);
  }
  if (!cpu::is_native_float(param.dtype)) {
    const auto f = [](const Primitive& t) { return cast(t, DType::f32); };
    auto out = adam_step(f(param), f(grad), f(m), f(v), options);
    for (auto& t : out) t = cast(t, param.dtype);
    return out;
  }
  const auto c = options.constants();
  const cpu::CpuTensor p_in = cpu::contiguous(param), g_in = cpu::contiguous(grad), m_in = cpu::contiguous(m),
                       v_in = cpu::contiguous(v);
  std::array<Primitive, 3> out{cpu::empty(param.shape, param.dtype), cpu::empty(param.shape, param.dtype),
                               cpu::empty(param.shape, param.dtype)};
  cpu::dispatch_float("adam_step", param.dtype, [&]<class T>() {
    const T *p0 = p_in.data<T>(), *g0 = g_in.data<T>(), *m0 = m_in.data<T>(), *v0 = v_in.data<T>();
    T *p1 = out[0].data<T>(), *m1 = out[1].data<T>(), *v1 = out[2].data<T>();
    cpu::parallel_for(param.numel(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) {
        T p = p0[i], mi = m0[i], vi = v0[i];
        ops::AdamStep::apply(p, mi, vi, g0[i], c);
        p1[i] = p;
        m1[i] = mi;
        v1[i] = vi;
      }
    });
  });
  return out;
}

}  // namespace kiln
