// Fused composites: softmax / log-softmax and layer norm (with its affine part or without),
// forward and backward, one pass per row over contiguous memory. The tensor API's compositions of
// primitives are the reference (include/kiln/tensor/elementwise.hpp, nn/norm.hpp); these
// kernels read each element once or twice where the compositions make five to fifteen passes.
#include "elementwise_kernels.hpp"
#include "internal.hpp"

#include "kiln/ops/reduce.hpp"

#include <Eigen/Core>

#include <cmath>
#include <limits>

namespace kiln::cpu {
namespace {

template <class T> using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Runs fn(rows...) on each line of `n` elements along dim of contiguous tensors seen as
// [outer, n, inner]. Lines along the last dim are read in place; others are gathered into a
// per-thread buffer first and scattered back after.
template <class T, std::size_t In, class F>
void for_each_line(const ops::DimSplit& s, std::array<const T*, In> in, T* out, F&& fn) {
  const std::int64_t lines = s.outer * s.inner;
  parallel_for(lines, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(s.n, 1)),
               [&](std::int64_t begin, std::int64_t end) {
                 std::vector<T> buffer(s.inner == 1 ? 0 : static_cast<std::size_t>(s.n * (In + 1)));
                 for (std::int64_t line = begin; line < end; ++line) {
                   const std::int64_t o = line / s.inner, i = line % s.inner, base = o * s.n * s.inner + i;
                   std::array<const T*, In> rows;
                   T* row_out;
                   if (s.inner == 1) {
                     for (std::size_t a = 0; a < In; ++a) rows[a] = in[a] + base;
                     row_out = out + base;
                   } else {
                     for (std::size_t a = 0; a < In; ++a) {
                       T* dst = buffer.data() + a * s.n;
                       for (std::int64_t j = 0; j < s.n; ++j) dst[j] = in[a][base + j * s.inner];
                       rows[a] = dst;
                     }
                     row_out = buffer.data() + In * s.n;
                   }
                   fn(rows, row_out);
                   if (s.inner != 1)
                     for (std::int64_t j = 0; j < s.n; ++j) out[base + j * s.inner] = row_out[j];
                 }
               });
}

template <class T> void softmax_rows(const ops::DimSplit& s, const T* x, T* y, bool log) {
  for_each_line<T, 1>(s, {x}, y, [&](const std::array<const T*, 1>& in, T* out) {
    const ConstRow<T> xr(in[0], s.n);
    Row<T> yr(out, s.n);
    // A row of -inf, or one holding +inf or NaN, comes out NaN as in PyTorch: x - max is NaN there.
    const T max = xr.maxCoeff();
    const T sum = exp_shifted_sum(in[0], max, out, s.n);
    if (log) yr = (xr - max) - std::log(sum);
    else yr *= T(1) / sum;
  });
}

template <class T> void softmax_backward_rows(const ops::DimSplit& s, const T* y, const T* dy, T* dx, bool log) {
  for_each_line<T, 2>(s, {y, dy}, dx, [&](const std::array<const T*, 2>& in, T* out) {
    const ConstRow<T> yr(in[0], s.n), dyr(in[1], s.n);
    Row<T> dxr(out, s.n);
    if (log) {  // y = log softmax: dx = dy - softmax · Σ dy
      dxr = dyr - yr.exp() * dyr.sum();
    } else {  // dx = y · (dy - Σ y·dy)
      const T dot = (yr * dyr).sum();
      dxr = yr * (dyr - dot);
    }
  });
}

// Mean and 1/sqrt(var + eps) of a row; the variance from the centered values (two passes).
template <class T> std::pair<T, T> row_stats(const ConstRow<T>& x, double eps) {
  const T mean = x.sum() / static_cast<T>(x.size());
  const T var = (x - mean).square().sum() / static_cast<T>(x.size());
  return {mean, T(1) / std::sqrt(var + static_cast<T>(eps))};
}

template <class T> void layer_norm_rows(std::int64_t rows, std::int64_t n, const T* x, T* y, double eps) {
  parallel_for(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(n, 1)),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t r = begin; r < end; ++r) {
                   const ConstRow<T> xr(x + r * n, n);
                   const auto [mean, rstd] = row_stats(xr, eps);
                   Row<T>(y + r * n, n) = (xr - mean) * rstd;
                 }
               });
}

