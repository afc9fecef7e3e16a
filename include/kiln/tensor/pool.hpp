// Pooling and resampling on tensors (kiln::functional): max, average and adaptive average
// pooling over NCL (1-d) and NCHW (2-d) inputs, max and average pooling over NCDHW (3-d)
// inputs, and interpolate. The 1-d ops run as the 2-d primitives with a height of 1, the 3-d
// ones as two 2-d poolings (the (H, W) planes, then the depth); an unbatched input (CL, CHW,
// CDHW) runs as a batch of one.
//
// Options are explicit: unlike PyTorch, a stride left at its default is 1, not the kernel size.
#pragma once

#include "kiln/ops/nn.hpp"
#include "kiln/tensor/tensor.hpp"

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::functional {

namespace detail {

// The primitive of `x` as NCHW: `spatial` (1 or 2) trailing spatial dims, batch optional.
template <class B, std::size_t D, class K>
typename B::Primitive as_nchw(const Tensor<B, D, K>& x, std::size_t spatial) {
  std::vector<std::int64_t> dims = x.shape().to_vector();
  if (D == spatial + 1) dims.insert(dims.begin(), 1);  // unbatched
  if (spatial == 1) dims.insert(dims.end() - 1, 1);    // height 1
  if (dims == x.shape().to_vector()) return x.primitive();
  return B::reshape(x.primitive(), Shape(std::move(dims)));
}

// The NCHW result `p` back in the layout of a rank-D input with `spatial` spatial dims.
template <class B, std::size_t D, class K = Float>
Tensor<B, D, K> from_nchw(const typename B::Primitive& p, std::size_t spatial) {
  std::vector<std::int64_t> dims = B::shape(p).to_vector();
  if (spatial == 1) dims.erase(dims.end() - 2);
  if (D == spatial + 1) dims.erase(dims.begin());
  if (dims.size() == 4) return Tensor<B, D, K>(p);
  return Tensor<B, D, K>(B::reshape(p, Shape(std::move(dims))));
}

inline void check_pool1d(std::string_view op, const Shape& x, const ops::Pool1dOptions& o) {
  KILN_CHECK(o.kernel > 0 && o.stride > 0 && o.dilation > 0,
             "{}: kernel {}, stride {} and dilation {} must be positive (input {})", op, o.kernel, o.stride, o.dilation,
             x);
  KILN_CHECK(o.padding >= 0 && o.padding <= o.kernel / 2,
             "{}: padding {} must be between 0 and half the kernel {} (input {})", op, o.padding, o.kernel, x);
  const std::int64_t out =
      ops::window_output_size(x[x.rank() - 1], o.kernel, o.stride, o.padding, o.dilation, o.ceil_mode);
  KILN_CHECK(out > 0,
             "{}: input {} is too small for kernel {}, stride {}, padding {}, dilation {}: the output length would be "
             "{}",
             op, x, o.kernel, o.stride, o.padding, o.dilation, out);
}

inline void check_avg_dilation(std::string_view op, const std::array<std::int64_t, 2>& dilation) {
  KILN_CHECK(dilation[0] == 1 && dilation[1] == 1, "{}: average pooling has no dilation, got {}", op, dilation);
}

// The output shape of 3-d pooling of an NCDHW input `x`, after PyTorch's checks: kernel,
// stride and dilation positive, padding at most half the kernel, a non-empty output.
inline Shape pool3d_output_shape(std::string_view op, const Shape& x, const ops::Pool3dOptions& o) {
  for (std::size_t i = 0; i < 3; ++i) {
    KILN_CHECK(o.kernel[i] > 0 && o.stride[i] > 0 && o.dilation[i] > 0,
               "{}: kernel {}, stride {} and dilation {} must be positive (input {})", op, o.kernel, o.stride,
               o.dilation, x);
    KILN_CHECK(o.padding[i] >= 0 && o.padding[i] <= o.kernel[i] / 2,
               "{}: padding {} must be between 0 and half the kernel {} (input {})", op, o.padding, o.kernel, x);
  }
  std::array<std::int64_t, 3> out{};
  for (std::size_t i = 0; i < 3; ++i)
    out[i] = ops::window_output_size(x[2 + i], o.kernel[i], o.stride[i], o.padding[i], o.dilation[i], o.ceil_mode);
  KILN_CHECK(out[0] > 0 && out[1] > 0 && out[2] > 0,
             "{}: input {} is too small for kernel {}, stride {}, padding {}, dilation {}: the output would be "
             "{}x{}x{}",
             op, x, o.kernel, o.stride, o.padding, o.dilation, out[0], out[1], out[2]);
  return Shape{x[0], x[1], out[0], out[1], out[2]};
}

// A 3-d window as two 2-d ones (max and average pooling are separable: each window is a
// product of one range per axis, and so is each divisor): over the (H, W) planes, then over
// the depth of [N, C, D, H'*W'] with a width of 1.
inline std::pair<ops::Pool2dOptions, ops::Pool2dOptions> pool3d_stages(const ops::Pool3dOptions& o) {
  const ops::Pool2dOptions planar{{o.kernel[1], o.kernel[2]}, {o.stride[1], o.stride[2]}, {o.padding[1], o.padding[2]},
                                  {o.dilation[1], o.dilation[2]}, o.ceil_mode, o.count_include_pad};
  const ops::Pool2dOptions along_depth{{o.kernel[0], 1}, {o.stride[0], 1}, {o.padding[0], 0}, {o.dilation[0], 1},
                                       o.ceil_mode, o.count_include_pad};
  return {planar, along_depth};
}

// An unbatched CDHW input as a batch of one, and back.
template <class B, std::size_t D> Tensor<B, 5> as_ncdhw(const Tensor<B, D>& x) {
  if constexpr (D == 4) return x.unsqueeze_dim(0);
  else return x;
}
template <class B, std::size_t D, class K> Tensor<B, D, K> from_ncdhw(const Tensor<B, 5, K>& y) {
  if constexpr (D == 4) return y.squeeze_dim(0);
  else return y;
}

}  // namespace detail

// ---- 2-d pooling on NCHW (or unbatched CHW) inputs

// {max values, i64 indices}: each index is the flat h * W + w position of the maximum in its input plane.
template <Backend B, std::size_t D>
requires(D == 3 ||
         D == 4) std::pair<Tensor<B, D>, Tensor<B, D, Int>> max_pool2d_with_indices(const Tensor<B, D>& x,
                                                                                    const ops::Pool2dOptions& options) {
  const auto p = detail::as_nchw(x, 2);
  ops::pool2d_output_shape("max_pool2d", B::shape(p), options);
  auto [out, indices] = B::max_pool2d(p, options);
  return {detail::from_nchw<B, D>(out, 2), detail::from_nchw<B, D, Int>(indices, 2)};
}

template <Backend B, std::size_t D>
requires(D == 3 || D == 4) Tensor<B, D> max_pool2d(const Tensor<B, D>& x, const ops::Pool2dOptions& options) {
  return max_pool2d_with_indices(x, options).first;
}

template <Backend B, std::size_t D>
requires(D == 3 || D == 4) Tensor<B, D> avg_pool2d(const Tensor<B, D>& x, const ops::Pool2dOptions& options) {
  detail::check_avg_dilation("avg_pool2d", options.dilation);
  const auto p = detail::as_nchw(x, 2);
  ops::pool2d_output_shape("avg_pool2d", B::shape(p), options);
  return detail::from_nchw<B, D>(provided::avg_pool2d<B>(p, options), 2);
}

// Output cell i covers input [floor(i * in / out), ceil((i + 1) * in / out)) along each axis.
template <Backend B, std::size_t D>
requires(D == 3 || D == 4) Tensor<B, D> adaptive_avg_pool2d(const Tensor<B, D>& x,
                                                            const std::array<std::int64_t, 2>& output_size) {
  KILN_CHECK(output_size[0] > 0 && output_size[1] > 0,
             "adaptive_avg_pool2d: output size {} must be positive (input {})", output_size, x.shape());
  KILN_CHECK(x.dim(-1) > 0 && x.dim(-2) > 0, "adaptive_avg_pool2d: input {} has an empty spatial dim", x.shape());
  return detail::from_nchw<B, D>(provided::adaptive_avg_pool2d<B>(detail::as_nchw(x, 2), output_size), 2);
}

// ---- 1-d pooling on NCL (or unbatched CL) inputs

// {max values, i64 indices}: each index is the position of the maximum along L.
template <Backend B, std::size_t D>
requires(D == 2 ||
         D == 3) std::pair<Tensor<B, D>, Tensor<B, D, Int>> max_pool1d_with_indices(const Tensor<B, D>& x,
                                                                                    const ops::Pool1dOptions& options) {
  detail::check_pool1d("max_pool1d", x.shape(), options);
  auto [out, indices] = B::max_pool2d(detail::as_nchw(x, 1), options.as_2d());
  return {detail::from_nchw<B, D>(out, 1), detail::from_nchw<B, D, Int>(indices, 1)};
}

template <Backend B, std::size_t D>
requires(D == 2 || D == 3) Tensor<B, D> max_pool1d(const Tensor<B, D>& x, const ops::Pool1dOptions& options) {
  return max_pool1d_with_indices(x, options).first;
}

template <Backend B, std::size_t D>
requires(D == 2 || D == 3) Tensor<B, D> avg_pool1d(const Tensor<B, D>& x, const ops::Pool1dOptions& options) {
  KILN_CHECK(options.dilation == 1, "avg_pool1d: average pooling has no dilation, got {}", options.dilation);
  detail::check_pool1d("avg_pool1d", x.shape(), options);
  return detail::from_nchw<B, D>(provided::avg_pool2d<B>(detail::as_nchw(x, 1), options.as_2d()), 1);
}

template <Backend B, std::size_t D>
requires(D == 2 || D == 3) Tensor<B, D> adaptive_avg_pool1d(const Tensor<B, D>& x, std::int64_t output_size) {
  KILN_CHECK(output_size > 0, "adaptive_avg_pool1d: output size {} must be positive (input {})", output_size,
             x.shape());
  KILN_CHECK(x.dim(-1) > 0, "adaptive_avg_pool1d: input {} has an empty length", x.shape());
  const std::array<std::int64_t, 2> size{1, output_size};
  return detail::from_nchw<B, D>(provided::adaptive_avg_pool2d<B>(detail::as_nchw(x, 1), size), 1);
}

// ---- 3-d pooling on NCDHW (or unbatched CDHW) inputs

// {max values, i64 indices}: each index is the flat (d * H + h) * W + w position of the maximum in its input volume.
template <Backend B, std::size_t D>
requires(D == 4 ||
         D == 5) std::pair<Tensor<B, D>, Tensor<B, D, Int>> max_pool3d_with_indices(const Tensor<B, D>& x,
                                                                                    const ops::Pool3dOptions& options) {
  const Tensor<B, 5> x5 = detail::as_ncdhw(x);
  const Shape s = x5.shape(), out = detail::pool3d_output_shape("max_pool3d", s, options);
  const auto [planar, along_depth] = detail::pool3d_stages(options);
  const std::int64_t batch = s[0], channels = s[1], depth = s[2], plane = out[3] * out[4];
  const auto [planes, plane_at] = max_pool2d_with_indices(x5.reshape({batch, channels * depth, s[3], s[4]}), planar);
  const auto [y, depth_at] = max_pool2d_with_indices(planes.reshape({batch, channels, depth, plane}), along_depth);
  // depth_at is d * H'*W' + the output position; the plane stage at depth d holds h * W + w.
  const Tensor<B, 4, Int> d = depth_at.div(static_cast<double>(plane));
  const Tensor<B, 4, Int> at =
      plane_at.reshape({batch, channels, depth, plane}).gather(2, d).add(d.mul(static_cast<double>(s[3] * s[4])));
  const std::array<std::int64_t, 5> dims{batch, channels, out[2], out[3], out[4]};
  return {detail::from_ncdhw<B, D, Float>(y.reshape(dims)), detail::from_ncdhw<B, D, Int>(at.reshape(dims))};
}

template <Backend B, std::size_t D>
requires(D == 4 || D == 5) Tensor<B, D> max_pool3d(const Tensor<B, D>& x, const ops::Pool3dOptions& options) {
  return max_pool3d_with_indices(x, options).first;
}

template <Backend B, std::size_t D>
requires(D == 4 || D == 5) Tensor<B, D> avg_pool3d(const Tensor<B, D>& x, const ops::Pool3dOptions& options) {
  KILN_CHECK(options.dilation[0] == 1 && options.dilation[1] == 1 && options.dilation[2] == 1,
             "avg_pool3d: average pooling has no dilation, got {}", options.dilation);
  const Tensor<B, 5> x5 = detail::as_ncdhw(x);
  const Shape s = x5.shape(), out = detail::pool3d_output_shape("avg_pool3d", s, options);
  const auto [planar, along_depth] = detail::pool3d_stages(options);
  const Tensor<B, 4> planes = avg_pool2d(x5.reshape({s[0], s[1] * s[2], s[3], s[4]}), planar);
  const Tensor<B, 4> y = avg_pool2d(planes.reshape({s[0], s[1], s[2], out[3] * out[4]}), along_depth);
  return detail::from_ncdhw<B, D, Float>(y.reshape({s[0], s[1], out[2], out[3], out[4]}));
}

// ---- resampling, as torch.nn.functional.interpolate with an explicit output size

// NCHW input to [N, C, output_size[0], output_size[1]]: nearest, bilinear or bicubic (A = -0.75).
template <Backend B>
Tensor<B, 4> interpolate(const Tensor<B, 4>& x, const std::array<std::int64_t, 2>& output_size,
                         const ops::InterpolateOptions& options = {}) {
  KILN_CHECK(output_size[0] > 0 && output_size[1] > 0, "interpolate: output size {} must be positive (input {})",
             output_size, x.shape());
  KILN_CHECK(x.dim(2) > 0 && x.dim(3) > 0, "interpolate: input {} has an empty spatial dim", x.shape());
  KILN_CHECK(!options.align_corners || options.mode != ops::InterpolateMode::nearest,
             "interpolate: align_corners applies to bilinear and bicubic modes only, not nearest");
  return Tensor<B, 4>(provided::interpolate<B>(x.primitive(), output_size, options));
}

// NCL input to [N, C, output_size]: nearest, or linear (InterpolateMode::bilinear).
template <Backend B>
Tensor<B, 3> interpolate(const Tensor<B, 3>& x, std::int64_t output_size, const ops::InterpolateOptions& options = {}) {
  KILN_CHECK(options.mode != ops::InterpolateMode::bicubic, "interpolate: bicubic needs a 4-d NCHW input, got shape {}",
             x.shape());
  KILN_CHECK(output_size > 0, "interpolate: output size {} must be positive (input {})", output_size, x.shape());
  KILN_CHECK(x.dim(2) > 0, "interpolate: input {} has an empty length", x.shape());
  KILN_CHECK(!options.align_corners || options.mode != ops::InterpolateMode::nearest,
             "interpolate: align_corners applies to linear modes only, not nearest");
  const std::array<std::int64_t, 2> size{1, output_size};
  return detail::from_nchw<B, 3>(provided::interpolate<B>(detail::as_nchw(x, 1), size, options), 1);
}

}  // namespace kiln::functional
