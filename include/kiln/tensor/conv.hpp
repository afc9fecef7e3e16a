// Convolution on tensors (kiln::functional): conv1d/conv2d/conv3d over NCL/NCHW/NCDHW inputs
// and their transposes. Shapes are checked here, naming the op; the 1-d ops run as the 2-d
// primitives with a height of 1, the 3-d ones are composed from 2-d convolutions (so they
// differentiate and run on every backend), and a transposed convolution is the input
// gradient of the convolution with the same weight.
#pragma once

#include "kiln/ops/nn.hpp"
#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::functional {

namespace detail {

template <class B> std::optional<std::pair<Shape, DType>> bias_info(const std::optional<Tensor<B, 1>>& bias) {
  if (!bias) return std::nullopt;
  return std::pair{bias->shape(), bias->dtype()};
}

template <class B> std::optional<typename B::Primitive> bias_primitive(const std::optional<Tensor<B, 1>>& bias) {
  if (!bias) return std::nullopt;
  return bias->primitive();
}

// Inserts a height of 1 before the last dim: [N, C, L] -> [N, C, 1, L].
template <class B> typename B::Primitive with_unit_height(const typename B::Primitive& p) {
  std::vector<std::int64_t> dims = B::shape(p).to_vector();
  dims.insert(dims.end() - 1, 1);
  return B::reshape(p, Shape(std::move(dims)));
}

template <class B> typename B::Primitive without_height(const typename B::Primitive& p) {
  std::vector<std::int64_t> dims = B::shape(p).to_vector();
  dims.erase(dims.end() - 2);
  return B::reshape(p, Shape(std::move(dims)));
}

// out + bias over the channel dim (dim 1) of an NCHW primitive.
template <class B>
typename B::Primitive add_channel_bias(const typename B::Primitive& out,
                                       const std::optional<typename B::Primitive>& bias) {
  if (!bias) return out;
  const std::int64_t channels = B::shape(*bias)[0];
  return provided::binary<B, ops::Add>(out, B::reshape(*bias, Shape{1, channels, 1, 1}));
}

// Transposed convolution of NCHW `x` into `out_shape` (validated), as the input gradient of
// the convolution that maps `out_shape` to x's shape.
template <class B>
typename B::Primitive conv_transpose_nchw(const typename B::Primitive& x, const typename B::Primitive& w,
                                          const Shape& out_shape, const ops::ConvTranspose2dOptions& o) {
  const ops::Conv2dOptions conv = o.as_conv2d();
  if (o.output_padding[0] < o.stride[0] && o.output_padding[1] < o.stride[1])
    return B::conv2d_backward_input(x, w, out_shape, conv);
  // An output_padding of at least the stride (allowed when the dilation is larger) adds
  // output rows the convolution rule cannot map back to x's shape. Compute the whole
  // unpadded output instead: output position t is its position t + padding, and positions
  // past its end receive nothing.
  const Shape x_shape = B::shape(x), w_shape = B::shape(w);
  ops::Conv2dOptions unpadded = conv;
  unpadded.padding = {0, 0};
  std::vector<std::int64_t> full_dims{out_shape[0], out_shape[1]};
  std::array<ops::SliceRange, 4> from{}, to{};
  from[0] = to[0] = {0, out_shape[0], 1};
  from[1] = to[1] = {0, out_shape[1], 1};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t extent = (x_shape[2 + i] - 1) * o.stride[i] + o.dilation[i] * (w_shape[2 + i] - 1) + 1;
    full_dims.push_back(extent);
    const std::int64_t length = std::min(extent - o.padding[i], out_shape[2 + i]);
    from[2 + i] = {o.padding[i], std::max<std::int64_t>(length, 0), 1};
    to[2 + i] = {0, std::max<std::int64_t>(length, 0), 1};
  }
  const auto full = B::conv2d_backward_input(x, w, Shape(std::move(full_dims)), unpadded);
  const auto zeros = provided::full<B>(out_shape, 0.0, B::dtype(x), B::device(x));
  if (from[2].size == 0 || from[3].size == 0) return zeros;
  return B::slice_assign(zeros, to, B::slice(full, from));
}

}  // namespace detail

// ---- convolution: x [N, C, H, W] * weight [O, C/groups, kh, kw] (+ bias [O]) -> [N, O, H', W']

