// The provided primitives: composites of the required ones (kiln/backend/backend.hpp), each
// with one default implementation written here, from the required primitives only. A
// backend overrides one only for speed, by defining a static member of the same name and
// signature; a concept detects it. Everything above the backends calls them as
//   kiln::provided::index_select<B>(x, dim, index)
// which is B::index_select where B defines it, and kiln::defaults::index_select<B> where it
// does not. The conformance suite runs each default on every backend against the
// override (tests/backend/provided_test.cpp), so the default stays the reference.
#pragma once

#include "kiln/backend/provided_elementwise.hpp"
#include "kiln/backend/strided.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/interpolate.hpp"
#include "kiln/ops/layout.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/nn.hpp"
#include "kiln/ops/reduce.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace kiln {

// The gradients of layer_norm_affine: x's, and the weight's and the bias's where asked for.
template <class P> struct LayerNormGradients {
  P dx;
  std::optional<P> dweight, dbias;
};

namespace defaults {

// A tensor of `shape` filled with `value` (converted as TensorData::convert does), uploaded.
namespace detail {
inline void check_creation_shape(std::string_view op, const Shape& shape) {
  for (const std::int64_t d : shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", op, shape);
}
}  // namespace detail

template <class B>
typename B::Primitive full(const Shape& shape, double value, DType dtype, const typename B::Device& device) {
  detail::check_creation_shape("full", shape);
  std::vector<std::byte> bytes(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  visit_dtype(dtype, [&]<class T>() {
    const T v = from_double<T>(value);
    T* p = reinterpret_cast<T*>(bytes.data());
    for (std::int64_t i = 0; i < shape.numel(); ++i) p[i] = v;
  });
  return B::from_data(TensorData(std::move(bytes), shape, dtype), device);
}

// Element i draws distribution.sample(stream.seed, stream.offset + i), on the host.
template <class B>
typename B::Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                             const typename B::Device& device) {
  detail::check_creation_shape("random", shape);
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = distribution.sample(stream.seed, stream.offset + i);
  return B::from_data(TensorData::from(values, shape).convert(dtype), device);
}

// The reduction of every element: a reduction along the one dim of the flattened tensor.
template <class B> typename B::Primitive reduce_all(const typename B::Primitive& x, ops::ReduceOp op) {
  ops::check_reduce_all_extent(op, B::dtype(x), B::shape(x));
  return B::reduce(B::reshape(x, Shape{B::shape(x).numel()}), op, 0);
}

namespace detail {
// The indices of index_select / index_add, checked (1-d or one index, i64 or i32, each in
// [-size, size)) on the host, as the backends check them, and as an i64 tensor [k] with
// the negative ones counted from the end.
template <class B>
typename B::Primitive checked_indices(std::string_view op, const typename B::Primitive& index, std::int64_t size) {
  ops::check_index_vector(op, B::shape(index));
  ops::check_index_dtype(op, B::dtype(index));
  std::vector<std::int64_t> v = B::into_data(index).template to_vec<std::int64_t>();
  for (std::int64_t& i : v) {
    KILN_CHECK(i >= -size && i < size, "{}: index {} is out of range for a dim of size {}", op, i, size);
    if (i < 0) i += size;
  }
  const auto n = static_cast<std::int64_t>(v.size());
  return B::from_data(TensorData::from(v, Shape{n}), B::device(index));
}
// index [k] as a tensor of `shape` (whose size along dim is k) that holds index[i] at
// position i along dim: what gather and scatter take for index_select and index_add.
template <class B>
typename B::Primitive index_along(const typename B::Primitive& index, std::int64_t dim, const Shape& shape) {
  std::vector<std::int64_t> dims(shape.rank(), 1);
  dims[static_cast<std::size_t>(dim)] = B::shape(index)[0];
  return B::expand(B::reshape(index, Shape(dims)), shape);
}
}  // namespace detail

// The slices of x at `index` along dim: a gather with the index spread over the other dims.
template <class B>
typename B::Primitive index_select(const typename B::Primitive& x, std::int64_t dim, const typename B::Primitive& index) {
  Shape shape = B::shape(x);
  const auto i = detail::checked_indices<B>("index_select", index, shape[static_cast<std::size_t>(dim)]);
  shape[static_cast<std::size_t>(dim)] = B::shape(i)[0];
  return B::gather(x, dim, detail::index_along<B>(i, dim, shape));
}

// out = x; out's slices at index[i] along dim += values' slice i: a scatter-add.
template <class B>
typename B::Primitive index_add(const typename B::Primitive& x, std::int64_t dim, const typename B::Primitive& index,
                                const typename B::Primitive& values) {
  const Shape xs = B::shape(x);
  const auto d = static_cast<std::size_t>(dim);
  const auto i = detail::checked_indices<B>("index_add", index, xs[d]);
  ops::check_index_add_values(xs, B::dtype(x), B::shape(values), B::dtype(values), d, B::shape(i)[0]);
  return B::scatter(x, dim, detail::index_along<B>(i, dim, B::shape(values)), values, ops::ScatterMode::add);
}

// Reversed along each of `dims`: an index_select with the indices n-1 ... 0.
template <class B> typename B::Primitive flip(const typename B::Primitive& x, std::span<const std::int64_t> dims);

// The tensors one after the other along dim: each copied into its range of a new tensor.
template <class B> typename B::Primitive cat(std::span<const typename B::Primitive> xs, std::int64_t dim);

// The gradient of max_pool2d from its indices (flat positions in each H x W plane): dy's
// elements added at those positions of a zero tensor of x's shape, a scatter-add.
template <class B>
typename B::Primitive max_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                          const typename B::Primitive& indices, const ops::Pool2dOptions& o) {
  const Shape xs = B::shape(x), ys = B::shape(dy);
  ops::check_pool_input_float("max_pool2d_backward", xs, B::dtype(x));
  ops::check_pool_gradient("max_pool2d_backward", xs, B::dtype(x), ys, B::dtype(dy),
                           ops::pool2d_output_shape("max_pool2d_backward", xs, o));
  KILN_CHECK(B::shape(indices) == ys && B::dtype(indices) == DType::i64,
             "max_pool2d_backward: indices must be i64 of dy's shape {}, got {} {}", ys, B::shape(indices),
             B::dtype(indices));
  // Checked on the host, as the backends check them: a scatter outside the plane would
  // name the scatter, not the op.
  for (const std::int64_t i : B::into_data(indices).template to_vec<std::int64_t>())
    KILN_CHECK(i >= 0 && i < xs[2] * xs[3], "max_pool2d_backward: an index is outside the {}x{} input plane", xs[2],
               xs[3]);
  const Shape planes{xs[0], xs[1], xs[2] * xs[3]}, flat{ys[0], ys[1], ys[2] * ys[3]};
  const auto zeros = full<B>(planes, 0.0, B::dtype(dy), B::device(dy));
  const auto sum = B::scatter(zeros, 2, B::reshape(indices, flat), B::reshape(dy, flat), ops::ScatterMode::add);
  return B::reshape(sum, xs);
}

// Resampling to output_size (nearest, bilinear, bicubic), separable: along the width, then
// the height, each output position the weighted sum of its K input taps
// (kiln/ops/interpolate.hpp's rules, the ones every backend uses), as index_selects,
// multiplies and adds. The taps are computed in double for f64 tensors and in float
// otherwise, as the CPU backend does; f16 / bf16 tensors compute each step in their own
// dtype here, where the backends round once.
template <class B>
typename B::Primitive interpolate(const typename B::Primitive& x, std::span<const std::int64_t> output_size,
                                  const ops::InterpolateOptions& options);
// Its gradient: the same taps, as index_adds, along the height, then the width.
template <class B>
typename B::Primitive interpolate_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                           const ops::InterpolateOptions& options);

