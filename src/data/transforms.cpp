#include "kiln/data/transforms.hpp"

#include "kiln/core/error.hpp"

#include <cstring>

namespace kiln::data {

namespace {

// An image's extents, with an [H, W] image seen as one channel.
struct Extents {
  std::int64_t channels, height, width;
};

Extents extents(const char* op, const TensorData& image) {
  const Shape& s = image.shape();
  KILN_CHECK(s.rank() == 2 || s.rank() == 3, "{}: the image has shape {}; expected [H, W] or [C, H, W]", op, s);
  return s.rank() == 2 ? Extents{1, s[0], s[1]} : Extents{s[0], s[1], s[2]};
}

}  // namespace

TensorData to_tensor(const TensorData& image, Layout layout) {
  const Shape& s = image.shape();
  KILN_CHECK(s.rank() == 2 || s.rank() == 3,
             "to_tensor: the image has shape {}; expected [H, W], [C, H, W] or [H, W, C]", s);
  KILN_CHECK(image.dtype() == DType::u8 || is_float(image.dtype()),
             "to_tensor: the image is {}; expected u8 pixels or floating point", image.dtype());
  // Pixels as f32 in the source order: u8 / 255 (as torchvision's to_tensor), floats as they are.
  std::vector<float> values;
  if (image.dtype() == DType::u8) {
    const auto in = image.as<std::uint8_t>();
    values.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) values[i] = static_cast<float>(in[i]) / 255.0f;
  } else {
    values = image.to_vec<float>();
  }
  if (s.rank() == 2) return TensorData::from(values, Shape{1, s[0], s[1]});
  if (layout == Layout::chw) return TensorData::from(values, s);
  const std::int64_t h = s[0], w = s[1], c = s[2];
  std::vector<float> chw(values.size());
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t k = 0; k < c; ++k)
        chw[static_cast<std::size_t>((k * h + y) * w + x)] = values[static_cast<std::size_t>((y * w + x) * c + k)];
  return TensorData::from(chw, Shape{c, h, w});
}

TensorData normalize(const TensorData& image, std::span<const float> mean, std::span<const float> std) {
  const Extents e = extents("normalize", image);
  KILN_CHECK(is_float(image.dtype()), "normalize: the image is {}; convert it to float first (to_tensor)",
             image.dtype());
  const auto channels = static_cast<std::size_t>(e.channels);
  KILN_CHECK(mean.size() == std.size() && (mean.size() == 1 || mean.size() == channels),
             "normalize: {} means and {} stds for an image of {} channels (shape {}); give one of each per channel, "
             "or one for all",
             mean.size(), std.size(), channels, image.shape());
  for (std::size_t c = 0; c < std.size(); ++c) KILN_CHECK(std[c] != 0.0f, "normalize: std[{}] is zero", c);
  std::vector<float> values = image.to_vec<float>();
  const auto plane = static_cast<std::size_t>(e.height * e.width);
  for (std::size_t c = 0; c < channels; ++c) {
    const float m = mean[mean.size() == 1 ? 0 : c], sd = std[std.size() == 1 ? 0 : c];
    for (std::size_t i = c * plane; i < (c + 1) * plane; ++i) values[i] = (values[i] - m) / sd;
  }
  return TensorData::from(values, image.shape());
}

TensorData crop(const TensorData& image, std::int64_t top, std::int64_t left, std::int64_t height, std::int64_t width,
                std::int64_t padding) {
  const Extents e = extents("crop", image);
  KILN_CHECK(padding >= 0, "crop: padding {} is negative", padding);
  KILN_CHECK(height > 0 && width > 0, "crop: the window {}x{} is empty", height, width);
  const std::int64_t padded_h = e.height + 2 * padding, padded_w = e.width + 2 * padding;
  KILN_CHECK(top >= 0 && left >= 0 && top + height <= padded_h && left + width <= padded_w,
             "crop: the window {}x{} at ({}, {}) does not fit in the {}x{} image padded by {} ({}x{})", height, width,
             top, left, e.height, e.width, padding, padded_h, padded_w);
  const std::size_t element = dtype_size(image.dtype());
  std::vector<std::byte> out(static_cast<std::size_t>(e.channels * height * width) * element, std::byte{0});
  const std::byte* in = image.bytes().data();
  for (std::int64_t c = 0; c < e.channels; ++c) {
    for (std::int64_t y = 0; y < height; ++y) {
      const std::int64_t sy = top + y - padding;  // row in the unpadded image
      if (sy < 0 || sy >= e.height) continue;
      // Columns of the window that fall inside the unpadded image.
      const std::int64_t x0 = std::max<std::int64_t>(0, padding - left);
      const std::int64_t x1 = std::min<std::int64_t>(width, e.width + padding - left);
      if (x1 <= x0) continue;
      const std::int64_t sx = left + x0 - padding;
      std::memcpy(out.data() + static_cast<std::size_t>((c * height + y) * width + x0) * element,
                  in + static_cast<std::size_t>((c * e.height + sy) * e.width + sx) * element,
                  static_cast<std::size_t>(x1 - x0) * element);
    }
  }
  const Shape shape = image.shape().rank() == 2 ? Shape{height, width} : Shape{e.channels, height, width};
  return TensorData(std::move(out), shape, image.dtype());
}

TensorData horizontal_flip(const TensorData& image) {
  const Extents e = extents("horizontal_flip", image);
  const std::size_t element = dtype_size(image.dtype());
  std::vector<std::byte> out(image.bytes().size());
  const std::byte* in = image.bytes().data();
  for (std::int64_t row = 0; row < e.channels * e.height; ++row)
    for (std::int64_t x = 0; x < e.width; ++x)
      std::memcpy(out.data() + static_cast<std::size_t>(row * e.width + x) * element,
                  in + static_cast<std::size_t>(row * e.width + (e.width - 1 - x)) * element, element);
  return TensorData(std::move(out), image.shape(), image.dtype());
}

// Purposes of the random streams (random.hpp): a crop and a flip with one seed draw independently.
namespace {
constexpr std::uint64_t crop_stream = 3, flip_stream = 4;
}

TensorData random_crop(const TensorData& image, std::int64_t height, std::int64_t width, std::int64_t padding,
                       std::uint64_t seed, Sample sample) {
  const Extents e = extents("random_crop", image);
  KILN_CHECK(padding >= 0, "random_crop: padding {} is negative", padding);
  const std::int64_t room_y = e.height + 2 * padding - height, room_x = e.width + 2 * padding - width;
  KILN_CHECK(height > 0 && width > 0 && room_y >= 0 && room_x >= 0,
             "random_crop: a {}x{} window does not fit in the {}x{} image padded by {}", height, width, e.height,
             e.width, padding);
  const auto bits = sample_bits(seed, crop_stream, sample);
  // Offsets uniform in [0, room] (multiply-shift on 32 random bits each).
  const auto top = static_cast<std::int64_t>((std::uint64_t{bits[0]} * static_cast<std::uint64_t>(room_y + 1)) >> 32);
  const auto left = static_cast<std::int64_t>((std::uint64_t{bits[1]} * static_cast<std::uint64_t>(room_x + 1)) >> 32);
  return crop(image, top, left, height, width, padding);
}

TensorData random_horizontal_flip(const TensorData& image, double p, std::uint64_t seed, Sample sample) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "random_horizontal_flip: probability {} is not in [0, 1]", p);
  (void)extents("random_horizontal_flip", image);
  return uniform01(sample_bits(seed, flip_stream, sample)[0]) < p ? horizontal_flip(image) : image;
}

}  // namespace kiln::data