// dx = rstd · (dy - mean(dy) - x̂ · mean(dy · x̂)), x̂ = (x - mean) · rstd.
template <class T>
void layer_norm_backward_rows(std::int64_t rows, std::int64_t n, const T* x, const T* dy, T* dx, double eps) {
  parallel_for(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(n, 1)),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t r = begin; r < end; ++r) {
                   const ConstRow<T> xr(x + r * n, n), dyr(dy + r * n, n);
                   const auto [mean, rstd] = row_stats(xr, eps);
                   const T inv_n = T(1) / static_cast<T>(n);
                   const T dy_mean = dyr.sum() * inv_n;
                   const T dot_mean = (dyr * (xr - mean)).sum() * rstd * inv_n;
                   Row<T>(dx + r * n, n) = rstd * (dyr - dy_mean - (xr - mean) * (rstd * dot_mean));
                 }
               });
}

// Layer norm with its affine part, y = x̂ · w + b (w, b null where absent), one pass per row.
template <class T>
void layer_norm_affine_rows(std::int64_t rows, std::int64_t n, const T* x, const T* w, const T* b, T* y, double eps) {
  parallel_for(rows, std::max<std::int64_t>(1, 16384 / n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const ConstRow<T> xr(x + r * n, n);
      const auto [mean, rstd] = row_stats(xr, eps);
      Row<T> yr(y + r * n, n);
      yr = (xr - mean) * rstd;
      if (w != nullptr) yr *= ConstRow<T>(w, n);
      if (b != nullptr) yr += ConstRow<T>(b, n);
    }
  });
}

// Its backward: dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)) with g = dy · w, and dw = Σ dy · x̂,
// db = Σ dy over the rows (dw, db null where not wanted). Each block of kBlock rows sums its
// own part of dw and db, and the parts are added in block order after: the sums do not
// depend on how the threads split the rows.
template <class T>
void layer_norm_affine_backward_rows(std::int64_t rows, std::int64_t n, const T* x, const T* w, const T* dy, T* dx,
                                     T* dw, T* db, double eps) {
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (rows + kBlock - 1) / kBlock;
  std::vector<T> part_w(dw != nullptr ? static_cast<std::size_t>(blocks * n) : 0);
  std::vector<T> part_b(db != nullptr ? static_cast<std::size_t>(blocks * n) : 0);
  parallel_for(blocks, 1, [&](std::int64_t first, std::int64_t last) {
    Eigen::Array<T, Eigen::Dynamic, 1> xhat(n), g(n);
    for (std::int64_t block = first; block < last; ++block) {
      Row<T> pw(dw != nullptr ? part_w.data() + block * n : nullptr, dw != nullptr ? n : 0);
      Row<T> pb(db != nullptr ? part_b.data() + block * n : nullptr, db != nullptr ? n : 0);
      pw.setZero();
      pb.setZero();
      for (std::int64_t r = block * kBlock; r < std::min(rows, (block + 1) * kBlock); ++r) {
        const ConstRow<T> xr(x + r * n, n), dyr(dy + r * n, n);
        const auto [mean, rstd] = row_stats(xr, eps);
        xhat = (xr - mean) * rstd;
        if (w != nullptr) g = dyr * ConstRow<T>(w, n);
        else g = dyr;
        const T inv_n = T(1) / static_cast<T>(n);
        const T g_mean = g.sum() * inv_n, dot_mean = (g * xhat).sum() * inv_n;
        Row<T>(dx + r * n, n) = rstd * (g - g_mean - xhat * dot_mean);
        if (dw != nullptr) pw += dyr * xhat;
        if (db != nullptr) pb += dyr;
      }
    }
  });
  const auto add_parts = [&](const std::vector<T>& parts, T* sum) {
    Row<T> total(sum, n);
    total.setZero();
    for (std::int64_t block = 0; block < blocks; ++block) total += ConstRow<T>(parts.data() + block * n, n);
  };
  if (dw != nullptr) add_parts(part_w, dw);
  if (db != nullptr) add_parts(part_b, db);
}

// f16/bf16 compute through f32, like the other float kernels.
template <class F> CpuTensor through_f32(DType dtype, F&& compute) {
  CpuTensor out = compute(DType::f32);
  return Cpu::cast(out, dtype);
}

