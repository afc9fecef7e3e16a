#include "image_limits.hpp"

#include "kiln/core/error.hpp"

// Debian's libstb provides the compiled decoders (libstb.so); this is the declarations only.
#include <stb_image.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kiln::data::detail {

namespace {

constexpr std::string_view reader = "read_image";
// stb_image's STBI_MAX_DIMENSIONS: it refuses longer sides itself, but a PNM header with a
// longer number overflows its integer parsing before that, so it is checked here first.
constexpr std::uint64_t max_side = std::uint64_t{1} << 24;

std::uint64_t le16(const std::uint8_t* at) { return std::uint64_t{at[0]} | (std::uint64_t{at[1]} << 8); }
std::uint64_t le32(const std::uint8_t* at) { return le16(at) | (le16(at + 2) << 16); }

// Sums and products of header fields, saturating instead of wrapping around.
std::uint64_t times(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? UINT64_MAX : out;
}
std::uint64_t plus(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? UINT64_MAX : out;
}
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// What a file's header says, as far as the checks need it.
struct ImageHeader {
  std::string_view format = "image";
  bool dims_known = false;  // false: stbi_info reads them
  std::uint64_t width = 0, height = 0;
  std::uint64_t min_bytes = 0;  // the least the file must hold for its pixels (0: no bound)
  std::string layout;           // how min_bytes was counted, for the error
  // What a pixel costs while decoding, in units of an 8-bit one: stb_image decodes a 16-bit
  // PNG at 16 bits (twice the memory) before it converts to 8.
  std::uint64_t pixel_weight = 1;
};

bool starts_with(std::span<const std::uint8_t> bytes, std::string_view magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin(), [](char a, auto b) {
           return static_cast<std::uint8_t>(a) == b;
         });
}

// "BM" and one of the five header sizes, as stb_image tests for BMP.
bool is_bmp(std::span<const std::uint8_t> bytes) {
  if (!starts_with(bytes, "BM") || bytes.size() < 18) return false;
  const std::uint64_t size = le32(bytes.data() + 14);
  return size == 12 || size == 40 || size == 56 || size == 108 || size == 124;
}

// BMP as stb_image reads it (it refuses the RLE and embedded JPEG/PNG kinds): from the
// data offset, `height` rows of `width` pixels of 1 to 32 bits, each row padded to 4 bytes
// (the last row's padding may be missing).
void read_bmp(std::span<const std::uint8_t> bytes, ImageHeader& out) {
  out.format = "BMP";
  const std::uint8_t* at = bytes.data();
  const std::uint64_t offset = le32(at + 10), header_size = le32(at + 14);
  std::uint64_t bits = 0, compression = 0;
  if (header_size == 12) {
    if (bytes.size() < 26) return;
    out.width = le16(at + 18);
    out.height = le16(at + 20);
    bits = le16(at + 24);
  } else {
    if (bytes.size() < 34) return;
    out.width = le32(at + 18);
    // Negative: the rows are stored top-down.
    out.height = static_cast<std::uint64_t>(std::llabs(static_cast<std::int32_t>(le32(at + 22))));
    bits = le16(at + 28);
    compression = le32(at + 30);
  }
  out.dims_known = true;
  if (compression != 0 && compression != 3) return;  // stb_image refuses these itself
  // stb_image reads 16 and 24 bits as they are, 1, 4 and 8 through a palette, and any
  // other depth above 16 as 32-bit words.
  const std::uint64_t read_bits = bits == 1 || bits == 4 || bits == 8 || bits == 16 || bits == 24 ? bits
                                  : bits > 16                                                       ? 32
                                                                                                    : 0;
  if (read_bits == 0) return;  // refused by stb_image
  const std::uint64_t row = ceil_div(times(out.width, read_bits), 8), padded = ceil_div(row, 4) * 4;
  const std::uint64_t start = std::max(offset, 14 + header_size);
  out.min_bytes = plus(start, out.height == 0 ? 0 : plus(times(out.height - 1, padded), row));
  out.layout = fmt::format("{} bits per pixel from byte {}, rows padded to 4 bytes", bits, start);
}

