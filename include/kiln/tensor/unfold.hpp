// Sliding windows and sub-pixel rearrangement on NCHW tensors (kiln::functional, as
// torch.nn.functional): unfold (im2col), fold (its adjoint, col2im), pixel_shuffle and
// pixel_unshuffle. All are reshapes, permutes, pads and strided slices, so every backend,
// Autodiff and Fusion run and differentiate them with no kernel of their own.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace kiln::functional {

// The window geometry of unfold and fold (torch.nn.functional.unfold's arguments after
// kernel_size, with its defaults), as {height, width} pairs.
struct UnfoldOptions {
  std::array<std::int64_t, 2> dilation{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> stride{1, 1};
};

namespace detail {
// The number of window positions along one dim.
inline std::int64_t windows(const char* op, std::int64_t size, std::int64_t kernel, const UnfoldOptions& o,
                            std::size_t i) {
  KILN_CHECK(kernel > 0 && o.dilation[i] > 0 && o.stride[i] > 0 && o.padding[i] >= 0,
             "{}: kernel {}, dilation {}, stride {} must be positive and padding {} non-negative", op, kernel,
             o.dilation[i], o.stride[i], o.padding[i]);
  const std::int64_t span = o.dilation[i] * (kernel - 1) + 1;
  const std::int64_t padded = size + 2 * o.padding[i];
  KILN_CHECK(padded >= span, "{}: a window of {} does not fit a padded size of {}", op, span, padded);
  return (padded - span) / o.stride[i] + 1;
}
}  // namespace detail

// Every kernel-sized window of an [N, C, H, W] input as a column: [N, C * kh * kw, L], L the
// window count, each column ordered channel-major then row-major within the window
// (torch.nn.functional.unfold, im2col).
template <class B>
Tensor<B, 3> unfold(const Tensor<B, 4>& x, std::array<std::int64_t, 2> kernel_size, const UnfoldOptions& o = {}) {
  const Shape s = x.shape();
  const std::int64_t n = s[0], c = s[1];
  const std::int64_t oh = detail::windows("unfold", s[2], kernel_size[0], o, 0);
  const std::int64_t ow = detail::windows("unfold", s[3], kernel_size[1], o, 1);
  const Tensor<B, 4> padded = x.pad({o.padding[1], o.padding[1], o.padding[0], o.padding[0]});
  std::vector<Tensor<B, 5>> pieces;
  for (std::int64_t i = 0; i < kernel_size[0]; ++i) {
    for (std::int64_t j = 0; j < kernel_size[1]; ++j) {
      const std::vector<ops::SliceRange> ranges{
          {0, n, 1}, {0, c, 1}, {i * o.dilation[0], oh, o.stride[0]}, {j * o.dilation[1], ow, o.stride[1]}};
      pieces.push_back(Tensor<B, 4>(B::slice(padded.primitive(), ranges)).unsqueeze_dim(2));
    }
  }
  return cat(pieces, 2).template reshape<3>({n, c * kernel_size[0] * kernel_size[1], oh * ow});
}

// Sums columns [N, C * kh * kw, L] back into an [N, C, H, W] image of `output_size` {H, W},
// overlapping windows adding up (torch.nn.functional.fold, col2im): the adjoint of unfold.
template <class B>
Tensor<B, 4> fold(const Tensor<B, 3>& columns, std::array<std::int64_t, 2> output_size,
                  std::array<std::int64_t, 2> kernel_size, const UnfoldOptions& o = {}) {
  const Shape s = columns.shape();
  const std::int64_t kernel = kernel_size[0] * kernel_size[1];
  const std::int64_t oh = detail::windows("fold", output_size[0], kernel_size[0], o, 0);
  const std::int64_t ow = detail::windows("fold", output_size[1], kernel_size[1], o, 1);
  KILN_CHECK(kernel > 0 && s[1] % kernel == 0,
             "fold: dim 1 of shape {} must be a multiple of the kernel's {} x {} elements", s, kernel_size[0],
             kernel_size[1]);
  KILN_CHECK(s[2] == oh * ow, "fold: {} columns given, an output of {} x {} with these windows has {}", s[2],
             output_size[0], output_size[1], oh * ow);
  const std::int64_t n = s[0], c = s[1] / kernel;
  const std::int64_t ph = output_size[0] + 2 * o.padding[0], pw = output_size[1] + 2 * o.padding[1];
  const Tensor<B, 5> pieces = columns.template reshape<5>({n, c, kernel, oh, ow});
  Tensor<B, 4> image(provided::full<B>(Shape{n, c, ph, pw}, 0.0, columns.dtype(), columns.device()));
  for (std::int64_t i = 0; i < kernel_size[0]; ++i) {
    for (std::int64_t j = 0; j < kernel_size[1]; ++j) {
      const std::vector<ops::SliceRange> ranges{
          {0, n, 1}, {0, c, 1}, {i * o.dilation[0], oh, o.stride[0]}, {j * o.dilation[1], ow, o.stride[1]}};
      const Tensor<B, 4> piece = pieces.narrow(2, i * kernel_size[1] + j, 1).squeeze_dim(2);
      const Tensor<B, 4> region(B::slice(image.primitive(), ranges));
      image = Tensor<B, 4>(B::slice_assign(image.primitive(), ranges, region.add(piece).primitive()));
    }
  }
  return image.narrow(2, o.padding[0], output_size[0]).narrow(3, o.padding[1], output_size[1]);
}

// [*, C * r * r, H, W] → [*, C, H * r, W * r]: each group of r * r channels becomes an r x r
// block of pixels (torch.nn.functional.pixel_shuffle).
template <class B, std::size_t D, class K> Tensor<B, D, K> pixel_shuffle(const Tensor<B, D, K>& x, std::int64_t r)
  requires(D >= 3)
{
  const Shape s = x.shape();
  const std::int64_t c = s[D - 3], h = s[D - 2], w = s[D - 1];
  KILN_CHECK(r > 0 && c % (r * r) == 0, "pixel_shuffle: {} channels of shape {} do not divide by the factor {} squared",
             c, s, r);
  const std::int64_t batch = x.numel() / std::max<std::int64_t>(c * h * w, 1);
  const auto blocks = B::reshape(x.primitive(), Shape{batch, c / (r * r), r, r, h, w});
  const auto moved = B::permute(blocks, std::vector<std::int64_t>{0, 1, 4, 2, 5, 3});
  std::vector<std::int64_t> out = s.to_vector();
  out[D - 3] = c / (r * r);
  out[D - 2] = h * r;
  out[D - 1] = w * r;
  return Tensor<B, D, K>(B::reshape(moved, Shape(out)));
}

// [*, C, H * r, W * r] → [*, C * r * r, H, W]: the inverse of pixel_shuffle
// (torch.nn.functional.pixel_unshuffle).
template <class B, std::size_t D, class K> Tensor<B, D, K> pixel_unshuffle(const Tensor<B, D, K>& x, std::int64_t r)
  requires(D >= 3)
{
  const Shape s = x.shape();
  const std::int64_t c = s[D - 3], h = s[D - 2], w = s[D - 1];
  KILN_CHECK(r > 0 && h % r == 0 && w % r == 0,
             "pixel_unshuffle: the height and width of shape {} do not divide by the factor {}", s, r);
  const std::int64_t batch = x.numel() / std::max<std::int64_t>(c * h * w, 1);
  const auto blocks = B::reshape(x.primitive(), Shape{batch, c, h / r, r, w / r, r});
  const auto moved = B::permute(blocks, std::vector<std::int64_t>{0, 1, 3, 5, 2, 4});
  std::vector<std::int64_t> out = s.to_vector();
  out[D - 3] = c * r * r;
  out[D - 2] = h / r;
  out[D - 1] = w / r;
  return Tensor<B, D, K>(B::reshape(moved, Shape(out)));
}

}  // namespace kiln::functional
