// Layers that resample the spatial dims, with torch.nn's meaning: Upsample (torch.nn.Upsample
// over functional::interpolate), MaxUnpool2d (the partial inverse of MaxPool2d, from the
// indices max_pool2d_with_indices returns), PixelShuffle / PixelUnshuffle and Unfold / Fold
// (over kiln/tensor/unfold.hpp's functions), and the functions functional::max_unpool2d,
// grid_sample and affine_grid (spatial transformers). All are compositions of tensor ops:
// differentiable and on every backend (unpooling scatters the pooled values into zeros,
// grid sampling gathers the corners of each sampling point and weights them).
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/tensor/pool.hpp"
#include "kiln/tensor/unfold.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::functional {

// x [N, C, H, W] and indices [N, C, H, W] (the flat positions h * W_out + w of each value in
// its output plane, as max_pool2d_with_indices gives them) → [N, C, H_out, W_out], zeros
// where no index points (torch.nn.functional.max_unpool2d with an explicit output size).
template <Backend B>
Tensor<B, 4> max_unpool2d(const Tensor<B, 4>& x, const Tensor<B, 4, Int>& indices,
                          const std::array<std::int64_t, 2>& output_size) {
  KILN_CHECK(indices.shape() == x.shape(), "max_unpool2d: indices {} must have the shape of the input {}",
             indices.shape(), x.shape());
  const std::int64_t n = x.dim(0), c = x.dim(1), plane = output_size[0] * output_size[1];
  KILN_CHECK(output_size[0] > 0 && output_size[1] > 0, "max_unpool2d: output size [{}, {}] must be positive (input {})",
             output_size[0], output_size[1], x.shape());
  const auto flat = indices.template reshape<3>({n, c, -1});
  if (flat.numel() > 0) {
    const std::int64_t low = static_cast<std::int64_t>(flat.min().item()),
                       high = static_cast<std::int64_t>(flat.max().item());
    KILN_CHECK(low >= 0 && high < plane, "max_unpool2d: indices range over [{}, {}], outside the output plane [{}, {}] "
               "of {} positions (input {})", low, high, output_size[0], output_size[1], plane, x.shape());
  }
  const auto zeros = Tensor<B, 3>::zeros({n, c, plane}, x.device(), x.dtype());
  return zeros.scatter(2, flat, x.template reshape<3>({n, c, -1}))
      .template reshape<4>({n, c, output_size[0], output_size[1]});
}

enum class GridSampleMode { bilinear, nearest };
enum class GridPadding { zeros, border, reflection };

struct GridSampleOptions {
  GridSampleMode mode = GridSampleMode::bilinear;
  GridPadding padding_mode = GridPadding::zeros;
  bool align_corners = false;
};

namespace detail {
// A normalized coordinate in [-1, 1] to a pixel coordinate in an extent of `size` pixels:
// -1 and 1 are the centres of the edge pixels with align_corners, their outer edges without.
// Border and reflection padding then bring it into [0, size - 1], as torch does.
template <class T> T grid_to_pixels(const T& g, std::int64_t size, const GridSampleOptions& o) {
  const double n = static_cast<double>(size);
  T x = o.align_corners ? (g + 1.0) * ((n - 1) / 2) : ((g + 1.0) * n - 1.0) * 0.5;
  if (o.padding_mode == GridPadding::reflection) {
    // Mirror about the edge pixels' centres (align_corners) or their outer edges, repeatedly.
    const double low = o.align_corners ? 0.0 : -0.5, span = o.align_corners ? n - 1 : n;
    if (span <= 0) return x.zeros_like();
    const T distance = (x - low).abs();
    const T flips = (distance / span).floor();
    const T extra = distance - flips * span;
    const auto odd = flips.rem(2.0).gt(0.5);
    x = (extra + low).mask_where(odd, (extra * -1.0) + (span + low));
  }
  if (o.padding_mode != GridPadding::zeros) x = x.clamp(0.0, n - 1);
  return x;
}
}  // namespace detail

