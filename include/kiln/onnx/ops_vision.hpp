// ONNX's vision ops: GridSample and RoiAlign (the input positions and weights of every
// output sample worked out on the host, as Resize does, then one gather and one weighted
// reduction on the backend), NonMaxSuppression (on the host: its output's size depends on
// the scores), MaxUnpool (a scatter) and LRN (a sum of shifted squares and one program).
#pragma once

#include "kiln/onnx/ops_nn.hpp"
#include "kiln/onnx/ops_reduce.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx {

namespace vision_detail {

using nn_detail::Dims;
using nn_detail::Outs;
using nn_detail::P;

// The input positions that each output sample reads: `k` taps per sample, tap j of sample p
// at flat position index[p * k + j] of its plane, times weight[p * k + j]. A tap that reads
// padding has weight 0 (at position 0).
struct Taps {
  std::int64_t k = 1;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  void add(std::int64_t i, double w) {
    index.push_back(i);
    weight.push_back(w);
  }
};

// x [rows, C, plane] sampled at the taps of rows * points samples: [rows, C, points], each
// sample the sum (or, with ReduceOp::max, the maximum) of its taps' values times weights.
template <class B> P<B> sample(const P<B>& x, const Taps& taps, std::int64_t points, ops::ReduceOp op) {
  const Shape s = B::shape(x);
  const std::int64_t rows = s[0], channels = s[1], width = points * taps.k;
  const P<B> index = B::from_data(TensorData::from(taps.index, Shape{rows, 1, width}), B::device(x));
  const P<B> weight = nn_detail::constant<B>(taps.weight, Shape{rows, 1, width}, B::dtype(x), B::device(x));
  const P<B> taken = B::gather(x, 2, B::expand(index, Shape{rows, channels, width}));
  const P<B> weighted = B::reshape(nn_detail::mul<B>(taken, weight), Shape{rows, channels, points, taps.k});
  return B::reshape(B::reduce(weighted, op, 3), Shape{rows, channels, points});
}

// ---------------------------------------------------------------- GridSample

enum class Padding { zeros, border, reflection };

// One spatial axis of GridSample's input, as ONNX's reference reads it: where a normalized
// grid coordinate lands, and which input position a tap at integer position i reads.
struct GridAxis {
  std::int64_t size;
  bool align;
  Padding padding;