// Average pooling (PyTorch's windows and divisors, kiln/ops/nn.hpp's avg_pool_windows),
// separable: along the width, then the height, each as K masked index_selects (K the
// kernel's extent), a sum and a division by the window's divisor.
template <class B> typename B::Primitive avg_pool2d(const typename B::Primitive& x, const ops::Pool2dOptions& options);
// Its gradient: dy divided by each window's divisor, added back into the window's inputs.
template <class B>
typename B::Primitive avg_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                          const ops::Pool2dOptions& options);

// Adaptive average pooling to output_size: output position o along an axis of size `in`
// averages the inputs [floor(o in / out), ceil((o + 1) in / out)), as in PyTorch; along the
// width, then the height, each as K masked index_selects (K the longest window), a sum and
// a division by the window's length.
template <class B>
typename B::Primitive adaptive_avg_pool2d(const typename B::Primitive& x, std::span<const std::int64_t> output_size);
// Its gradient: dy divided by each window's length, added back into the window.
template <class B>
typename B::Primitive adaptive_avg_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy);

// A linear layer, activation(x @ weightᵀ + bias) for x [..., in], weight [out, in] and
// bias [out] (ops::linear_shape): x's rows folded into one matrix, a matmul by the
// transposed weight (a view), the bias added as a row, the activation, and the rows unfolded.
template <class B>
typename B::Primitive linear(const typename B::Primitive& x, const typename B::Primitive& weight,
                             const std::optional<typename B::Primitive>& bias, ops::LinearActivation activation) {
  const Shape xs = B::shape(x), ws = B::shape(weight);
  const Shape out = ops::linear_shape(xs, B::dtype(x), ws, B::dtype(weight),
                                      bias ? std::optional(B::shape(*bias)) : std::nullopt,
                                      bias ? std::optional(B::dtype(*bias)) : std::nullopt);
  const std::int64_t in = ws[1], width = ws[0];
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < xs.rank(); ++d) rows *= xs[d];
  const std::array<std::int64_t, 2> swap{1, 0};
  typename B::Primitive y = B::matmul(B::reshape(x, Shape({rows, in})), B::permute(weight, swap));
  if (bias) y = provided::binary<B, ops::Add>(y, B::reshape(*bias, Shape({1, width})));
  if (activation == ops::LinearActivation::relu) y = provided::unary<B, ops::Relu>(y);
  return B::reshape(y, out);
}