// Samples input [N, C, H, W] at grid [N, H_out, W_out, 2] (x, y in [-1, 1]: -1 the left / top
// edge, 1 the right / bottom one) → [N, C, H_out, W_out] (torch.nn.functional.grid_sample,
// 2-d, bilinear or nearest). Outside the input: zeros, the border value, or the reflection.
// Differentiable in the input and, for bilinear, in the grid.
template <Backend B>
Tensor<B, 4> grid_sample(const Tensor<B, 4>& input, const Tensor<B, 4>& grid, const GridSampleOptions& o = {}) {
  KILN_CHECK(grid.dim(3) == 2 && grid.dim(0) == input.dim(0),
             "grid_sample: grid {} must be [N, H_out, W_out, 2] for input {} [N, C, H, W]", grid.shape(), input.shape());
  KILN_CHECK(input.dim(2) > 0 && input.dim(3) > 0, "grid_sample: input {} has an empty spatial dim", input.shape());
  const std::int64_t n = input.dim(0), c = input.dim(1), h = input.dim(2), w = input.dim(3);
  const std::int64_t ho = grid.dim(1), wo = grid.dim(2), points = ho * wo;
  const auto coordinate = [&](std::int64_t i) { return grid.narrow(3, i, 1).template reshape<2>({n, points}); };
  const Tensor<B, 2> x = detail::grid_to_pixels(coordinate(0), w, o), y = detail::grid_to_pixels(coordinate(1), h, o);
  const auto planes = input.template reshape<3>({n, c, h * w});
  // The input at pixel (cx, cy) for every point, times `weight`, zero where it lies outside.
  auto corner = [&](const Tensor<B, 2>& cx, const Tensor<B, 2>& cy, const Tensor<B, 2>& weight) {
    const auto inside = cx.ge(0.0).logical_and(cx.le(static_cast<double>(w - 1)))
                            .logical_and(cy.ge(0.0))
                            .logical_and(cy.le(static_cast<double>(h - 1)));
    const auto index = (cy.clamp(0.0, static_cast<double>(h - 1)) * static_cast<double>(w) +
                        cx.clamp(0.0, static_cast<double>(w - 1)))
                           .to_int()
                           .template reshape<3>({n, 1, points})
                           .expand_as(Shape{n, c, points});
    const auto kept = weight.mask_fill(inside.logical_not(), 0.0).template reshape<3>({n, 1, points});
    return planes.gather(2, index) * kept.expand_as(Shape{n, c, points});
  };
  Tensor<B, 3> out = [&] {
    if (o.mode == GridSampleMode::nearest) {
      const auto rx = x.round(), ry = y.round();  // zero gradient
      return corner(rx, ry, rx.ones_like());
    }
    const auto x0 = x.floor(), y0 = y.floor();  // zero gradient: the weights carry the grid's
    const auto x1 = x0 + 1.0, y1 = y0 + 1.0;
    const auto east = x - x0, south = y - y0, west = x1 - x, north = y1 - y;
    return corner(x0, y0, west * north) + corner(x1, y0, east * north) + corner(x0, y1, west * south) +
           corner(x1, y1, east * south);
  }();
  return out.template reshape<4>({n, c, ho, wo});
}

