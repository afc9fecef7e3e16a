// 2-d convolution and max pooling on the CUDA and ROCm backends (NCHW, weight [out, in/groups, kh, kw]),
// f32 and f64; f16 and bf16 compute in f32 and round once at the end. The CPU backend's
// checks, error messages and semantics.
//
// GEMM convolution: im2col (kernels/cuda/conv.cu) writes the column matrix of x, entry
// (n, g, k, p) with k over the group's input channels and taps and p over the output
// positions, and cuBLAS (Gpu::matmul) does the arithmetic, with the groups (and samples)
// as batch dims:
// - forward: columns [N, G, K, OH*OW]; y[n, g] = w[g] [O/G, K] @ columns[n, g], which is
//   already NCHW; then add_bias adds the bias;
// - weight gradient: columns [G, K, N*OH*OW]; dw[g] = dy[g] [O/G, N*OH*OW] @ columns[g]^T
//   (dy copied channels first, [O, N, OH, OW], so that the sum runs over one dim);
// - input gradient: columns[n, g] = w[g]^T @ dy[n, g], then col2im sums, per input element,
//   the column entries that read it, in a fixed order (no atomics).
// The column matrix holds C*KH*KW*OH*OW elements per sample: batches whose columns would
// pass kColumnBytes (KILN_CUDA_CONV_COLUMN_BYTES overrides it) go in chunks of samples.
//
// Max pooling runs one thread per output (conv.cu's max_pool2d): padding never wins, ties
// keep the first tap, NaN wins; the i64 index is ih * W + iw within the input plane.
#include "runtime.hpp"

#include "backend/conv_columns.hpp"

#include "kiln/backend/strided.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::KILN_GPU_NAMESPACE {
namespace {


using columns::check_float;

void check_devices(std::string_view op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device == b.device, "{}: operands on " KILN_GPU_NAME " devices {} and {}", op, a.device, b.device);
}

using columns::kColumnBytes;

// The convolution's sizes (src/backend/conv_columns.hpp), chunked by this backend's limit.
struct Geometry : columns::Geometry {
  using columns::Geometry::Geometry;
  std::int64_t chunk(DType dtype) const { return columns::Geometry::chunk(dtype, kColumnBytes, "KILN_CUDA_CONV_COLUMN_BYTES"); }
};

// The samples [first, first + count) of an NCHW tensor, a view.
Tensor samples(const Tensor& t, std::int64_t first, std::int64_t count) {
  Tensor v = t;
  v.shape[0] = count;
  if (count > 0) v.offset += first * t.strides[0];
  return v;
}

// The contiguous tensor t viewed with `shape` (as many elements).
Tensor view(const Tensor& t, const Shape& shape) {
  KILN_CHECK(t.is_contiguous() && t.numel() == shape.numel(), KILN_GPU_ID " conv: cannot view {} as {}", t.shape, shape);
  Tensor v = t;
  v.shape = shape;
  v.strides = shape.contiguous_strides();
  return v;
}

// The conv.cu entry `name` for dtype (f32 or f64).
const Kernel& kernel_for(int device, std::string_view name, DType dtype) {
  std::string entry(name);
  entry += '_';
  entry += dtype_name(dtype);
  return file_kernel(device, "conv", {}, entry);
}

// Runs im2col (`to_columns`) or col2im over `threads`: `x` is the NCHW tensor of the chunk
// (read by im2col, written by col2im, through its strides), `cols` the column matrix, with
// its strides per sample, group and row. conv.cu's KILN_COLUMN_PARAMS, in order.
void run_columns(bool to_columns, const Geometry& g, std::int64_t threads, const Tensor& x, const Tensor& cols,
                 std::int64_t sample_stride, std::int64_t group_stride, std::int64_t row_stride) {
  const Kernel& kernel = kernel_for(x.device, to_columns ? "im2col" : "col2im", cols.dtype);
  void* written = to_columns ? address(cols) : address(x);
  void* read = to_columns ? address(x) : address(cols);
  const ops::Conv2dOptions& o = g.options;
  launch_threads(x.device, kernel, threads, written, read, threads, g.C, g.H, g.W, g.KH, g.KW, g.OH, g.OW,
                 g.C / g.G, o.stride[0], o.stride[1], o.padding[0], o.padding[1], o.dilation[0], o.dilation[1],
                 sample_stride, group_stride, row_stride, x.strides[0], x.strides[1], x.strides[2], x.strides[3]);
}

