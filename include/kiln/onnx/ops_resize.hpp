// ONNX's Resize and Upsample: the input positions and weights of each output position are
// worked out on the host for every coordinate mode, then applied along each dim
// (kiln/onnx/ops_nn.hpp's helpers); 4-d cases that provided::interpolate computes the same
// way go through it.
#pragma once

#include "kiln/onnx/ops_nn.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx {

namespace nn_detail {
// ---------------------------------------------------------------- Resize, Upsample

// How Resize maps output positions to input ones and combines the inputs near them, as
// ONNX's reference does it: along each resized axis, output position x reads input
// coordinate x_in, and the result is a weighted sum of a few input positions around it
// (clamped to the input, which is the reference's edge padding).
struct ResizeRule {
  std::string mode = "nearest";  // nearest, linear, cubic
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// One axis's taps: for output position o, input index[o * K + k] with weight[o * K + k], and
// whether o falls outside the crop (tf_crop_and_resize reads extrapolation_value there).
struct ResizeTaps {
  std::size_t k = 1;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  std::vector<bool> outside;
};

// `length` is ONNX's output length as a real number (scale * in when scales are given, the
// reference uses it unrounded), `scale` the ratio of output to input coordinates.
inline ResizeTaps resize_taps(const ResizeRule& rule, std::int64_t in, std::int64_t out, double scale, double length,
                              double roi_start, double roi_end) {
  ResizeTaps taps;
  taps.k = rule.mode == "nearest" ? 1 : rule.mode == "linear" ? 2 : 4;
  const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
  for (std::int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o), n = static_cast<double>(in);
    double src = 0.0;
    const std::string& t = rule.transform;
    if (t == "half_pixel") src = (x + 0.5) / scale - 0.5;
    else if (t == "pytorch_half_pixel") src = length > 1 ? (x + 0.5) / scale - 0.5 : -0.5;
    else if (t == "align_corners") src = length == 1 ? 0.0 : x * (n - 1) / (length - 1);
    else if (t == "asymmetric") src = x / scale;
    else if (t == "tf_half_pixel_for_nn") src = (x + 0.5) / scale;
    else if (t == "half_pixel_symmetric") {
      const double adjustment = static_cast<double>(out) / (scale * n), center = n / 2;
      src = center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    } else if (t == "tf_crop_and_resize") {
      src = length > 1 ? roi_start * (n - 1) + x * (roi_end - roi_start) * (n - 1) / (length - 1)
                       : (roi_end - roi_start) * (n - 1) / 2 + roi_start * (n - 1);
    } else {
      unsupported("coordinate_transformation_mode '{}'", t);
    }
    taps.outside.push_back(t == "tf_crop_and_resize" && (src < 0 || src > n - 1));
    // The reference's ratio lies in (0, 1]: an integer coordinate is the upper end of the
    // interval below it.
    const double floor = std::floor(src);
    const bool whole = floor == src;
    const double ratio = whole ? 1.0 : src - floor;
    const std::int64_t base = static_cast<std::int64_t>(floor) - (whole ? 1 : 0);  // the tap left of src
    if (taps.k == 1) {
      const std::string& m = rule.nearest;
      bool upper = true;  // whole coordinates read themselves, the upper tap
      if (!whole) {
        if (m == "round_prefer_floor") upper = ratio > 0.5;
        else if (m == "round_prefer_ceil") upper = ratio >= 0.5;
        else if (m == "floor") upper = false;
        else if (m != "ceil") unsupported("nearest_mode '{}'", m);
      }
      taps.index.push_back(clamp(base + (upper ? 1 : 0)));
      taps.weight.push_back(1.0);
      continue;
    }
    std::vector<double> w;
    std::int64_t first = base;
    if (taps.k == 2) {
      w = {1 - ratio, ratio};
    } else {
      const double a = rule.cubic_a;
      const auto near = [&](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };
      const auto far = [&](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };
      w = {far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)};
      first = base - 1;
    }
    if (rule.exclude_outside) {
      double sum = 0;
      for (std::size_t k = 0; k < w.size(); ++k) {
        const std::int64_t i = first + static_cast<std::int64_t>(k);
        if (i < 0 || i >= in) w[k] = 0;
        sum += w[k];
      }
      for (double& v : w) v /= sum;
    }
    for (std::size_t k = 0; k < w.size(); ++k) {
      taps.index.push_back(clamp(first + static_cast<std::int64_t>(k)));
      taps.weight.push_back(w[k]);
    }
  }
  return taps;
}