// The sampling grid [N, H, W, 2] of the affine maps theta [N, 2, 3] over an output of
// size {N, C, H, W} (torch.nn.functional.affine_grid, 2-d): each output pixel's normalized
// (x, y, 1) times thetaᵀ. Differentiable in theta.
template <Backend B>
Tensor<B, 4> affine_grid(const Tensor<B, 3>& theta, const std::array<std::int64_t, 4>& size, bool align_corners = false) {
  KILN_CHECK(theta.dim(1) == 2 && theta.dim(2) == 3 && theta.dim(0) == size[0],
             "affine_grid: theta {} must be [N, 2, 3] for size [{}, {}, {}, {}]", theta.shape(), size[0], size[1],
             size[2], size[3]);
  KILN_CHECK(size[2] > 0 && size[3] > 0, "affine_grid: size [{}, {}, {}, {}] has an empty spatial dim", size[0],
             size[1], size[2], size[3]);
  const std::int64_t n = size[0], h = size[2], w = size[3];
  // Pixel centres in [-1, 1]: the ends at the edge pixels' centres with align_corners, inside by
  // half a pixel without.
  auto positions = [&](std::int64_t count) {
    std::vector<double> p(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      const double t = count == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(count - 1);
      p[static_cast<std::size_t>(i)] = align_corners ? t : t * static_cast<double>(count - 1) / static_cast<double>(count);
    }
    return p;
  };
  const std::vector<double> xs = positions(w), ys = positions(h);
  std::vector<double> base;
  base.reserve(static_cast<std::size_t>(h * w * 3));
  for (const double yv : ys)
    for (const double xv : xs) base.insert(base.end(), {xv, yv, 1.0});
  const auto points = Tensor<B, 3>::from_data(TensorData::from(base, Shape{1, h * w, 3}).convert(theta.dtype()),
                                              theta.device())
                          .expand_as(Shape{n, h * w, 3});
  return points.matmul(theta.transpose()).template reshape<4>({n, h, w, 2});
}

}  // namespace kiln::functional

namespace kiln::nn {

// torch.nn.MaxUnpool2d(kernel_size, stride = kernel_size, padding = 0): forward(x, indices)
// unpools to (H - 1) stride - 2 padding + kernel (per dim), or to the output size given (for
// a pooled input whose size the default does not recover).
template <class B> struct MaxUnpool2d {
  std::array<std::int64_t, 2> kernel{2, 2}, stride{2, 2}, padding{0, 0};
  KILN_MODULE(kernel, stride, padding)

  MaxUnpool2d() = default;
  MaxUnpool2d(std::array<std::int64_t, 2> kernel_size, std::optional<std::array<std::int64_t, 2>> stride_ = {},
              std::array<std::int64_t, 2> padding_ = {0, 0})
      : kernel(kernel_size), stride(stride_.value_or(kernel_size)), padding(padding_) {
    KILN_CHECK(kernel[0] > 0 && kernel[1] > 0 && stride[0] > 0 && stride[1] > 0 && padding[0] >= 0 && padding[1] >= 0,
               "nn::MaxUnpool2d: kernel [{}, {}] and stride [{}, {}] must be positive, padding [{}, {}] >= 0", kernel[0],
               kernel[1], stride[0], stride[1], padding[0], padding[1]);
  }

  Tensor<B, 4> forward(const Tensor<B, 4>& x, const Tensor<B, 4, Int>& indices,
                       std::optional<std::array<std::int64_t, 2>> output_size = {}) const {
    std::array<std::int64_t, 2> size{};
    for (std::size_t i = 0; i < 2; ++i) size[i] = (x.dim(2 + i) - 1) * stride[i] - 2 * padding[i] + kernel[i];
    if (output_size) {
      // torch accepts an output size within a stride of the default one.
      for (std::size_t i = 0; i < 2; ++i)
        KILN_CHECK((*output_size)[i] >= size[i] - stride[i] && (*output_size)[i] <= size[i] + stride[i],
                   "nn::MaxUnpool2d: output size [{}, {}] for input {} must lie within a stride of [{}, {}]",
                   (*output_size)[0], (*output_size)[1], x.shape(), size[0], size[1]);
      size = *output_size;
    }
    return functional::max_unpool2d(x, indices, size);
  }
};

// torch.nn.Upsample's arguments: an output size, or a scale factor per spatial dim (the
// output floor(in * scale)), and the interpolation.
struct UpsampleOptions {
  std::optional<std::array<std::int64_t, 2>> size;
  std::optional<std::array<double, 2>> scale_factor;
  ops::InterpolateMode mode = ops::InterpolateMode::nearest;
  bool align_corners = false;
};

// torch.nn.Upsample on [N, C, H, W] (or [N, C, L], with the first entries of size /
// scale_factor). A scale factor samples as for the output size it gives, which is torch's
// recompute_scale_factor=True; for integer factors (2.0, 3.0) that is also torch's default.
template <class B> struct Upsample {
  UpsampleOptions options;
  KILN_MODULE(options)

  Upsample() = default;
  explicit Upsample(const UpsampleOptions& o) : options(o) {
    KILN_CHECK(o.size.has_value() != o.scale_factor.has_value(),
               "nn::Upsample: give either size or scale_factor, not {}", o.size ? "both" : "neither");
    if (o.scale_factor)
      KILN_CHECK((*o.scale_factor)[0] > 0 && (*o.scale_factor)[1] > 0 && std::isfinite((*o.scale_factor)[0]) &&
                     std::isfinite((*o.scale_factor)[1]),
                 "nn::Upsample: scale_factor [{}, {}] must be finite and > 0", (*o.scale_factor)[0],
                 (*o.scale_factor)[1]);
  }

  Tensor<B, 4> forward(const Tensor<B, 4>& x) const {
    return functional::interpolate(x, {extent(x.dim(2), 0), extent(x.dim(3), 1)}, {options.mode, options.align_corners});
  }
  Tensor<B, 3> forward(const Tensor<B, 3>& x) const {
    return functional::interpolate(x, extent(x.dim(2), 0), {options.mode, options.align_corners});
  }

 private:
  std::int64_t extent(std::int64_t in, std::size_t i) const {
    if (options.size) return (*options.size)[i];
    return static_cast<std::int64_t>(std::floor(static_cast<double>(in) * (*options.scale_factor)[i]));
  }
};

// torch.nn.PixelShuffle(upscale_factor): [*, C r², H, W] → [*, C, H r, W r].
template <class B> struct PixelShuffle {
  std::int64_t upscale_factor = 1;
  KILN_MODULE(upscale_factor)
  PixelShuffle() = default;
  explicit PixelShuffle(std::int64_t r) : upscale_factor(r) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return functional::pixel_shuffle(x, upscale_factor);
  }
};