// Binary PGM (P5) and PPM (P6): a text header (magic, width, height, max value, with
// comments) and one whitespace byte, then every pixel, 8 bits a channel or 16 when the max
// value is above 255. Parsed as stb_image parses it, so that both agree on where the
// pixels start.
void read_pnm(std::span<const std::uint8_t> bytes, std::string_view name, ImageHeader& out) {
  out.format = bytes[1] == '5' ? "PGM" : "PPM";
  const std::uint64_t channels = bytes[1] == '5' ? 1 : 3;
  std::size_t next = 2;
  const auto at_end = [&] { return next >= bytes.size(); };
  // Past the end stb_image reads zeros.
  const auto get = [&] { return at_end() ? '\0' : static_cast<char>(bytes[next++]); };
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  char c = get();
  const auto skip_space = [&] {
    for (;;) {
      while (!at_end() && is_space(c)) c = get();
      if (at_end() || c != '#') break;
      while (!at_end() && c != '\n' && c != '\r') c = get();
    }
  };
  // Saturates at 10^12, far above every limit, where stb_image's int would overflow.
  const auto number = [&] {
    std::uint64_t value = 0;
    while (!at_end() && c >= '0' && c <= '9') {
      value = std::min<std::uint64_t>(value * 10 + static_cast<std::uint64_t>(c - '0'), 1'000'000'000'000);
      c = get();
    }
    return value;
  };
  skip_space();
  out.width = number();
  skip_space();
  out.height = number();
  skip_space();
  const std::uint64_t max_value = number();
  out.dims_known = true;
  KILN_CHECK(max_value <= 65535, "{}: {}: the {} header's max value is {}; it is at most 65535 (16 bits)", reader, name,
             out.format, max_value);
  const std::uint64_t channel_bytes = max_value > 255 ? 2 : 1;
  out.min_bytes = plus(next, times(times(out.width, out.height), channels * channel_bytes));
  out.layout = fmt::format("{} channel{} of {} bits after a {}-byte header", channels, channels == 1 ? "" : "s",
                           8 * channel_bytes, next);
}

// TGA as stb_image recognizes it (the format has no magic number): colour-mapped types 1
// and 9, true-colour and grey types 2, 3, 10 and 11 (the last two RLE), 8 to 32 bits.
bool is_tga(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 18) return false;
  const std::uint8_t* at = bytes.data();
  const int mapped = at[1], type = at[2], bits = at[16];
  const auto depth = [](int b) { return b == 8 || b == 15 || b == 16 || b == 24 || b == 32; };
  if (mapped > 1) return false;
  if (mapped == 1 && !((type == 1 || type == 9) && depth(at[7]) && (bits == 8 || bits == 16))) return false;
  if (mapped == 0 && type != 2 && type != 3 && type != 10 && type != 11) return false;
  return le16(at + 12) >= 1 && le16(at + 14) >= 1 && depth(bits);
}

// An 18-byte header, an ID of byte 0's length, the colour map (when there is one), then
// every pixel of ceil(bits / 8) bytes, or RLE packets of at most 128 pixels, each at least
// a count byte and one pixel.
void read_tga(std::span<const std::uint8_t> bytes, ImageHeader& out) {
  out.format = "TGA";
  const std::uint8_t* at = bytes.data();
  const bool mapped = at[1] == 1, rle = at[2] >= 8;
  out.width = le16(at + 12);
  out.height = le16(at + 14);
  out.dims_known = true;
  const std::uint64_t pixel_bytes = ceil_div(at[16], 8);
  std::uint64_t start = 18 + at[0];
  if (mapped) start += le16(at + 3) + le16(at + 5) * ceil_div(at[7], 8);  // skipped entries, then the map
  const std::uint64_t pixels = out.width * out.height;
  out.min_bytes = start + (rle ? ceil_div(pixels, 128) * (1 + pixel_bytes) : pixels * pixel_bytes);
  out.layout = fmt::format("{}{} byte{} per pixel from byte {}", rle ? "RLE packets of at most 128 pixels, " : "",
                           pixel_bytes, pixel_bytes == 1 ? "" : "s", start);
}