// x resampled along `dim` by `taps`: a weighted sum of index_selects, one per tap.
template <class B> P<B> resample(const P<B>& x, std::size_t dim, const ResizeTaps& taps, double extrapolation,
                                 const typename B::Device& device) {
  const Shape s = B::shape(x);
  const std::int64_t out = static_cast<std::int64_t>(taps.index.size() / taps.k);
  std::optional<P<B>> sum;
  for (std::size_t k = 0; k < taps.k; ++k) {
    std::vector<std::int64_t> index;
    std::vector<double> weight;
    for (std::int64_t o = 0; o < out; ++o) {
      index.push_back(taps.index[static_cast<std::size_t>(o) * taps.k + k]);
      weight.push_back(taps.weight[static_cast<std::size_t>(o) * taps.k + k]);
    }
    P<B> term = provided::index_select<B>(x, static_cast<std::int64_t>(dim),
                                          constant<B>(index, Shape{out}, DType::i64, device));
    if (taps.k > 1) term = mul<B>(term, constant<B>(weight, along(s.rank(), dim, out), B::dtype(x), device));
    sum = sum ? add<B>(*sum, term) : term;
  }
  if (std::find(taps.outside.begin(), taps.outside.end(), true) == taps.outside.end()) return *sum;
  const P<B> outside = constant<B>(taps.outside, along(s.rank(), dim, out), DType::boolean, device);
  return provided::where<B>(outside, provided::full<B>(along(s.rank(), dim, 1), extrapolation, B::dtype(x), device),
                            *sum);
}