  // The borders that reflection folds at: the outer pixels' centers with align_corners,
  // their outer edges without.
  double lo() const { return align ? 0.0 : -0.5; }
  double hi() const { return align ? static_cast<double>(size - 1) : static_cast<double>(size) - 0.5; }
  double clamp(double x) const { return std::clamp(x, 0.0, static_cast<double>(size - 1)); }
  double reflect(double x) const {
    const double range = hi() - lo();
    if (range <= 0) return lo();
    const bool below = x < lo();
    if (!below && x <= hi()) return x;
    const double d = below ? lo() - x : x - hi();
    const double folds = std::floor(d / range), rest = d - folds * range;
    // An even number of whole folds leaves x reflected at the near border, an odd one at the far one.
    const bool near = std::fmod(folds, 2.0) == 0.0;
    return below == near ? lo() + rest : hi() - rest;
  }
  double coordinate(double g) const {
    const auto n = static_cast<double>(size);
    const double x = align ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
    if (x >= lo() && x <= hi()) return x;
    return padding == Padding::border ? clamp(x) : padding == Padding::reflection ? reflect(x) : x;
  }
  // The input position that a tap at i reads; nullopt where it reads the zero padding.
  std::optional<std::int64_t> at(std::int64_t i) const {
    if (padding == Padding::zeros) return i >= 0 && i < size ? std::optional(i) : std::nullopt;
    const double x = padding == Padding::border ? static_cast<double>(i) : std::trunc(reflect(static_cast<double>(i)));
    return static_cast<std::int64_t>(clamp(x));
  }
};

enum class GridMode { nearest, linear, cubic };

// The taps along one axis at coordinate x: (position, weight) pairs.
inline std::vector<std::pair<std::optional<std::int64_t>, double>> axis_taps(const GridAxis& axis, double x,
                                                                              GridMode mode) {
  if (mode == GridMode::nearest) return {{axis.at(static_cast<std::int64_t>(std::nearbyint(x))), 1.0}};
  const double base = std::floor(x), t = x - base;
  const auto i = static_cast<std::int64_t>(base);
  if (mode == GridMode::linear) return {{axis.at(i), 1 - t}, {axis.at(i + 1), t}};
  // Keys' cubic convolution with a = -0.75, PyTorch's and ONNX's, at distances 1 + t, t, 1 - t, 2 - t.
  const double a = -0.75;
  const auto outer = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  const auto inner = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  return {{axis.at(i - 1), outer(t + 1)}, {axis.at(i), inner(t)}, {axis.at(i + 1), inner(1 - t)},
          {axis.at(i + 2), outer(2 - t)}};
}

template <class B> Outs<B> grid_sample(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  const Shape xs = a.shape(0), gs = a.shape(1);
  if (xs.rank() != 4) unsupported("GridSample on input {}: Kiln samples 4-d [N, C, H, W] inputs only", xs);
  KILN_CHECK(gs.rank() == 4 && gs[0] == xs[0] && gs[3] == 2,
             "the grid must be [{}, H_out, W_out, 2] for input {}, got {}", xs[0], xs, gs);
  // Opset 20 renamed bilinear and bicubic to linear and cubic.
  const std::string mode_name = a.node.attr_string("mode", a.opset >= 20 ? "linear" : "bilinear");
  const std::string padding_name = a.node.attr_string("padding_mode", "zeros");
  GridMode mode = GridMode::nearest;
  if (mode_name == "bilinear" || mode_name == "linear") mode = GridMode::linear;
  else if (mode_name == "bicubic" || mode_name == "cubic") mode = GridMode::cubic;
  else KILN_CHECK(mode_name == "nearest", "mode must be bilinear, nearest or bicubic, got '{}'", mode_name);
  Padding padding = Padding::zeros;
  if (padding_name == "border") padding = Padding::border;
  else if (padding_name == "reflection") padding = Padding::reflection;
  else KILN_CHECK(padding_name == "zeros", "padding_mode must be zeros, border or reflection, got '{}'", padding_name);
  const bool align = a.node.attr_int("align_corners", 0) != 0;
  const GridAxis across{xs[3], align, padding}, down{xs[2], align, padding};

  const std::vector<double> grid = a.value(1).data().template to_vec<double>();
  const std::int64_t points = gs[1] * gs[2];
  Taps taps;
  taps.k = mode == GridMode::nearest ? 1 : mode == GridMode::linear ? 4 : 16;
  for (std::size_t p = 0; p < grid.size(); p += 2) {
    const auto xt = axis_taps(across, across.coordinate(grid[p]), mode);
    for (const auto& [row, wy] : axis_taps(down, down.coordinate(grid[p + 1]), mode))
      for (const auto& [column, wx] : xt) {
        if (row && column) taps.add(*row * xs[3] + *column, wy * wx);
        else taps.add(0, 0.0);
      }
  }
  const P<B> x = B::reshape(a[0], Shape{xs[0], xs[1], xs[2] * xs[3]});
  return {B::reshape(sample<B>(x, taps, points, ops::ReduceOp::sum), Shape{xs[0], xs[1], gs[1], gs[2]})};
}

// ---------------------------------------------------------------- RoiAlign

// Each region of interest cut into output_height x output_width bins, each bin the average
// (or maximum) of a grid of bilinear samples: ONNX's reference and onnxruntime's rules,
// including the max mode's maximum over the weighted corners of every sample.
template <class B> Outs<B> roi_align(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  const Shape xs = a.shape(0), rs = a.shape(1), bs = a.shape(2);
  KILN_CHECK(xs.rank() == 4, "expected an input [N, C, H, W], got {}", xs);
  KILN_CHECK(rs.rank() == 2 && rs[1] == 4 && bs.rank() == 1 && bs[0] == rs[0],
             "rois must be [R, 4] and batch_indices [R], got {} and {}", rs, bs);
  const std::string mode = a.node.attr_string("mode", "avg");
  KILN_CHECK(mode == "avg" || mode == "max", "mode must be avg or max, got '{}'", mode);
  // Opset 16 added half_pixel, its default; opset 10's rule is output_half_pixel.
  const std::string transform =
      a.node.attr_string("coordinate_transformation_mode", a.opset >= 16 ? "half_pixel" : "output_half_pixel");
  KILN_CHECK(transform == "half_pixel" || transform == "output_half_pixel",
             "coordinate_transformation_mode must be half_pixel or output_half_pixel, got '{}'", transform);
  const std::int64_t out_h = a.node.attr_int("output_height", 1), out_w = a.node.attr_int("output_width", 1);
  const std::int64_t ratio = a.node.attr_int("sampling_ratio", 0);
  KILN_CHECK(out_h >= 1 && out_w >= 1 && ratio >= 0, "output_height {} and output_width {} must be positive, "
             "sampling_ratio {} not negative", out_h, out_w, ratio);
  const double scale = a.node.attr_float("spatial_scale", 1.0), offset = transform == "half_pixel" ? 0.5 : 0.0;
  const bool max = mode == "max";
  const std::int64_t height = xs[2], width = xs[3];
  const std::vector<double> rois = a.value(1).data().template to_vec<double>();
  const std::vector<std::int64_t> batch = reduce_detail::wrapped_indices(a, 2, xs[0], "batch_indices");

  // Each region's taps per bin: 4 corners for each sample; regions with fewer taps than the
  // most are padded with taps that change nothing (weight 0 for avg, a repeat for max).
  std::vector<Taps> per_roi(static_cast<std::size_t>(rs[0]));
  std::int64_t k = 1;
  for (std::size_t r = 0; r < per_roi.size(); ++r) {
    const double* box = &rois[r * 4];
    const double x0 = box[0] * scale - offset, y0 = box[1] * scale - offset;
    double roi_w = box[2] * scale - offset - x0, roi_h = box[3] * scale - offset - y0;
    if (offset == 0.0) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h), bin_w = roi_w / static_cast<double>(out_w);
    const auto grid_h = ratio > 0 ? ratio : static_cast<std::int64_t>(std::ceil(bin_h));
    const auto grid_w = ratio > 0 ? ratio : static_cast<std::int64_t>(std::ceil(bin_w));
    const double count = static_cast<double>(std::max<std::int64_t>(grid_h * grid_w, 1));
    const double step_h = bin_h / static_cast<double>(grid_h), step_w = bin_w / static_cast<double>(grid_w);
    Taps& t = per_roi[r];
    t.k = std::max<std::int64_t>(4 * grid_h * grid_w, 1);
    k = std::max(k, t.k);
    for (std::int64_t ph = 0; ph < out_h; ++ph)
      for (std::int64_t pw = 0; pw < out_w; ++pw) {
        if (grid_h * grid_w == 0) t.add(0, 0.0);
        for (std::int64_t iy = 0; iy < grid_h; ++iy)
          for (std::int64_t ix = 0; ix < grid_w; ++ix) {
            double y = y0 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * step_h;
            double x = x0 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * step_w;
            if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) {
              for (int c = 0; c < 4; ++c) t.add(0, 0.0);
              continue;
            }
            // Clamped into the plane: the last row (column) samples itself with full weight.
            y = std::clamp(y, 0.0, static_cast<double>(height - 1));
            x = std::clamp(x, 0.0, static_cast<double>(width - 1));
            const auto y_low = static_cast<std::int64_t>(y), x_low = static_cast<std::int64_t>(x);
            const std::int64_t y_high = std::min(y_low + 1, height - 1), x_high = std::min(x_low + 1, width - 1);
            const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
            const double norm = max ? 1.0 : count;
            t.add(y_low * width + x_low, (1 - ly) * (1 - lx) / norm);
            t.add(y_low * width + x_high, (1 - ly) * lx / norm);
            t.add(y_high * width + x_low, ly * (1 - lx) / norm);
            t.add(y_high * width + x_high, ly * lx / norm);
          }
      }
  }
  Taps taps;
  taps.k = k;
  for (const Taps& t : per_roi)
    for (std::size_t p = 0; p < t.index.size(); p += static_cast<std::size_t>(t.k)) {
      for (std::int64_t j = 0; j < k; ++j) {
        const bool own = j < t.k;
        const std::size_t at = p + static_cast<std::size_t>(own ? j : 0);
        taps.add(t.index[at], own || max ? t.weight[at] : 0.0);
      }
    }
  const P<B> planes = B::reshape(a[0], Shape{xs[0], xs[1], height * width});
  const P<B> x = provided::index_select<B>(planes, 0, B::from_data(TensorData::from(batch, Shape{rs[0]}), a.device));
  const P<B> y = sample<B>(x, taps, out_h * out_w, max ? ops::ReduceOp::max : ops::ReduceOp::sum);
  return {B::reshape(y, Shape{rs[0], xs[1], out_h, out_w})};
}

