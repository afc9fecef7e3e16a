// Resampling of NCHW tensors to a new height and width (nearest, bilinear, bicubic),
// forward and backward, with torch.nn.functional.interpolate's index and weight rules.
// Every mode is separable: each output row and column reads K input rows and columns
// (K = 1, 2, 4) with weights computed once per axis. f16/bf16 compute through f32.
#include "internal.hpp"

#include "kiln/ops/interpolate.hpp"

#include <cmath>

namespace kiln::cpu {
namespace {

using ops::InterpolateMode;

using ops::AxisTaps;
using ops::axis_taps;

struct Extents {
  std::int64_t planes, h, w, oh, ow;
};

template <class T, int K>
void resample_forward(const T* in, T* out, const Extents& e, bool align_corners) {
  const AxisTaps<T> rows = axis_taps<T, K>(e.h, e.oh, align_corners);
  const AxisTaps<T> cols = axis_taps<T, K>(e.w, e.ow, align_corners);
  parallel_for(e.planes * e.oh, std::max<std::int64_t>(1, 32768 / (e.ow * K * K)),
               [&](std::int64_t b, std::int64_t end) {
                 for (std::int64_t r = b; r < end; ++r) {
                   const std::int64_t p = r / e.oh, oh = r % e.oh;
                   const T* plane = in + p * e.h * e.w;
                   T* dst = out + r * e.ow;
                   const std::int64_t* ih = rows.index.data() + oh * K;
                   const T* wh = rows.weight.data() + oh * K;
                   for (std::int64_t ow = 0; ow < e.ow; ++ow) {
                     const std::int64_t* iw = cols.index.data() + ow * K;
                     const T* ww = cols.weight.data() + ow * K;
                     T sum = 0;
                     for (int a = 0; a < K; ++a) {
                       const T* row = plane + ih[a] * e.w;
                       T inner = 0;
                       for (int c = 0; c < K; ++c) inner += ww[c] * row[iw[c]];
                       sum += wh[a] * inner;
                     }
                     dst[ow] = sum;
                   }
                 }
               });
}

template <class T, int K>
void resample_backward(const T* dy, T* dx, const Extents& e, bool align_corners) {
  const AxisTaps<T> rows = axis_taps<T, K>(e.h, e.oh, align_corners);
  const AxisTaps<T> cols = axis_taps<T, K>(e.w, e.ow, align_corners);
  // One plane per task: the scatter into dx stays within the plane, so no two threads collide.
  parallel_for(e.planes, std::max<std::int64_t>(1, 32768 / (e.oh * e.ow * K * K)),
               [&](std::int64_t b, std::int64_t end) {
                 for (std::int64_t p = b; p < end; ++p) {
                   T* plane = dx + p * e.h * e.w;
                   std::fill(plane, plane + e.h * e.w, T(0));
                   for (std::int64_t oh = 0; oh < e.oh; ++oh) {
                     const std::int64_t* ih = rows.index.data() + oh * K;
                     const T* wh = rows.weight.data() + oh * K;
                     const T* grad = dy + (p * e.oh + oh) * e.ow;
                     for (std::int64_t ow = 0; ow < e.ow; ++ow) {
                       const std::int64_t* iw = cols.index.data() + ow * K;
                       const T* ww = cols.weight.data() + ow * K;
                       for (int a = 0; a < K; ++a)
                         for (int c = 0; c < K; ++c) plane[ih[a] * e.w + iw[c]] += wh[a] * ww[c] * grad[ow];
                     }
                   }
                 }
               });
}

template <class T>
void resample(const T* src, T* dst, const Extents& e, const ops::InterpolateOptions& o, bool backward) {
  auto run = [&]<int K>() {
    if (backward)
      resample_backward<T, K>(src, dst, e, o.align_corners);
    else
      resample_forward<T, K>(src, dst, e, o.align_corners);
  };
  switch (o.mode) {
    case InterpolateMode::nearest:
      run.template operator()<1>();
      break;
    case InterpolateMode::bilinear:
      run.template operator()<2>();
      break;
    case InterpolateMode::bicubic:
      run.template operator()<4>();
      break;
  }
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                                const ops::InterpolateOptions& options) {
  ops::check_interpolate(x.shape, x.dtype, output_size);
  if (!cpu::is_native_float(x.dtype)) return cast(interpolate(cast(x, DType::f32), output_size, options), x.dtype);
  const CpuTensor in = cpu::contiguous(x);
  CpuTensor out = cpu::empty(Shape{x.shape[0], x.shape[1], output_size[0], output_size[1]}, x.dtype);
  const cpu::Extents e{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], output_size[0], output_size[1]};
  cpu::dispatch_float("interpolate", x.dtype,
                      [&]<class T>() { cpu::resample<T>(in.data<T>(), out.data<T>(), e, options, false); });
  return out;
}

Cpu::Primitive Cpu::interpolate_backward(const Primitive& x, const Primitive& dy,
                                         const ops::InterpolateOptions& options) {
  ops::check_interpolate_backward(x.shape, x.dtype, dy.shape, dy.dtype);
  if (!cpu::is_native_float(x.dtype))
    return cast(interpolate_backward(cast(x, DType::f32), cast(dy, DType::f32), options), x.dtype);
  const CpuTensor grad = cpu::contiguous(dy);
  CpuTensor dx = cpu::empty(x.shape, x.dtype);
  const cpu::Extents e{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], dy.shape[2], dy.shape[3]};
  cpu::dispatch_float("interpolate_backward", x.dtype,
                      [&]<class T>() { cpu::resample<T>(grad.data<T>(), dx.data<T>(), e, options, true); });
  return dx;
}

}  // namespace kiln