// Layer norm over the last `dims` dims (biased variance), times weight plus bias (each of
// those dims' shape, either absent): torch.nn.functional.layer_norm. The normalization is
// B's fused layer_norm where it has one (FusedLayerNorm), else mean, variance and rsqrt
// over the rows; the weight and the bias broadcast over the rows.
template <class B>
typename B::Primitive layer_norm_affine(const typename B::Primitive& x,
                                        const std::optional<typename B::Primitive>& weight,
                                        const std::optional<typename B::Primitive>& bias, std::int64_t dims,
                                        double eps);
// Its gradients from dy, the statistics recomputed from x: dx, and the weight's and the
// bias's (the bias's where `bias` is set) as dy · x̂ and dy summed over the rows.
template <class B>
LayerNormGradients<typename B::Primitive> layer_norm_affine_backward(const typename B::Primitive& x,
                                                                     const std::optional<typename B::Primitive>& weight,
                                                                     const typename B::Primitive& dy, std::int64_t dims,
                                                                     double eps, bool bias);

}  // namespace defaults

// Which provided primitives B overrides.
namespace provided::detail {
template <class B>
concept HasFull = requires(const Shape& s, double v, DType d, const typename B::Device& dev) { B::full(s, v, d, dev); };
template <class B>
concept HasRandom = requires(const Shape& s, Distribution dist, RandomStream stream, DType d,
                             const typename B::Device& dev) { B::random(s, dist, stream, d, dev); };
template <class B>
concept HasReduceAll = requires(const typename B::Primitive& p, ops::ReduceOp op) { B::reduce_all(p, op); };
template <class B>
concept HasIndexSelect = requires(const typename B::Primitive& p, std::int64_t dim) { B::index_select(p, dim, p); };
template <class B>
concept HasIndexAdd = requires(const typename B::Primitive& p, std::int64_t dim) { B::index_add(p, dim, p, p); };
template <class B>
concept HasFlip = requires(const typename B::Primitive& p, std::span<const std::int64_t> dims) { B::flip(p, dims); };
template <class B>
concept HasCat = requires(std::span<const typename B::Primitive> xs, std::int64_t dim) { B::cat(xs, dim); };
template <class B>
concept HasMaxPool2dBackward = requires(const typename B::Primitive& p, const ops::Pool2dOptions& o) {
  B::max_pool2d_backward(p, p, p, o);
};
template <class B>
concept HasInterpolate = requires(const typename B::Primitive& p, std::span<const std::int64_t> size,
                                  const ops::InterpolateOptions& o) { B::interpolate(p, size, o); };
template <class B>
concept HasInterpolateBackward = requires(const typename B::Primitive& p, const ops::InterpolateOptions& o) {
  B::interpolate_backward(p, p, o);
};
template <class B>
concept HasAvgPool2d = requires(const typename B::Primitive& p, const ops::Pool2dOptions& o) { B::avg_pool2d(p, o); };
template <class B>
concept HasAvgPool2dBackward = requires(const typename B::Primitive& p, const ops::Pool2dOptions& o) {
  B::avg_pool2d_backward(p, p, o);
};
template <class B>
concept HasAdaptiveAvgPool2d = requires(const typename B::Primitive& p, std::span<const std::int64_t> size) {
  B::adaptive_avg_pool2d(p, size);
};
template <class B>
concept HasLinear = requires(const typename B::Primitive& p, const std::optional<typename B::Primitive>& bias,
                             ops::LinearActivation activation) { B::linear(p, p, bias, activation); };
template <class B>
concept HasLayerNormAffine = requires(const typename B::Primitive& p, const std::optional<typename B::Primitive>& o,
                                      std::int64_t dims, double eps) { B::layer_norm_affine(p, o, o, dims, eps); };
template <class B>
concept HasLayerNormAffineBackward = requires(const typename B::Primitive& p,
                                              const std::optional<typename B::Primitive>& o, std::int64_t dims,
                                              double eps) { B::layer_norm_affine_backward(p, o, p, dims, eps, true); };
// B's fused layer norm without the affine part (kiln/backend/backend.hpp's FusedLayerNorm).
template <class B>
concept HasLayerNorm = requires(const typename B::Primitive& p, std::int64_t dims, double eps) {
  B::layer_norm(p, dims, eps);
  B::layer_norm_backward(p, p, dims, eps);
};
template <class B>
concept HasAdaptiveAvgPool2dBackward = requires(const typename B::Primitive& p) { B::adaptive_avg_pool2d_backward(p, p); };
}  // namespace provided::detail