// ---------------------------------------------------------------- NonMaxSuppression

// Greedy suppression per (batch, class), on the host: boxes over score_threshold in order of
// score (ties by index), each kept unless it overlaps a kept one by more than iou_threshold.
// The rules (strict comparisons, boxes without area never suppressed) are onnxruntime's.
template <class B> Outs<B> non_max_suppression(const Args<B>& a) {
  const Shape bs = a.shape(0), ss = a.shape(1);
  KILN_CHECK(bs.rank() == 3 && bs[2] == 4 && ss.rank() == 3 && ss[0] == bs[0] && ss[2] == bs[1],
             "expected boxes [B, N, 4] and scores [B, classes, N], got {} and {}", bs, ss);
  const auto given = [&](std::size_t i) { return nn_detail::given(a, i); };
  const std::int64_t limit = given(2) ? a.ints(2).at(0) : 0;
  const double iou_threshold = given(3) ? a.scalar(3) : 0.0;
  const std::optional<double> score_threshold = given(4) ? std::optional(a.scalar(4)) : std::nullopt;
  const bool center = a.node.attr_int("center_point_box", 0) != 0;
  const std::vector<double> boxes = a.value(0).data().template to_vec<double>();
  const std::vector<double> scores = a.value(1).data().template to_vec<double>();

  // Box i of batch b as [x_min, y_min, x_max, y_max].
  const auto corners = [&](std::int64_t b, std::int64_t i) {
    const double* v = &boxes[static_cast<std::size_t>((b * bs[1] + i) * 4)];
    if (center) return std::array<double, 4>{v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
    // Corners [y1, x1, y2, x2] may come in either order.
    return std::array<double, 4>{std::min(v[1], v[3]), std::min(v[0], v[2]), std::max(v[1], v[3]),
                                 std::max(v[0], v[2])};
  };
  const auto overlaps = [&](const std::array<double, 4>& p, const std::array<double, 4>& q) {
    const double area_p = (p[2] - p[0]) * (p[3] - p[1]), area_q = (q[2] - q[0]) * (q[3] - q[1]);
    if (area_p <= 0 || area_q <= 0) return false;
    const double w = std::max(0.0, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const double h = std::max(0.0, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    const double inter = w * h;
    return inter / (area_p + area_q - inter) > iou_threshold;
  };
  std::vector<std::int64_t> selected;
  for (std::int64_t b = 0; b < bs[0]; ++b)
    for (std::int64_t c = 0; c < ss[1]; ++c) {
      const double* s = &scores[static_cast<std::size_t>((b * ss[1] + c) * ss[2])];
      std::vector<std::int64_t> order;
      for (std::int64_t i = 0; i < bs[1]; ++i)
        if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t i, std::int64_t j) { return s[i] > s[j]; });
      std::vector<std::int64_t> kept;
      for (const std::int64_t i : order) {
        if (static_cast<std::int64_t>(kept.size()) >= limit) break;
        const auto box = corners(b, i);
        if (std::none_of(kept.begin(), kept.end(), [&](std::int64_t j) { return overlaps(box, corners(b, j)); }))
          kept.push_back(i);
      }
      for (const std::int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  const auto n = static_cast<std::int64_t>(selected.size() / 3);
  return {B::from_data(TensorData::from(selected, Shape{n, 3}), a.device)};
}

// ---------------------------------------------------------------- MaxUnpool, LRN

// MaxUnpool: X's values scattered to the flat positions that MaxPool's indices name, in a
// zero tensor of the size the pooling window gives back. An output_shape puts that tensor
// at the start of each dim of a zero tensor of its shape, as ONNX's test data has it.
template <class B> Outs<B> max_unpool(const Args<B>& a) {
  const Shape xs = a.shape(0), is = a.shape(1);
  KILN_CHECK(xs.rank() >= 3 && is == xs, "expected an input [N, C, spatial...] and indices of its shape, got {} and {}",
             xs, is);
  const std::size_t n = xs.rank() - 2;
  const Extents kernel = nn_detail::kernel_attr(a.node, n, xs);
  const Extents stride = nn_detail::spatial_attr(a.node, "strides", n, 1, xs);
  const Extents pads = nn_detail::spatial_attr(a.node, "pads", 2 * n, 0, xs);
  Dims dims = xs.to_vector();
  for (std::size_t i = 0; i < n; ++i) dims[2 + i] = (xs[2 + i] - 1) * stride[i] - pads[i] - pads[n + i] + kernel[i];
  const Shape unpooled(dims);
  const std::vector<std::int64_t> index = reduce_detail::wrapped_indices(a, 1, unpooled.numel(), "indices");
  const P<B> zeros = provided::full<B>(Shape{unpooled.numel()}, 0.0, a.dtype(0), a.device);
  const P<B> flat_index = B::from_data(TensorData::from(index, Shape{xs.numel()}), a.device);
  const P<B> y = B::reshape(
      B::scatter(zeros, 0, flat_index, B::reshape(a[0], Shape{xs.numel()}), ops::ScatterMode::assign), unpooled);
  if (!nn_detail::given(a, 2)) return {y};
  const Dims out = a.ints(2);
  KILN_CHECK(out.size() == xs.rank() && out[0] == xs[0] && out[1] == xs[1],
             "output_shape {} must be [{}, {}, spatial...] for input {}", out, xs[0], xs[1], xs);
  if (Shape(out) == unpooled) return {y};
  std::vector<ops::SliceRange> corner;
  for (std::size_t d = 0; d < out.size(); ++d) corner.push_back({0, std::min(out[d], dims[d]), 1});
  return {B::slice_assign(provided::full<B>(Shape(out), 0.0, a.dtype(0), a.device), corner, B::slice(y, corner))};
}

// LRN: x / (bias + alpha / size * Σ x²)^beta, the sum over the channels c - ⌊(size-1)/2⌋ to
// c + ⌈(size-1)/2⌉; the squares are zero-padded along the channels and summed as `size`
// shifted slices (size is a handful).
template <class B> Outs<B> lrn(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  const Shape xs = a.shape(0);
  KILN_CHECK(xs.rank() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", xs);
  const std::int64_t size = a.node.attr_int("size", 0);
  KILN_CHECK(size >= 1, "size must be positive, got {}", size);
  const std::int64_t channels = xs[1], before = (size - 1) / 2;
  const Shape plane{xs[0], channels, xs.numel() / std::max<std::int64_t>(xs[0] * channels, 1)};
  const P<B> x = B::reshape(a[0], plane);
  const P<B> squares =
      B::slice_assign(provided::full<B>(Shape{plane[0], channels + size - 1, plane[2]}, 0.0, a.dtype(0), a.device),
                      std::vector<ops::SliceRange>{{0, plane[0], 1}, {before, channels, 1}, {0, plane[2], 1}},
                      nn_detail::mul<B>(x, x));
  P<B> sum = nn_detail::slice_dim<B>(squares, 1, 0, channels);
  for (std::int64_t i = 1; i < size; ++i)
    sum = nn_detail::add<B>(sum, nn_detail::slice_dim<B>(squares, 1, i, channels));
  const codegen::Program& p = detail::program("lrn", a.dtype(0), 2, 3, [](auto in, auto ps) {
    return in[0] / (ps[2] + ps[0] * in[1]).pow(ps[1]);
  });
  const double alpha = a.node.attr_float("alpha", 1e-4), beta = a.node.attr_float("beta", 0.75);
  const P<B> y = detail::run<B>(p, {x, sum}, {alpha / static_cast<double>(size), beta, a.node.attr_float("bias", 1.0)});
  return {B::reshape(y, xs)};
}

}  // namespace vision_detail

// The op types add_vision_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kVisionOps[] = {
    "GridSample", "RoiAlign", "NonMaxSuppression", "MaxUnpool", "LRN"};
inline constexpr OpGroup kVisionGroup{"vision", kVisionOps};

template <class B> void add_vision_ops(OpTable<B>& t) {
  using namespace vision_detail;
  t["GridSample"] = {grid_sample<B>, 16};
  t["RoiAlign"] = {roi_align<B>, 10};
  t["NonMaxSuppression"] = {non_max_suppression<B>, 10};
  t["MaxUnpool"] = {max_unpool<B>, 9};
  t["LRN"] = {lrn<B>, 1};
}

}  // namespace kiln::onnx
