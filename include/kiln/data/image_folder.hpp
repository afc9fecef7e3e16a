// Image files sorted into one folder per class (root/cat/1.png, root/dog/2.jpg...): the
// class names are the subfolder names in sorted order, their labels 0, 1, 2... Images are
// decoded when read (by loader workers, in parallel) with stb_image: PNG, JPEG, BMP, GIF,
// TGA, PNM. Compiled into kiln::data.
#pragma once

#include "kiln/core/tensor_data.hpp"
#include "kiln/data/image.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

// The most pixels an image may have unless the caller allows more: 8192 × 8192, which
// decodes to at most 256 MiB (RGBA). A file whose header asks for more is refused before
// anything is allocated, as is one too short for the pixels its header announces.
inline constexpr std::uint64_t default_max_image_pixels = std::uint64_t{1} << 26;
// An image of more than min_pixels_per_byte_check pixels (2048 × 2048) may have at most
// this many pixels per byte of its file. Photographs have 1 to 5 (a 12-megapixel JPEG
// takes 2 to 5 MB), while a flat JPEG or a PNG of zeros reaches hundreds: a 1 MB file could
// ask for gigabytes of pixels. With the defaults, a file of at most 1 MB decodes to at
// most 8 megapixels.
inline constexpr std::uint64_t default_max_image_pixels_per_byte = 8;
inline constexpr std::uint64_t min_pixels_per_byte_check = std::uint64_t{1} << 22;

// Decodes an image file's bytes into u8 [C, H, W]. `channels` 0 keeps the file's (1 grey,
// 2 grey + alpha, 3 RGB, 4 RGBA); 1 to 4 converts. `name` stands for the file in errors.
TensorData decode_image(std::span<const std::uint8_t> bytes, std::string_view name, int channels = 0,
                        std::uint64_t max_pixels = default_max_image_pixels,
                        std::uint64_t max_pixels_per_byte = default_max_image_pixels_per_byte);
TensorData read_image(const std::filesystem::path& path, int channels = 0,
                      std::uint64_t max_pixels = default_max_image_pixels,
                      std::uint64_t max_pixels_per_byte = default_max_image_pixels_per_byte);

struct ImageFolderOptions {
  int channels = 0;  // as in decode_image; set it when the files differ and batches must match
  // File name endings that count as images (compared without case); other files are skipped.
  std::vector<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga", ".pgm", ".ppm"};
  std::uint64_t max_pixels = default_max_image_pixels;                    // as in decode_image
  std::uint64_t max_pixels_per_byte = default_max_image_pixels_per_byte;  // as in decode_image
};

class ImageFolder {
 public:
  // Lists root's class folders and their image files (sorted); decodes nothing yet. A root
  // without class folders, or a class folder without images, is an error.
  explicit ImageFolder(const std::filesystem::path& root, ImageFolderOptions options = {});

  std::size_t size() const;
  // Decodes image i: u8 [C, H, W] and its class.
  LabeledImage get(std::size_t i) const;

  const std::vector<std::string>& classes() const;
  const std::filesystem::path& path(std::size_t i) const;
  std::int64_t label(std::size_t i) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::data