namespace provided {

template <class B>
typename B::Primitive full(const Shape& shape, double value, DType dtype, const typename B::Device& device) {
  if constexpr (detail::HasFull<B>) return B::full(shape, value, dtype, device);
  else return defaults::full<B>(shape, value, dtype, device);
}
template <class B>
typename B::Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                             const typename B::Device& device) {
  if constexpr (detail::HasRandom<B>) return B::random(shape, distribution, stream, dtype, device);
  else return defaults::random<B>(shape, distribution, stream, dtype, device);
}
// shape [1]
template <class B> typename B::Primitive reduce_all(const typename B::Primitive& x, ops::ReduceOp op) {
  if constexpr (detail::HasReduceAll<B>) return B::reduce_all(x, op);
  else return defaults::reduce_all<B>(x, op);
}
template <class B>
typename B::Primitive index_select(const typename B::Primitive& x, std::int64_t dim, const typename B::Primitive& index) {
  if constexpr (detail::HasIndexSelect<B>) return B::index_select(x, dim, index);
  else return defaults::index_select<B>(x, dim, index);
}
// out = x; out[index[i]] += values[i] along dim
template <class B>
typename B::Primitive index_add(const typename B::Primitive& x, std::int64_t dim, const typename B::Primitive& index,
                                const typename B::Primitive& values) {
  if constexpr (detail::HasIndexAdd<B>) return B::index_add(x, dim, index, values);
  else return defaults::index_add<B>(x, dim, index, values);
}
template <class B> typename B::Primitive flip(const typename B::Primitive& x, std::span<const std::int64_t> dims) {
  if constexpr (detail::HasFlip<B>) return B::flip(x, dims);
  else return defaults::flip<B>(x, dims);
}
template <class B> typename B::Primitive cat(std::span<const typename B::Primitive> xs, std::int64_t dim) {
  if constexpr (detail::HasCat<B>) return B::cat(xs, dim);
  else return defaults::cat<B>(xs, dim);
}
// (x, dy, indices)
template <class B>
typename B::Primitive max_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                          const typename B::Primitive& indices, const ops::Pool2dOptions& options) {
  if constexpr (detail::HasMaxPool2dBackward<B>) return B::max_pool2d_backward(x, dy, indices, options);
  else return defaults::max_pool2d_backward<B>(x, dy, indices, options);
}

// NCHW x to output_size [h, w]
template <class B>
typename B::Primitive interpolate(const typename B::Primitive& x, std::span<const std::int64_t> output_size,
                                  const ops::InterpolateOptions& options) {
  if constexpr (detail::HasInterpolate<B>) return B::interpolate(x, output_size, options);
  else return defaults::interpolate<B>(x, output_size, options);
}
// (x, dy)
template <class B>
typename B::Primitive interpolate_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                           const ops::InterpolateOptions& options) {
  if constexpr (detail::HasInterpolateBackward<B>) return B::interpolate_backward(x, dy, options);
  else return defaults::interpolate_backward<B>(x, dy, options);
}

// NCHW x
template <class B> typename B::Primitive avg_pool2d(const typename B::Primitive& x, const ops::Pool2dOptions& options) {
  if constexpr (detail::HasAvgPool2d<B>) return B::avg_pool2d(x, options);
  else return defaults::avg_pool2d<B>(x, options);
}
// (x, dy)
template <class B>
typename B::Primitive avg_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                          const ops::Pool2dOptions& options) {
  if constexpr (detail::HasAvgPool2dBackward<B>) return B::avg_pool2d_backward(x, dy, options);
  else return defaults::avg_pool2d_backward<B>(x, dy, options);
}