template <Backend B>
Tensor<B, 4> conv2d(const Tensor<B, 4>& x, const Tensor<B, 4>& weight,
                    const std::optional<Tensor<B, 1>>& bias = std::nullopt, const ops::Conv2dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  ops::conv_output_shape("conv2d", xs, ws, options.stride, options.padding, options.dilation, options.groups);
  ops::check_conv_dtypes("conv2d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), ws[0]);
  return Tensor<B, 4>(B::conv2d(x.primitive(), weight.primitive(), detail::bias_primitive(bias), options));
}

// x [N, C, L] * weight [O, C/groups, k] (+ bias [O]) -> [N, O, L']
template <Backend B>
Tensor<B, 3> conv1d(const Tensor<B, 3>& x, const Tensor<B, 3>& weight,
                    const std::optional<Tensor<B, 1>>& bias = std::nullopt, const ops::Conv1dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  const std::array<std::int64_t, 1> stride{options.stride}, padding{options.padding}, dilation{options.dilation};
  ops::conv_output_shape("conv1d", xs, ws, stride, padding, dilation, options.groups);
  ops::check_conv_dtypes("conv1d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), ws[0]);
  const auto out = B::conv2d(detail::with_unit_height<B>(x.primitive()),
                             detail::with_unit_height<B>(weight.primitive()), detail::bias_primitive(bias),
                             options.as_2d());
  return Tensor<B, 3>(detail::without_height<B>(out));
}

// ---- transposed convolution: x [N, C_in, H, W] * weight [C_in, C_out/groups, kh, kw] (+ bias [C_out])
// -> [N, C_out, (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1, ...]

template <Backend B>
Tensor<B, 4> conv_transpose2d(const Tensor<B, 4>& x, const Tensor<B, 4>& weight,
                              const std::optional<Tensor<B, 1>>& bias = std::nullopt,
                              const ops::ConvTranspose2dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  const Shape out = ops::conv_transpose_output_shape("conv_transpose2d", xs, ws, options.stride, options.padding,
                                                     options.output_padding, options.dilation, options.groups);
  ops::check_conv_dtypes("conv_transpose2d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), out[1]);
  const auto y = detail::conv_transpose_nchw<B>(x.primitive(), weight.primitive(), out, options);
  return Tensor<B, 4>(detail::add_channel_bias<B>(y, detail::bias_primitive(bias)));
}

// x [N, C_in, L] * weight [C_in, C_out/groups, k] (+ bias [C_out]) -> [N, C_out, L']
template <Backend B>
Tensor<B, 3> conv_transpose1d(const Tensor<B, 3>& x, const Tensor<B, 3>& weight,
                              const std::optional<Tensor<B, 1>>& bias = std::nullopt,
                              const ops::ConvTranspose1dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  const std::array<std::int64_t, 1> stride{options.stride}, padding{options.padding},
      output_padding{options.output_padding}, dilation{options.dilation};
  const Shape out = ops::conv_transpose_output_shape("conv_transpose1d", xs, ws, stride, padding, output_padding,
                                                     dilation, options.groups);
  ops::check_conv_dtypes("conv_transpose1d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), out[1]);
  const Shape out_2d{out[0], out[1], 1, out[2]};
  const auto y = detail::conv_transpose_nchw<B>(detail::with_unit_height<B>(x.primitive()),
                                                detail::with_unit_height<B>(weight.primitive()), out_2d,
                                                options.as_2d());
  return Tensor<B, 3>(detail::without_height<B>(detail::add_channel_bias<B>(y, detail::bias_primitive(bias))));
}

// ---- 3-d convolution: x [N, C, D, H, W] * weight [O, C/groups, kd, kh, kw] (+ bias [O]) -> [N, O, D', H', W']
// One 2-d convolution over the (H, W) planes of every output depth: for each output depth the
// kd input planes its taps read are stacked as channels ([N*D', C*kd, H, W], channel c*kd + tap),
// which is the weight's own layout read as [O, C/groups*kd, kh, kw].

template <Backend B>
Tensor<B, 5> conv3d(const Tensor<B, 5>& x, const Tensor<B, 5>& weight,
                    const std::optional<Tensor<B, 1>>& bias = std::nullopt, const ops::Conv3dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  const Shape out = ops::conv_output_shape("conv3d", xs, ws, options.stride, options.padding, options.dilation,
                                          options.groups);
  ops::check_conv_dtypes("conv3d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), ws[0]);
  const std::int64_t batch = xs[0], channels = xs[1], taps = ws[2], depth = out[2];
  const std::int64_t pad = options.padding[0], stride = options.stride[0], dilation = options.dilation[0];
  // [N, D + 2 * pad, C, H, W]: the depth zero-padded and moved before the channels.
  Tensor<B, 5> planes = x.permute({0, 2, 1, 3, 4});
  if (pad > 0) planes = planes.pad({0, 0, 0, 0, 0, 0, pad, pad});
  std::vector<Tensor<B, 4>> per_tap;
  for (std::int64_t k = 0; k < taps; ++k) {
    const std::int64_t first = k * dilation;
    per_tap.push_back(planes.slice({Slice(), Slice(first, first + (depth - 1) * stride + 1, stride)})
                          .reshape({batch * depth, channels, xs[3], xs[4]}));
  }
  const Tensor<B, 4> stacked = taps == 1 ? per_tap[0]
                                         : stack(per_tap, 2).reshape({batch * depth, channels * taps, xs[3], xs[4]});
  const ops::Conv2dOptions planar{{options.stride[1], options.stride[2]},
                                  {options.padding[1], options.padding[2]},
                                  {options.dilation[1], options.dilation[2]},
                                  options.groups};
  const Tensor<B, 4> y = conv2d(stacked, weight.reshape({ws[0], ws[1] * taps, ws[3], ws[4]}), bias, planar);
  return y.reshape({batch, depth, ws[0], out[3], out[4]}).permute({0, 2, 1, 3, 4});
}

// ---- 3-d transposed convolution: x [N, C_in, D, H, W] * weight [C_in, C_out/groups, kd, kh, kw] (+ bias [C_out])
// -> [N, C_out, (D - 1) * stride - 2 * padding + dilation * (kd - 1) + output_padding + 1, ...]
// A 2-d transposed convolution of the (H, W) planes of every input depth at once, the depth taps
// as extra output channels (the weight read as [C_in, C_out/groups*kd, kh, kw]), then the taps
// added into their output depths (index_add).

template <Backend B>
Tensor<B, 5> conv_transpose3d(const Tensor<B, 5>& x, const Tensor<B, 5>& weight,
                              const std::optional<Tensor<B, 1>>& bias = std::nullopt,
                              const ops::ConvTranspose3dOptions& options = {}) {
  const Shape xs = x.shape(), ws = weight.shape();
  const Shape out = ops::conv_transpose_output_shape("conv_transpose3d", xs, ws, options.stride, options.padding,
                                                     options.output_padding, options.dilation, options.groups);
  ops::check_conv_dtypes("conv_transpose3d", xs, x.dtype(), ws, weight.dtype(), detail::bias_info(bias), out[1]);
  const std::int64_t batch = xs[0], depth = xs[2], channels = out[1], taps = ws[2];
  const ops::ConvTranspose2dOptions planar{{options.stride[1], options.stride[2]},
                                           {options.padding[1], options.padding[2]},
                                           {options.output_padding[1], options.output_padding[2]},
                                           {options.dilation[1], options.dilation[2]},
                                           options.groups};
  // [N*D, C_out*kd, H', W'], channel o*kd + tap.
  const Tensor<B, 4> y_planes =
      conv_transpose2d<B>(x.permute({0, 2, 1, 3, 4}).reshape({batch * depth, xs[1], xs[3], xs[4]}),
                       weight.reshape({ws[0], ws[1] * taps, ws[3], ws[4]}), std::nullopt, planar);
  // The taps summed along the depth: tap k of input depth d lands on d * stride + k * dilation
  // of the unpadded output, whose first `padding` positions are then cut (positions past every
  // tap, which output_padding can add, stay zero).
  const std::int64_t plane = out[3] * out[4], pad = options.padding[0];
  const Tensor<B, 3> per_tap = y_planes.reshape({batch, depth, channels, taps, plane})
                                   .permute({0, 2, 3, 1, 4})
                                   .reshape({batch * channels, taps * depth, plane});
  std::vector<std::int64_t> at;
  for (std::int64_t k = 0; k < taps; ++k)
    for (std::int64_t d = 0; d < depth; ++d) at.push_back(d * options.stride[0] + k * options.dilation[0]);
  const std::int64_t unpadded = (depth - 1) * options.stride[0] + options.dilation[0] * (taps - 1) + 1;
  const auto index = Tensor<B, 1, Int>::from_data(TensorData::from(at, Shape{taps * depth}), x.device());
  const Tensor<B, 3> summed = Tensor<B, 3>::zeros({batch * channels, std::max(unpadded, pad + out[2]), plane},
                                                  x.device(), x.dtype())
                                  .index_add(1, index, per_tap);
  Tensor<B, 5> y =
      summed.slice({Slice(), Slice(pad, pad + out[2])}).reshape({batch, channels, out[2], out[3], out[4]});
  if (bias) y = y.add(bias->reshape({1, channels, 1, 1, 1}));
  return y;
}

}  // namespace kiln::functional