void check_float(std::string_view op, const CpuTensor& x) {
  KILN_CHECK(is_float(x.dtype), "{}: expects a float tensor, got {} of shape {}", op, x.dtype, x.shape);
}

// The row count and length of layer norm over the last `dims` dims.
std::pair<std::int64_t, std::int64_t> norm_rows(std::string_view op, const Shape& shape, std::int64_t dims) {
  KILN_CHECK(dims >= 1 && static_cast<std::size_t>(dims) <= shape.rank(),
             "{}: cannot normalize over the last {} dims of a tensor of shape {}", op, dims, shape);
  std::int64_t n = 1;
  for (std::size_t d = shape.rank() - static_cast<std::size_t>(dims); d < shape.rank(); ++d) n *= shape[d];
  KILN_CHECK(n > 0, "{}: the normalized dims of {} hold no elements", op, shape);
  return {shape.numel() / n, n};
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::softmax(const Primitive& x, std::int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  cpu::check_float(op, x);
  const std::size_t d = normalize_dim(op, dim, x.shape.rank());
  if (!cpu::is_native_float(x.dtype))
    return cpu::through_f32(x.dtype, [&](DType f32) { return softmax(cast(x, f32), dim, log); });
  const CpuTensor in = cpu::contiguous(x);
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (x.numel() == 0) return out;
  const ops::DimSplit split = ops::split_at(x.shape, d);
  cpu::dispatch_float(op, x.dtype,
                      [&]<class T>() { cpu::softmax_rows<T>(split, in.data<T>(), out.data<T>(), log); });
  return out;
}

Cpu::Primitive Cpu::softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  cpu::check_float(op, y);
  KILN_CHECK(y.shape == dy.shape && y.dtype == dy.dtype, "{}: y {} ({}) and dy {} ({}) must match", op, y.shape,
             y.dtype, dy.shape, dy.dtype);
  const std::size_t d = normalize_dim(op, dim, y.shape.rank());
  if (!cpu::is_native_float(y.dtype))
    return cpu::through_f32(y.dtype, [&](DType f32) { return softmax_backward(cast(y, f32), cast(dy, f32), dim, log); });
  const CpuTensor yc = cpu::contiguous(y), dyc = cpu::contiguous(dy);
  CpuTensor out = cpu::empty(y.shape, y.dtype);
  if (y.numel() == 0) return out;
  const ops::DimSplit split = ops::split_at(y.shape, d);
  cpu::dispatch_float(op, y.dtype, [&]<class T>() {
    cpu::softmax_backward_rows<T>(split, yc.data<T>(), dyc.data<T>(), out.data<T>(), log);
  });
  return out;
}

Cpu::Primitive Cpu::layer_norm(const Primitive& x, std::int64_t dims, double eps) {
  cpu::check_float("layer_norm", x);
  if (!cpu::is_native_float(x.dtype))
    return cpu::through_f32(x.dtype, [&](DType f32) { return layer_norm(cast(x, f32), dims, eps); });
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (x.numel() == 0) return out;
  const auto [rows, n] = cpu::norm_rows("layer_norm", x.shape, dims);
  const CpuTensor in = cpu::contiguous(x);
  cpu::dispatch_float("layer_norm", x.dtype,
                      [&]<class T>() { cpu::layer_norm_rows<T>(rows, n, in.data<T>(), out.data<T>(), eps); });
  return out;
}

Cpu::Primitive Cpu::layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps) {
  cpu::check_float("layer_norm_backward", x);
  KILN_CHECK(x.shape == dy.shape && x.dtype == dy.dtype, "layer_norm_backward: x {} ({}) and dy {} ({}) must match",
             x.shape, x.dtype, dy.shape, dy.dtype);
  if (!cpu::is_native_float(x.dtype))
    return cpu::through_f32(x.dtype, [&](DType f32) { return layer_norm_backward(cast(x, f32), cast(dy, f32), dims, eps); });
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (x.numel() == 0) return out;
  const auto [rows, n] = cpu::norm_rows("layer_norm_backward", x.shape, dims);
  const CpuTensor xc = cpu::contiguous(x), dyc = cpu::contiguous(dy);
  cpu::dispatch_float("layer_norm_backward", x.dtype, [&]<class T>() {
    cpu::layer_norm_backward_rows<T>(rows, n, xc.data<T>(), dyc.data<T>(), out.data<T>(), eps);
  });
  return out;
}