// NCHW x to output_size [h, w]
template <class B>
typename B::Primitive adaptive_avg_pool2d(const typename B::Primitive& x, std::span<const std::int64_t> output_size) {
  if constexpr (detail::HasAdaptiveAvgPool2d<B>) return B::adaptive_avg_pool2d(x, output_size);
  else return defaults::adaptive_avg_pool2d<B>(x, output_size);
}
// (x, dy)
template <class B>
typename B::Primitive adaptive_avg_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy) {
  if constexpr (detail::HasAdaptiveAvgPool2dBackward<B>) return B::adaptive_avg_pool2d_backward(x, dy);
  else return defaults::adaptive_avg_pool2d_backward<B>(x, dy);
}
// activation(x @ weightᵀ + bias): x [..., in], weight [out, in], bias [out]
template <class B>
typename B::Primitive linear(const typename B::Primitive& x, const typename B::Primitive& weight,
                             const std::optional<typename B::Primitive>& bias, ops::LinearActivation activation) {
  if constexpr (detail::HasLinear<B>) return B::linear(x, weight, bias, activation);
  else return defaults::linear<B>(x, weight, bias, activation);
}
// layer norm over the last `dims` dims, times weight plus bias (either absent)
template <class B>
typename B::Primitive layer_norm_affine(const typename B::Primitive& x,
                                        const std::optional<typename B::Primitive>& weight,
                                        const std::optional<typename B::Primitive>& bias, std::int64_t dims,
                                        double eps) {
  if constexpr (detail::HasLayerNormAffine<B>) return B::layer_norm_affine(x, weight, bias, dims, eps);
  else return defaults::layer_norm_affine<B>(x, weight, bias, dims, eps);
}
// (x, weight, dy): {dx, dweight where weight is given, dbias where `bias`}
template <class B>
LayerNormGradients<typename B::Primitive> layer_norm_affine_backward(const typename B::Primitive& x,
                                                                     const std::optional<typename B::Primitive>& weight,
                                                                     const typename B::Primitive& dy, std::int64_t dims,
                                                                     double eps, bool bias) {
  if constexpr (detail::HasLayerNormAffineBackward<B>)
    return B::layer_norm_affine_backward(x, weight, dy, dims, eps, bias);
  else
    return defaults::layer_norm_affine_backward<B>(x, weight, dy, dims, eps, bias);
}

}  // namespace provided

namespace defaults::detail {

// The taps of one axis (in -> out positions) as tensors: for each k < K, the input index of
// every output position, and its weight shaped to broadcast along `axis` of a rank-4 tensor.
template <class B> struct Taps {
  std::vector<typename B::Primitive> index, weight;
};
template <class B>
Taps<B> axis_taps(std::int64_t in, std::int64_t out, std::size_t axis, const ops::InterpolateOptions& options,
                  DType dtype, const typename B::Device& device) {
  Taps<B> taps;
  auto build = [&]<class T, int K>() {
    const ops::AxisTaps<T> t = ops::axis_taps<T, K>(in, out, options.align_corners);
    std::vector<std::int64_t> weight_dims(4, 1);
    weight_dims[axis] = out;
    for (int k = 0; k < K; ++k) {
      std::vector<std::int64_t> index(static_cast<std::size_t>(out));
      std::vector<T> weight(static_cast<std::size_t>(out));
      for (std::int64_t o = 0; o < out; ++o) {
        index[static_cast<std::size_t>(o)] = t.index[static_cast<std::size_t>(o * K + k)];
        weight[static_cast<std::size_t>(o)] = t.weight[static_cast<std::size_t>(o * K + k)];
      }
      taps.index.push_back(B::from_data(TensorData::from(index, Shape{out}), device));
      taps.weight.push_back(
          B::from_data(TensorData::from(weight, Shape(weight_dims)).convert(dtype), device));
    }
  };
  auto with_type = [&]<class T>() {
    switch (options.mode) {
      case ops::InterpolateMode::nearest: build.template operator()<T, 1>(); break;
      case ops::InterpolateMode::bilinear: build.template operator()<T, 2>(); break;
      case ops::InterpolateMode::bicubic: build.template operator()<T, 4>(); break;
    }
  };
  if (dtype == DType::f64) with_type.template operator()<double>();
  else with_type.template operator()<float>();
  return taps;
}

// Pooling windows along one axis of size `in` (kiln/ops/nn.hpp's PoolWindows), as tensors:
// for each tap k below the widest window, the input index of every output position's k-th
// tap (clamped into the input where the tap is not in it) and whether the tap is in the
// window and the input, shaped to broadcast along `axis` of a rank-4 tensor; and each
// window's divisor, shaped alike.
template <class B> struct Windows {
  std::vector<typename B::Primitive> index, present;
  typename B::Primitive divisor;
};
template <class B>
Windows<B> windows(const ops::PoolWindows& pool, std::int64_t in, std::size_t axis, DType dtype,
                   const typename B::Device& device) {
  const std::size_t out = pool.start.size();
  std::vector<std::int64_t> dims(4, 1);
  dims[axis] = static_cast<std::int64_t>(out);
  Windows<B> w;
  std::vector<double> divisor(out);
  for (std::size_t o = 0; o < out; ++o) divisor[o] = static_cast<double>(std::max<std::int64_t>(pool.divisor[o], 1));
  w.divisor = B::from_data(TensorData::from(divisor, Shape(dims)).convert(dtype), device);
  for (std::int64_t k = 0; k < pool.taps; ++k) {
    std::vector<std::int64_t> index(out);
    std::vector<std::uint8_t> present(out);
    for (std::size_t o = 0; o < out; ++o) {
      const std::int64_t i = pool.start[o] + k;
      present[o] = i >= 0 && i < pool.end[o];
      index[o] = std::min(std::max<std::int64_t>(i, 0), std::max<std::int64_t>(in - 1, 0));
    }
    w.index.push_back(B::from_data(TensorData::from(index, Shape{static_cast<std::int64_t>(out)}), device));
    w.present.push_back(B::from_data(TensorData::from(present, Shape(dims)).convert(DType::boolean), device));
  }
  return w;
}

// t pooled along `axis` over the windows: each output the sum of its taps over its divisor.
template <class B>
typename B::Primitive pool_along(const typename B::Primitive& t, std::size_t axis, const ops::PoolWindows& pool) {
  const auto w = windows<B>(pool, B::shape(t)[axis], axis, B::dtype(t), B::device(t));
  const auto zero = provided::full<B>(Shape{1}, 0.0, B::dtype(t), B::device(t));
  typename B::Primitive sum;
  for (std::size_t k = 0; k < w.index.size(); ++k) {
    const auto term = provided::where<B>(
        w.present[k], provided::index_select<B>(t, static_cast<std::int64_t>(axis), w.index[k]), zero);
    sum = k == 0 ? term : provided::binary<B, ops::Add>(sum, term);
  }
  if (w.index.empty()) {  // no taps: every window is empty
    Shape shape = B::shape(t);
    shape[axis] = static_cast<std::int64_t>(pool.start.size());
    return provided::full<B>(shape, 0.0, B::dtype(t), B::device(t));
  }
  return provided::binary<B, ops::Div>(sum, w.divisor);
}
// The transpose of pool_along: d (the gradient at its output) over each window's divisor,
// added into the window's inputs; the result has size `in` along `axis`.
template <class B>
typename B::Primitive pool_along_backward(const typename B::Primitive& d, std::size_t axis, std::int64_t in,
                                          const ops::PoolWindows& pool) {
  const auto w = windows<B>(pool, in, axis, B::dtype(d), B::device(d));
  const auto zero = provided::full<B>(Shape{1}, 0.0, B::dtype(d), B::device(d));
  const auto share = provided::binary<B, ops::Div>(d, w.divisor);
  Shape shape = B::shape(d);
  shape[axis] = in;
  typename B::Primitive sum = provided::full<B>(shape, 0.0, B::dtype(d), B::device(d));
  for (std::size_t k = 0; k < w.index.size(); ++k)
    sum = provided::index_add<B>(sum, static_cast<std::int64_t>(axis), w.index[k],
                                 provided::where<B>(w.present[k], share, zero));
  return sum;
}

}  // namespace defaults::detail