// The column matrix of `x` (a chunk of samples) as [G, K, samples * P] when `by_group`
// (for the weight gradient), else [samples, G, K, P].
Tensor im2col(const Geometry& g, const Tensor& x, bool by_group) {
  const std::int64_t n = x.shape[0];
  if (by_group) {
    Tensor cols = empty(Shape{g.G, g.K, n * g.P}, x.dtype, x.device);
    run_columns(true, g, cols.numel(), x, cols, g.P, g.K * n * g.P, n * g.P);
    return cols;
  }
  Tensor cols = empty(Shape{n, g.G, g.K, g.P}, x.dtype, x.device);
  run_columns(true, g, cols.numel(), x, cols, g.G * g.K * g.P, g.K * g.P, g.P);
  return cols;
}

// The weight [O, C/G, KH, KW] as [1, G, O/G, K].
Tensor grouped_weight(const Geometry& g, const Tensor& weight) {
  return view(contiguous(weight), Shape{1, g.G, g.O / g.G, g.K});
}

}  // namespace
}  // namespace kiln::KILN_GPU_NAMESPACE

namespace kiln {

using gpu::Tensor;

Gpu::Primitive Gpu::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                             const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d";
  gpu::check_float(op, x.dtype, weight.dtype, x.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  if (bias) {
    KILN_CHECK(bias->shape == Shape{weight.shape[0]}, "conv2d: bias must have shape [{}] for weight {}, got {}",
               weight.shape[0], weight.shape, bias->shape);
    KILN_CHECK(bias->dtype == x.dtype, "conv2d: bias dtype {} differs from input dtype {}", bias->dtype, x.dtype);
  }
  if (gpu::is_half(x.dtype)) {
    const std::optional<Primitive> bias32 = bias ? std::optional(gpu::cast(*bias, DType::f32)) : std::nullopt;
    return gpu::cast(conv2d(gpu::cast(x, DType::f32), gpu::cast(weight, DType::f32), bias32, options), x.dtype);
  }
  if (y_shape.numel() == 0) return gpu::empty(y_shape, x.dtype, x.device);
  gpu::check_devices(op, x, weight);
  if (bias) gpu::check_devices(op, x, *bias);
  const gpu::Geometry g(x.shape, weight.shape, y_shape, options);
  Tensor out;
  if (g.K == 0) {
    out = gpu::zeros(y_shape, x.dtype, x.device);  // no input channels: every sum is empty
  } else {
    const Tensor w = gpu::grouped_weight(g, weight);
    const std::int64_t chunk = g.chunk(x.dtype);
    if (chunk < g.N) out = gpu::empty(y_shape, x.dtype, x.device);
    for (std::int64_t first = 0; first < g.N; first += chunk) {
      const std::int64_t n = std::min(chunk, g.N - first);
      // [1, G, O/G, K] @ [n, G, K, P] = [n, G, O/G, P], the chunk of y in NCHW.
      const Tensor y = matmul(w, gpu::im2col(g, gpu::samples(x, first, n), false));
      const Tensor part = gpu::view(gpu::contiguous(y), Shape{n, g.O, g.OH, g.OW});
      if (chunk >= g.N) out = part;
      else gpu::copy_into(part, gpu::samples(out, first, n));
    }
  }
  if (bias) {
    const std::int64_t n = out.numel();
    gpu::launch_threads(x.device, gpu::kernel_for(x.device, "add_bias", x.dtype), n, gpu::address(out),
                         gpu::address(*bias), n, g.O, g.P, bias->strides[0]);
  }
  return out;
}

Gpu::Primitive Gpu::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                            const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_input";
  gpu::check_float(op, dy.dtype, weight.dtype, dy.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x_shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_input: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x_shape, weight.shape, y_shape);
  if (gpu::is_half(dy.dtype))
    return gpu::cast(
        conv2d_backward_input(gpu::cast(dy, DType::f32), gpu::cast(weight, DType::f32), x_shape, options),
        dy.dtype);
  if (x_shape.numel() == 0) return gpu::empty(x_shape, dy.dtype, dy.device);
  if (y_shape.numel() == 0) return gpu::zeros(x_shape, dy.dtype, dy.device);
  gpu::check_devices(op, dy, weight);
  Tensor dx = gpu::empty(x_shape, dy.dtype, dy.device);
  const gpu::Geometry g(x_shape, weight.shape, y_shape, options);
  // [1, G, K, O/G]: the weight transposed per group, a view.
  const std::array<std::int64_t, 4> transpose{0, 1, 3, 2};
  const Tensor wt = strided::permute(gpu::grouped_weight(g, weight), transpose);
  const std::int64_t chunk = g.chunk(dy.dtype);
  for (std::int64_t first = 0; first < g.N; first += chunk) {
    const std::int64_t n = std::min(chunk, g.N - first);
    const Tensor dys = gpu::view(gpu::contiguous(gpu::samples(dy, first, n)), Shape{n, g.G, g.O / g.G, g.P});
    // [1, G, K, O/G] @ [n, G, O/G, P] = [n, G, K, P], summed into the chunk of dx.
    const Tensor cols = gpu::contiguous(matmul(wt, dys));
    gpu::run_columns(false, g, n * g.C * g.H * g.W, gpu::samples(dx, first, n), cols, g.G * g.K * g.P,
                      g.K * g.P, g.P);
  }
  return dx;
}

