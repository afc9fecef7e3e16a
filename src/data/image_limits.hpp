// Checks on an image file's header before stb_image decodes it. stb_image trusts the
// header: a 54-byte BMP header saying 26000 × 26000 decodes to 2 GB of zeros, and a short
// PGM or TGA to pixels that are whatever the heap held before. So the header is read
// first: the pixel count must be within the caller's limit, and an uncompressed file must
// hold every pixel its header announces (a compressed one, the least its format needs).
#pragma once

#include "kiln/data/image_folder.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace kiln::data::detail {

// Throws a kiln::Error naming read_image, `name`, the format, the size and the bytes at
// fault when the header of `bytes` announces more than `max_pixels` pixels, more than
// stb_image's 2^24 per side, no pixels, or more pixel bytes than the file holds. A header
// stb_image cannot read at all is the same error as a failed decode.
// Then, for an image of more than min_pixels_per_byte_check pixels, the same when it has
// more than `max_pixels_per_byte` pixels per byte of the file (0: no such check).
void check_image_header(std::span<const std::uint8_t> bytes, std::string_view name, std::uint64_t max_pixels,
                        std::uint64_t max_pixels_per_byte);

// The error for bytes stb_image could not decode: their size, first bytes and stb's reason.
[[noreturn]] void fail_to_decode(std::span<const std::uint8_t> bytes, std::string_view name);

}  // namespace kiln::data::detail