ImageHeader read_header(std::span<const std::uint8_t> bytes, std::string_view name) {
  ImageHeader out;
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) {
    out.format = "PNG";  // stb_image checks that the compressed data is complete
    // The IHDR chunk comes first: its bit depth is byte 24.
    if (bytes.size() > 24 && bytes[24] == 16) out.pixel_weight = 2;
  } else if (is_bmp(bytes)) {
    read_bmp(bytes, out);
  } else if (starts_with(bytes, "GIF8")) {
    out.format = "GIF";  // frames may be smaller than the screen: no bound on the bytes
  } else if (starts_with(bytes, "\xff\xd8")) {
    out.format = "JPEG";
  } else if (starts_with(bytes, "P5") || starts_with(bytes, "P6")) {
    read_pnm(bytes, name, out);
  } else if (is_tga(bytes)) {
    read_tga(bytes, out);
  }
  return out;
}

}  // namespace

void fail_to_decode(std::span<const std::uint8_t> bytes, std::string_view name) {
  KILN_FAIL("{}: {}: cannot decode ({} bytes, starting {}): {}", reader, name, bytes.size(),
            fmt::format("{:02x}", fmt::join(bytes.first(std::min<std::size_t>(bytes.size(), 8)), " ")),
            stbi_failure_reason());
}

void check_image_header(std::span<const std::uint8_t> bytes, std::string_view name, std::uint64_t max_pixels,
                        std::uint64_t max_pixels_per_byte) {
  ImageHeader header = read_header(bytes, name);
  if (!header.dims_known) {
    int width = 0, height = 0, channels = 0;
    if (stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels) == 0)
      fail_to_decode(bytes, name);
    header.width = static_cast<std::uint64_t>(std::max(width, 0));
    header.height = static_cast<std::uint64_t>(std::max(height, 0));
    if (header.format == "JPEG") {
      // Every 8 × 8 block of the full-resolution component costs at least one bit (a DC
      // code); stb_image would fill what is missing with grey instead of failing.
      header.min_bytes = ceil_div(ceil_div(header.width, 8) * ceil_div(header.height, 8), 8);
      header.layout = "at least one bit per 8 × 8 block";
    }
  }
  const std::uint64_t width = header.width, height = header.height;
  KILN_CHECK(width <= max_side && height <= max_side,
             "{}: {}: the {} header says {} × {} pixels: a side longer than {} pixels, stb_image's limit", reader, name,
             header.format, width, height, max_side);
  KILN_CHECK(width > 0 && height > 0, "{}: {}: the {} header says {} × {} pixels: an image without pixels", reader,
             name, header.format, width, height);
  KILN_CHECK(width * height <= max_pixels,
             "{}: {}: a {} × {} {} has {} pixels, more than the limit of {}; pass a larger max_pixels to read_image "
             "or decode_image (or set ImageFolderOptions::max_pixels) to read it",
             reader, name, width, height, header.format, width * height, max_pixels);
  KILN_CHECK(bytes.size() >= header.min_bytes,
             "{}: {}: truncated file or lying header: a {} × {} {} ({}) needs at least {} bytes, the file has {} ({} "
             "missing)",
             reader, name, width, height, header.format, header.layout, header.min_bytes, bytes.size(),
             header.min_bytes - bytes.size());
  // A compressed format's minimum lets one byte stand for hundreds of pixels (a flat JPEG,
  // a PNG of zeros, a GIF screen larger than its frames).
  const std::uint64_t pixels = width * height * header.pixel_weight;
  KILN_CHECK(max_pixels_per_byte == 0 || pixels <= min_pixels_per_byte_check ||
                 pixels <= times(bytes.size(), max_pixels_per_byte),
             "{}: {}: a {} × {} {} of {} bytes has {} pixels per byte{}, more than the limit of {} (images of more "
             "than {} pixels): refused as a likely decompression bomb; pass a larger max_pixels_per_byte to "
             "read_image or decode_image (or set ImageFolderOptions::max_pixels_per_byte; 0 turns the check off) "
             "to read it",
             reader, name, width, height, header.format, bytes.size(), ceil_div(pixels, bytes.size()),
             header.pixel_weight == 2 ? " (16-bit pixels count twice)" : "", max_pixels_per_byte,
             min_pixels_per_byte_check);
}

}  // namespace kiln::data::detail