Gpu::Primitive Gpu::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                             const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_weight";
  gpu::check_float(op, x.dtype, dy.dtype, x.shape, dy.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight_shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_weight: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x.shape, weight_shape, y_shape);
  if (gpu::is_half(x.dtype))
    return gpu::cast(
        conv2d_backward_weight(gpu::cast(x, DType::f32), gpu::cast(dy, DType::f32), weight_shape, options),
        x.dtype);
  if (weight_shape.numel() == 0) return gpu::empty(weight_shape, x.dtype, x.device);
  if (y_shape.numel() == 0) return gpu::zeros(weight_shape, x.dtype, x.device);
  gpu::check_devices(op, x, dy);
  const gpu::Geometry g(x.shape, weight_shape, y_shape, options);
  const std::int64_t chunk = g.chunk(x.dtype);
  const std::array<std::int64_t, 4> channels_first{1, 0, 2, 3};
  const std::array<std::int64_t, 3> transpose{0, 2, 1};
  std::optional<Tensor> dw;
  for (std::int64_t first = 0; first < g.N; first += chunk) {
    const std::int64_t n = std::min(chunk, g.N - first);
    // dy as [G, O/G, n * P] (a copy, channels first), columns as [G, n * P, K] (a view).
    const Tensor dys = gpu::contiguous(strided::permute(gpu::samples(dy, first, n), channels_first));
    const Tensor dyg = gpu::view(dys, Shape{g.G, g.O / g.G, n * g.P});
    const Tensor cols = strided::permute(gpu::im2col(g, gpu::samples(x, first, n), true), transpose);
    const Tensor part = gpu::contiguous(matmul(dyg, cols));
    if (!dw) {
      dw = part;
    } else {
      const std::int64_t count = part.numel();
      gpu::launch_threads(x.device, gpu::kernel_for(x.device, "accumulate", x.dtype), count, gpu::address(*dw),
                           gpu::address(part), count);
    }
  }
  return gpu::view(*dw, weight_shape);
}

std::pair<Gpu::Primitive, Gpu::Primitive> Gpu::max_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "max_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  if (gpu::is_half(x.dtype)) {
    auto [out, indices] = max_pool2d(gpu::cast(x, DType::f32), options);
    return {gpu::cast(out, x.dtype), indices};
  }
  const Tensor in = gpu::contiguous(x);
  Tensor out = gpu::empty(out_shape, x.dtype, x.device);
  Tensor indices = gpu::empty(out_shape, DType::i64, x.device);
  const std::int64_t n = out.numel();
  if (n == 0) return {out, indices};
  const ops::Pool2dOptions& o = options;
  gpu::launch_threads(x.device, gpu::kernel_for(x.device, "max_pool2d", x.dtype), n, gpu::address(out),
                       gpu::address(indices), gpu::address(in), n, x.shape[2], x.shape[3], out_shape[2],
                       out_shape[3], o.kernel[0], o.kernel[1], o.stride[0], o.stride[1], o.padding[0], o.padding[1],
                       o.dilation[0], o.dilation[1]);
  return {out, indices};
}

}  // namespace kiln
