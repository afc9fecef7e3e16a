// Layers that resample the spatial dims, with torch.nn's meaning: Upsample (torch.nn.Upsample
// over functional::interpolate) and MaxUnpool2d (the partial inverse of MaxPool2d, from the
// indices max_pool2d_with_indices returns), and functional::max_unpool2d. Differentiable
// and on every backend: unpooling is a scatter of the pooled values into zeros.
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/tensor/pool.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

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

}  // namespace kiln::nn
