// Fused optimizer steps: one pass over a parameter, its gradient and its moments, with
// the catalogue's scalar formula (kiln/ops/optim.hpp), where the same step from tensor
// ops takes about a dozen passes.
#include "internal.hpp"

namespace kiln {

std::array<Cpu::Primitive, 3> Cpu::adam_step(Primitive&& param, const Primitive& grad, Primitive&& m, Primitive&& v,
                                             const ops::AdamStep& options) {
  for (const Primitive* t : std::initializer_list<const Primitive*>{&grad, &m, &v}) {
    KILN_CHECK(t->shape == param.shape && t->dtype == param.dtype,
               "adam_step: param {} {}, grad {} {}, m {} {}, v {} {} must share shape and dtype", param.shape,
               param.dtype, grad.shape, grad.dtype, m.shape, m.dtype, v.shape, v.dtype);
  }
  if (!cpu::is_native_float(param.dtype)) {  // f16, bf16: through f32 copies, into fresh buffers
    const auto f = [](const Primitive& t) { return cast(t, DType::f32); };
    auto out = adam_step(f(param), f(grad), f(m), f(v), options);
    for (auto& t : out) t = cast(t, param.dtype);
    return out;
  }
  const auto c = options.constants();
  // Every allocation comes before the first write, so that an error leaves the inputs whole.
  const std::array<Primitive*, 3> given{&param, &m, &v};
  std::array<bool, 3> over{};
  std::array<Primitive, 3> out;
  for (std::size_t k = 0; k < 3; ++k) {
    over[k] = cpu::can_write_over(*given[k]);
    if (!over[k]) out[k] = cpu::empty(param.shape, param.dtype);
  }
  const auto target = [&](std::size_t k) -> const Primitive& { return over[k] ? *given[k] : out[k]; };
  const cpu::CpuTensor p_in = cpu::contiguous(param), g_in = cpu::contiguous(grad), m_in = cpu::contiguous(m),
                       v_in = cpu::contiguous(v);
  cpu::dispatch_float("adam_step", param.dtype, [&]<class T>() {
    const T *p0 = p_in.data<T>(), *g0 = g_in.data<T>(), *m0 = m_in.data<T>(), *v0 = v_in.data<T>();
    T *p1 = target(0).data<T>(), *m1 = target(1).data<T>(), *v1 = target(2).data<T>();
    cpu::parallel_for(param.numel(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
      // An element is read before it is written, at the same index: in place or not alike.
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
  for (std::size_t k = 0; k < 3; ++k)
    if (over[k]) out[k] = std::move(*given[k]);
  return out;
}

}  // namespace kiln