// torch.nn.PixelUnshuffle(downscale_factor): [*, C, H r, W r] → [*, C r², H, W].
template <class B> struct PixelUnshuffle {
  std::int64_t downscale_factor = 1;
  KILN_MODULE(downscale_factor)
  PixelUnshuffle() = default;
  explicit PixelUnshuffle(std::int64_t r) : downscale_factor(r) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return functional::pixel_unshuffle(x, downscale_factor);
  }
};

// torch.nn.Unfold(kernel_size, dilation, padding, stride): [N, C, H, W] → the windows as
// columns [N, C kh kw, L].
template <class B> struct Unfold {
  std::array<std::int64_t, 2> kernel_size{1, 1};
  functional::UnfoldOptions options;
  KILN_MODULE(kernel_size, options)
  Unfold() = default;
  explicit Unfold(std::array<std::int64_t, 2> kernel, const functional::UnfoldOptions& o = {})
      : kernel_size(kernel), options(o) {}
  Tensor<B, 3> forward(const Tensor<B, 4>& x) const { return functional::unfold(x, kernel_size, options); }
};

// torch.nn.Fold(output_size, kernel_size, dilation, padding, stride): columns
// [N, C kh kw, L] summed back into [N, C, H, W] of output_size.
template <class B> struct Fold {
  std::array<std::int64_t, 2> output_size{1, 1}, kernel_size{1, 1};
  functional::UnfoldOptions options;
  KILN_MODULE(output_size, kernel_size, options)
  Fold() = default;
  Fold(std::array<std::int64_t, 2> output, std::array<std::int64_t, 2> kernel, const functional::UnfoldOptions& o = {})
      : output_size(output), kernel_size(kernel), options(o) {}
  Tensor<B, 4> forward(const Tensor<B, 3>& columns) const {
    return functional::fold(columns, output_size, kernel_size, options);
  }
};

}  // namespace kiln::nn