template <class B>
typename B::Primitive defaults::avg_pool2d(const typename B::Primitive& x, const ops::Pool2dOptions& o) {
  const Shape xs = B::shape(x);
  ops::check_pool_input_float("avg_pool2d", xs, B::dtype(x));
  ops::check_no_dilation("avg_pool2d", o);
  const Shape ys = ops::pool2d_output_shape("avg_pool2d", xs, o);
  const auto width = detail::pool_along<B>(x, 3, ops::avg_pool_windows(xs[3], ys[3], o, 1));
  return detail::pool_along<B>(width, 2, ops::avg_pool_windows(xs[2], ys[2], o, 0));
}

template <class B>
typename B::Primitive defaults::avg_pool2d_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                                    const ops::Pool2dOptions& o) {
  const Shape xs = B::shape(x), ys = B::shape(dy);
  ops::check_pool_input_float("avg_pool2d_backward", xs, B::dtype(x));
  ops::check_no_dilation("avg_pool2d_backward", o);
  ops::check_pool_gradient("avg_pool2d_backward", xs, B::dtype(x), ys, B::dtype(dy),
                           ops::pool2d_output_shape("avg_pool2d_backward", xs, o));
  const auto height = detail::pool_along_backward<B>(dy, 2, xs[2], ops::avg_pool_windows(xs[2], ys[2], o, 0));
  return detail::pool_along_backward<B>(height, 3, xs[3], ops::avg_pool_windows(xs[3], ys[3], o, 1));
}

template <class B>
typename B::Primitive defaults::adaptive_avg_pool2d(const typename B::Primitive& x,
                                                    std::span<const std::int64_t> output_size) {
  const Shape xs = B::shape(x);
  ops::check_pool_input_float("adaptive_avg_pool2d", xs, B::dtype(x));
  ops::adaptive_output_shape("adaptive_avg_pool2d", xs, output_size);
  const auto width = detail::pool_along<B>(x, 3, ops::adaptive_pool_windows(xs[3], output_size[1]));
  return detail::pool_along<B>(width, 2, ops::adaptive_pool_windows(xs[2], output_size[0]));
}