Cpu::Primitive Cpu::layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                      const std::optional<Primitive>& bias, std::int64_t dims, double eps) {
  const ops::NormRows r = ops::layer_norm_rows(x.shape, x.dtype, dims,
                                               weight ? std::optional(weight->shape) : std::nullopt,
                                               bias ? std::optional(bias->shape) : std::nullopt);
  for (const std::optional<Primitive>* p : {&weight, &bias})
    KILN_CHECK(!*p || (*p)->dtype == x.dtype, "layer_norm: weight and bias must be {} as x {}, got {}", x.dtype,
               x.shape, (*p)->dtype);
  if (!cpu::is_native_float(x.dtype)) {
    const auto f32 = [](const std::optional<Primitive>& p) { return p ? std::optional(cast(*p, DType::f32)) : p; };
    return cast(layer_norm_affine(cast(x, DType::f32), f32(weight), f32(bias), dims, eps), x.dtype);
  }
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  if (x.numel() == 0) return out;
  const CpuTensor in = cpu::contiguous(x);
  const std::optional<CpuTensor> w = weight ? std::optional(cpu::contiguous(*weight)) : std::nullopt;
  const std::optional<CpuTensor> b = bias ? std::optional(cpu::contiguous(*bias)) : std::nullopt;
  cpu::dispatch_float("layer_norm", x.dtype, [&]<class T>() {
    cpu::layer_norm_affine_rows<T>(r.rows, r.n, in.data<T>(), w ? w->data<T>() : nullptr, b ? b->data<T>() : nullptr,
                                   out.data<T>(), eps);
  });
  return out;
}

LayerNormGradients<Cpu::Primitive> Cpu::layer_norm_affine_backward(const Primitive& x,
                                                                    const std::optional<Primitive>& weight,
                                                                    const Primitive& dy, std::int64_t dims, double eps,
                                                                    bool bias) {
  const ops::NormRows r = ops::layer_norm_rows(x.shape, x.dtype, dims,
                                               weight ? std::optional(weight->shape) : std::nullopt, std::nullopt);
  KILN_CHECK(dy.shape == x.shape && dy.dtype == x.dtype && (!weight || weight->dtype == x.dtype),
             "layer_norm_backward: x {} ({}), dy {} ({}) and the weight must match", x.shape, x.dtype, dy.shape,
             dy.dtype);
  if (!cpu::is_native_float(x.dtype)) {
    const std::optional<Primitive> w = weight ? std::optional(cast(*weight, DType::f32)) : std::nullopt;
    LayerNormGradients<Primitive> g =
        layer_norm_affine_backward(cast(x, DType::f32), w, cast(dy, DType::f32), dims, eps, bias);
    g.dx = cast(g.dx, x.dtype);
    if (g.dweight) g.dweight = cast(*g.dweight, x.dtype);
    if (g.dbias) g.dbias = cast(*g.dbias, x.dtype);
    return g;
  }
  const std::vector<std::int64_t> all = x.shape.to_vector();
  const Shape normalized(std::vector(all.end() - dims, all.end()));
  LayerNormGradients<Primitive> out{cpu::empty(x.shape, x.dtype), std::nullopt, std::nullopt};
  if (weight) out.dweight = cpu::empty(normalized, x.dtype);
  if (bias) out.dbias = cpu::empty(normalized, x.dtype);
  const CpuTensor xc = cpu::contiguous(x), dyc = cpu::contiguous(dy);
  const std::optional<CpuTensor> w = weight ? std::optional(cpu::contiguous(*weight)) : std::nullopt;
  cpu::dispatch_float("layer_norm_backward", x.dtype, [&]<class T>() {
    cpu::layer_norm_affine_backward_rows<T>(r.rows, r.n, xc.data<T>(), w ? w->data<T>() : nullptr, dyc.data<T>(),
                                            out.dx.data<T>(), out.dweight ? out.dweight->data<T>() : nullptr,
                                            out.dbias ? out.dbias->data<T>() : nullptr, eps);
  });
  return out;
}

}  // namespace kiln