// Resize (opset 10 on) and Upsample (opsets 7 and 9): output sizes from `scales` or `sizes`,
// then each resized axis in turn, the last first (the reference's order, which matters for
// tf_crop_and_resize's extrapolation). 4-d float inputs resized on H and W in the forms
// interpolate means (nearest by an integer factor, bilinear with half-pixel or
// align-corners coordinates) run as provided::interpolate, one primitive.
template <class B> Outs<B> resize(const Args<B>& a, bool upsample) {
  const Shape s = a.shape(0);
  const std::size_t rank = s.rank();
  ResizeRule rule;
  rule.mode = a.node.attr_string("mode", "nearest");
  if (rule.mode == "bilinear") rule.mode = "linear";  // Upsample-7's spelling
  if (rule.mode != "nearest" && rule.mode != "linear" && rule.mode != "cubic")
    unsupported("Resize mode '{}' (Kiln runs nearest, linear and cubic)", rule.mode);
  if (upsample || a.opset < 11) {
    // Upsample and Resize-10 map coordinates asymmetrically and take the floor for nearest.
    rule.transform = "asymmetric";
    rule.nearest = "floor";
  } else {
    rule.transform = a.node.attr_string("coordinate_transformation_mode", "half_pixel");
    rule.nearest = a.node.attr_string("nearest_mode", "round_prefer_floor");
    rule.cubic_a = a.node.attr_float("cubic_coeff_a", -0.75);
    rule.exclude_outside = a.node.attr_int("exclude_outside", 0) != 0;
    rule.extrapolation = a.node.attr_float("extrapolation_value", 0.0);
  }
  if (a.node.attr_int("antialias", 0) != 0) unsupported("Resize with antialias 1");
  const std::string policy = a.node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") unsupported("Resize with keep_aspect_ratio_policy '{}'", policy);
  if (rule.mode != "nearest") check_float(a, 0);

  // The resized axes (all, or the `axes` attribute of opset 18) and their scales or sizes.
  std::vector<std::size_t> axes;
  for (std::size_t d = 0; d < rank; ++d) axes.push_back(d);
  if (a.node.find("axes")) axes = detail::axes(a.node.attr_ints("axes"), rank);
  const std::size_t scales_at = upsample ? 1 : a.opset < 11 ? 1 : 2, sizes_at = 3;
  std::vector<double> scales, roi;
  Dims sizes;
  if (upsample && a.opset < 9) scales = a.node.attr_floats("scales");
  else if (given(a, scales_at)) scales = a.value(scales_at).data().template to_vec<double>();
  if (!upsample && a.opset >= 11 && given(a, sizes_at)) {
    KILN_CHECK(scales.empty(), "takes scales or sizes, not both");
    sizes = a.ints(sizes_at);
  }
  KILN_CHECK(!scales.empty() || !sizes.empty(), "needs scales or sizes");
  KILN_CHECK((scales.empty() ? sizes.size() : scales.size()) == axes.size(),
             "scales or sizes must have {} entries for input {}, got {}", axes.size(), s,
             scales.empty() ? sizes.size() : scales.size());
  if (!upsample && a.opset >= 11 && given(a, 1)) roi = a.value(1).data().template to_vec<double>();
  if (rule.transform == "tf_crop_and_resize")
    KILN_CHECK(roi.size() == 2 * axes.size(), "tf_crop_and_resize needs a roi of {} values, got {}",
               2 * axes.size(), roi.size());

  struct Axis {
    std::size_t dim;
    std::int64_t out;
    double scale, length, roi_start, roi_end;
  };
  std::vector<Axis> resized;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t in = s[axes[i]];
    Axis ax{axes[i], 0, 0, 0, 0, 1};
    if (scales.empty()) {
      ax.out = sizes[i];
      ax.scale = static_cast<double>(ax.out) / static_cast<double>(in);
      ax.length = static_cast<double>(ax.out);
    } else {
      KILN_CHECK(scales[i] > 0, "scales {} must be positive", scales);
      ax.scale = scales[i];
      ax.length = scales[i] * static_cast<double>(in);
      ax.out = static_cast<std::int64_t>(std::floor(ax.length));
    }
    KILN_CHECK(ax.out >= 1 && in >= 1, "input {} resized to {} along dim {} is empty", s, ax.out, axes[i]);
    if (!roi.empty()) {
      ax.roi_start = roi[i];
      ax.roi_end = roi[axes.size() + i];
    }
    const bool identity = ax.out == in && ax.scale == 1.0 && rule.transform != "tf_crop_and_resize";
    if (!identity) resized.push_back(ax);
  }
  if (resized.empty()) return {a[0]};

  // The forms provided::interpolate computes: H and W of a float NCHW tensor, sized exactly.
  const bool spatial = rank == 4 && is_float(a.dtype(0)) &&
                       std::all_of(resized.begin(), resized.end(), [](const Axis& ax) {
                         return ax.dim >= 2 && ax.length == static_cast<double>(ax.out);
                       });
  if (spatial) {
    std::array<std::int64_t, 2> size{s[2], s[3]};
    for (const Axis& ax : resized) size[ax.dim - 2] = ax.out;
    const std::string& t = rule.transform;
    // Upsampled by whole factors k, output o reads input floor(o / k), interpolate's nearest
    // index, both with asymmetric coordinates and the floor, and with half-pixel coordinates
    // and rounding: (o + 0.5) / k - 0.5 lies less than 0.5 from floor(o / k).
    const bool whole_factors = size[0] % s[2] == 0 && size[1] % s[3] == 0;
    const bool floor_index = (t == "asymmetric" && rule.nearest == "floor") ||
                             ((t == "half_pixel" || t == "pytorch_half_pixel") &&
                              (rule.nearest == "round_prefer_floor" || rule.nearest == "round_prefer_ceil"));
    std::optional<ops::InterpolateOptions> o;
    if (rule.mode == "nearest" && whole_factors && floor_index)
      o = ops::InterpolateOptions{ops::InterpolateMode::nearest, false};
    else if (rule.mode == "linear" && (t == "half_pixel" || (t == "pytorch_half_pixel" && size[0] > 1 && size[1] > 1)))
      o = ops::InterpolateOptions{ops::InterpolateMode::bilinear, false};
    else if (rule.mode == "linear" && t == "align_corners")
      o = ops::InterpolateOptions{ops::InterpolateMode::bilinear, true};
    if (o) return {provided::interpolate<B>(a[0], size, *o)};
  }

  P<B> y = a[0];
  for (auto ax = resized.rbegin(); ax != resized.rend(); ++ax) {
    const ResizeTaps taps =
        resize_taps(rule, s[ax->dim], ax->out, ax->scale, ax->length, ax->roi_start, ax->roi_end);
    y = resample<B>(y, ax->dim, taps, rule.extrapolation, a.device);
  }
  return {y};
}

}  // namespace nn_detail

// The op types add_resize_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kResizeOps[] = {
    "Resize", "Upsample"};
inline constexpr OpGroup kResizeGroup{"resize", kResizeOps};

template <class B> void add_resize_ops(OpTable<B>& t) {
  using namespace nn_detail;
  t["Resize"] = {[](const Args<B>& a) { return resize(a, false); }, 10};
  t["Upsample"] = {[](const Args<B>& a) { return resize(a, true); }, 7, 9};
}

}  // namespace kiln::onnx