template <class B>
typename B::Primitive defaults::adaptive_avg_pool2d_backward(const typename B::Primitive& x,
                                                             const typename B::Primitive& dy) {
  const Shape xs = B::shape(x), ys = B::shape(dy);
  ops::check_pool_input_float("adaptive_avg_pool2d_backward", xs, B::dtype(x));
  KILN_CHECK(ys.rank() == 4, "adaptive_avg_pool2d_backward: dy must be NCHW, got shape {}", ys);
  const std::array<std::int64_t, 2> size{ys[2], ys[3]};
  ops::check_pool_gradient("adaptive_avg_pool2d_backward", xs, B::dtype(x), ys, B::dtype(dy),
                           ops::adaptive_output_shape("adaptive_avg_pool2d_backward", xs, size));
  const auto height = detail::pool_along_backward<B>(dy, 2, xs[2], ops::adaptive_pool_windows(xs[2], ys[2]));
  return detail::pool_along_backward<B>(height, 3, xs[3], ops::adaptive_pool_windows(xs[3], ys[3]));
}

template <class B>
typename B::Primitive defaults::interpolate(const typename B::Primitive& x, std::span<const std::int64_t> output_size,
                                            const ops::InterpolateOptions& options) {
  const Shape xs = B::shape(x);
  ops::check_interpolate(xs, B::dtype(x), output_size);
  auto along = [&](const typename B::Primitive& t, std::size_t axis, std::int64_t out) {
    const auto taps = detail::axis_taps<B>(xs[axis], out, axis, options, B::dtype(x), B::device(x));
    typename B::Primitive sum = t;
    for (std::size_t k = 0; k < taps.index.size(); ++k) {
      const auto term = provided::binary<B, ops::Mul>(
          provided::index_select<B>(t, static_cast<std::int64_t>(axis), taps.index[k]), taps.weight[k]);
      sum = k == 0 ? term : provided::binary<B, ops::Add>(sum, term);
    }
    return sum;
  };
  return along(along(x, 3, output_size[1]), 2, output_size[0]);
}

template <class B>
typename B::Primitive defaults::interpolate_backward(const typename B::Primitive& x, const typename B::Primitive& dy,
                                                     const ops::InterpolateOptions& options) {
  const Shape xs = B::shape(x), ys = B::shape(dy);
  ops::check_interpolate_backward(xs, B::dtype(x), ys, B::dtype(dy));
  // d: the gradient at the output of the step along `axis`, of size `out` there; the result
  // has the input's size `in` along it.
  auto along = [&](const typename B::Primitive& d, std::size_t axis, std::int64_t in, std::int64_t out) {
    const auto taps = detail::axis_taps<B>(in, out, axis, options, B::dtype(dy), B::device(dy));
    Shape shape = B::shape(d);
    shape[axis] = in;
    typename B::Primitive sum = provided::full<B>(shape, 0.0, B::dtype(dy), B::device(dy));
    for (std::size_t k = 0; k < taps.index.size(); ++k)
      sum = provided::index_add<B>(sum, static_cast<std::int64_t>(axis), taps.index[k],
                                   provided::binary<B, ops::Mul>(d, taps.weight[k]));
    return sum;
  };
  return along(along(dy, 2, xs[2], ys[2]), 3, xs[3], ys[3]);
}

template <class B> typename B::Primitive defaults::flip(const typename B::Primitive& x, std::span<const std::int64_t> dims) {
  typename B::Primitive out = x;
  for (const std::int64_t d : dims) {
    const std::int64_t n = B::shape(x)[static_cast<std::size_t>(d)];
    std::vector<std::int64_t> reversed(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) reversed[static_cast<std::size_t>(i)] = n - 1 - i;
    out = provided::index_select<B>(out, d, B::from_data(TensorData::from(reversed, Shape{n}), B::device(x)));
  }
  return out;
}

template <class B> typename B::Primitive defaults::cat(std::span<const typename B::Primitive> xs, std::int64_t dim) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const auto& x : xs) {
    shapes.push_back(B::shape(x));
    dtypes.push_back(B::dtype(x));
  }
  const Shape shape = strided::cat_shape(shapes, dtypes, dim);
  const auto d = static_cast<std::size_t>(dim);
  typename B::Primitive out = provided::full<B>(shape, 0.0, B::dtype(xs[0]), B::device(xs[0]));
  std::vector<ops::SliceRange> ranges;
  for (std::size_t i = 0; i < shape.rank(); ++i) ranges.push_back({0, shape[i], 1});
  std::int64_t start = 0;
  for (const auto& x : xs) {
    const std::int64_t n = B::shape(x)[d];
    ranges[d] = {start, n, 1};
    if (n > 0) out = B::slice_assign(out, ranges, x);
    start += n;
  }
  return out;
}

namespace defaults {

namespace detail {
// x's rows [rows, n] normalized: (x - mean) · rsqrt(var + eps), and that rsqrt [rows, 1].
template <class B>
std::pair<typename B::Primitive, typename B::Primitive> normalized_rows(const typename B::Primitive& x,
                                                                         ops::NormRows r, double eps) {
  const typename B::Primitive x2 = B::reshape(x, Shape({r.rows, r.n}));
  const typename B::Primitive centered = provided::binary<B, ops::Sub>(x2, B::reduce(x2, ops::ReduceOp::mean, 1));
  const typename B::Primitive var =
      B::reduce(provided::binary<B, ops::Mul>(centered, centered), ops::ReduceOp::mean, 1);
  const typename B::Primitive rstd = provided::unary<B, ops::Rsqrt>(provided::binary_scalar<B, ops::Add>(var, eps));
  return {provided::binary<B, ops::Mul>(centered, rstd), rstd};
}
}  // namespace detail

template <class B>
typename B::Primitive layer_norm_affine(const typename B::Primitive& x,
                                        const std::optional<typename B::Primitive>& weight,
                                        const std::optional<typename B::Primitive>& bias, std::int64_t dims,
                                        double eps) {
  const Shape xs = B::shape(x);
  const ops::NormRows r =
      ops::layer_norm_rows(xs, B::dtype(x), dims, weight ? std::optional(B::shape(*weight)) : std::nullopt,
                           bias ? std::optional(B::shape(*bias)) : std::nullopt);
  typename B::Primitive y = x;
  if constexpr (provided::detail::HasLayerNorm<B>) y = B::layer_norm(x, dims, eps);
  else y = B::reshape(detail::normalized_rows<B>(x, r, eps).first, xs);
  const Shape row({1, r.n});
  if (weight) y = provided::binary<B, ops::Mul>(B::reshape(y, Shape({r.rows, r.n})), B::reshape(*weight, row));
  if (bias) y = provided::binary<B, ops::Add>(B::reshape(y, Shape({r.rows, r.n})), B::reshape(*bias, row));
  return B::reshape(y, xs);
}

// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)) with g = dy · weight, each mean over a row.
template <class B>
LayerNormGradients<typename B::Primitive> layer_norm_affine_backward(const typename B::Primitive& x,
                                                                     const std::optional<typename B::Primitive>& weight,
                                                                     const typename B::Primitive& dy, std::int64_t dims,
                                                                     double eps, bool bias) {
  using P = typename B::Primitive;
  const Shape xs = B::shape(x);
  const ops::NormRows r = ops::layer_norm_rows(
      xs, B::dtype(x), dims, weight ? std::optional(B::shape(*weight)) : std::nullopt, std::nullopt);
  KILN_CHECK(B::shape(dy) == xs && B::dtype(dy) == B::dtype(x), "layer_norm_backward: dy {} {} must match x {} {}",
             B::shape(dy), B::dtype(dy), xs, B::dtype(x));
  const Shape rows({r.rows, r.n}), row({1, r.n});
  const P dy2 = B::reshape(dy, rows);
  const P g = weight ? provided::binary<B, ops::Mul>(dy2, B::reshape(*weight, row)) : dy2;
  std::optional<P> xhat;
  LayerNormGradients<P> out{x, std::nullopt, std::nullopt};
  if constexpr (provided::detail::HasLayerNorm<B>) {
    out.dx = B::layer_norm_backward(x, B::reshape(g, xs), dims, eps);
    if (weight) xhat = B::reshape(B::layer_norm(x, dims, eps), rows);
  } else {
    const auto [normalized, rstd] = detail::normalized_rows<B>(x, r, eps);
    xhat = normalized;
    const P g_mean = B::reduce(g, ops::ReduceOp::mean, 1);
    const P dot_mean = B::reduce(provided::binary<B, ops::Mul>(g, normalized), ops::ReduceOp::mean, 1);
    const P inner = provided::binary<B, ops::Sub>(provided::binary<B, ops::Sub>(g, g_mean),
                                                  provided::binary<B, ops::Mul>(normalized, dot_mean));
    out.dx = B::reshape(provided::binary<B, ops::Mul>(inner, rstd), xs);
  }
  if (weight) {
    const P dw = B::reduce(provided::binary<B, ops::Mul>(dy2, *xhat), ops::ReduceOp::sum, 0);
    out.dweight = B::reshape(dw, B::shape(*weight));
  }
  if (bias) {
    const std::vector<std::int64_t> all = xs.to_vector();
    out.dbias = B::reshape(B::reduce(dy2, ops::ReduceOp::sum, 0), Shape(std::vector(all.end() - dims, all.end())));
  }
  return out;
}

}  // namespace defaults

}  // namespace kiln
