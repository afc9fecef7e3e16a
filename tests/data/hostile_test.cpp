// Hostile files against the data readers: image headers that lie about their
// size, CSV that would lose rows or values silently, IDX dims and gzip streams that would
// overflow or inflate without bound, and FIFOs that nobody writes to. Each must give a
// kiln::Error naming the reader, the file and the sizes at fault, at once.
#include "data_test.hpp"
#include "budget.hpp"
#include "fifo_watchdog.hpp"

#include <kiln/data/cifar.hpp>
#include <kiln/data/csv.hpp>
#include <kiln/data/idx.hpp>
#include <kiln/data/image_folder.hpp>

#include <fcntl.h>
#include <stb_image_write.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace kiln::data::test {
namespace {

// ---- images ----

void put_le16(Bytes& out, std::uint32_t value) {
  out.push_back(static_cast<std::uint8_t>(value));
  out.push_back(static_cast<std::uint8_t>(value >> 8));
}
void put_le32(Bytes& out, std::uint32_t value) {
  put_le16(out, value & 0xffff);
  put_le16(out, value >> 16);
}

// The 54-byte header of an uncompressed 24-bit BMP (BITMAPINFOHEADER), pixels at byte 54.
Bytes bmp_header(std::uint32_t width, std::uint32_t height) {
  Bytes out{'B', 'M'};
  put_le32(out, 0);  // file size: stb_image ignores it
  put_le32(out, 0);  // reserved
  put_le32(out, 54);
  put_le32(out, 40);
  put_le32(out, width);
  put_le32(out, height);
  put_le16(out, 1);   // planes
  put_le16(out, 24);  // bits per pixel
  for (int i = 0; i < 6; ++i) put_le32(out, 0);  // no compression, sizes, resolutions, colours
  return out;
}

// The 18-byte header of a TGA without colour map: `type` 2 (RGB), 3 (grey), 10/11 (RLE).
Bytes tga_header(std::uint8_t type, std::uint16_t width, std::uint16_t height, std::uint8_t bits) {
  Bytes out{0, 0, type, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  put_le16(out, width);
  put_le16(out, height);
  out.push_back(bits);
  out.push_back(0x20);  // top-down rows
  return out;
}

Bytes text_bytes(std::string_view text) { return Bytes(text.begin(), text.end()); }

// Collects what stb_image_write's *_to_func writers produce.
void append_to(void* context, void* data, int size) {
  auto* out = static_cast<Bytes*>(context);
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  out->insert(out->end(), bytes, bytes + size);
}

Bytes cut(const Bytes& bytes, std::size_t size) {
  return Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
}

TEST(HostileImages, HeaderOnlyFilesAboveThePixelLimitAreRefused) {
  // 54 bytes saying 26000 × 26000 (stb_image would decode 2 GB of zeros), 19 saying 40000 × 17000.
  EXPECT_KILN_ERROR(decode_image(bmp_header(26000, 26000), "lie.bmp"), "read_image", "lie.bmp", "26000 × 26000 BMP",
                    "676000000 pixels", "more than the limit of 67108864", "max_pixels");
  EXPECT_KILN_ERROR(decode_image(text_bytes("P6\n40000 17000\n255\n"), "lie.ppm"), "read_image", "lie.ppm",
                    "40000 × 17000 PPM", "680000000 pixels", "limit of 67108864");
  // Above the limit, the bytes are checked too.
  EXPECT_KILN_ERROR(decode_image(bmp_header(26000, 26000), "lie.bmp", 0, std::uint64_t{1} << 30), "lie.bmp",
                    "truncated file or lying header", "26000 × 26000 BMP (24 bits per pixel from byte 54",
                    "needs at least 2028000054 bytes, the file has 54");
  EXPECT_KILN_ERROR(decode_image(text_bytes("P6\n40000 17000\n255\n"), "lie.ppm", 0, std::uint64_t{1} << 30),
                    "lie.ppm", "needs at least 2040000019 bytes, the file has 19");
  // Longer sides than stb_image's 2^24, even with no pixels at all, and numbers that would
  // overflow its int.
  EXPECT_KILN_ERROR(decode_image(text_bytes("P5 99999999999999999999 0 255\n"), "long.pgm", 0, UINT64_MAX),
                    "long.pgm", "PGM", "a side longer than 16777216");
  EXPECT_KILN_ERROR(decode_image(text_bytes("P5 2 2 99999999999\n"), "deep.pgm"), "deep.pgm", "max value",
                    "at most 65535");
  EXPECT_KILN_ERROR(decode_image(bmp_header(0, 5), "empty.bmp"), "empty.bmp", "0 × 5 pixels", "without pixels");
}

TEST(HostileImages, FilesShorterThanTheirPixelsAreRefused) {
  // Header-only 64 × 64 PGM and TGA: stb_image would return 4096 pixels of stale heap bytes.
  EXPECT_KILN_ERROR(decode_image(text_bytes("P5\n64 64\n255\n"), "stale.pgm"), "read_image", "stale.pgm",
                    "64 × 64 PGM (1 channel of 8 bits after a 13-byte header)",
                    "needs at least 4109 bytes, the file has 13 (4096 missing)");
  EXPECT_KILN_ERROR(decode_image(tga_header(3, 64, 64, 8), "stale.tga"), "read_image", "stale.tga",
                    "64 × 64 TGA (1 byte per pixel from byte 18)", "needs at least 4114 bytes, the file has 18");
  // RLE: each packet of at most 128 pixels takes a count byte and a pixel.
  EXPECT_KILN_ERROR(decode_image(tga_header(10, 64, 64, 24), "rle.tga"), "rle.tga",
                    "RLE packets of at most 128 pixels", "needs at least 146 bytes");
  // 16-bit PGM: two bytes a channel.
  EXPECT_KILN_ERROR(decode_image(text_bytes("P5 2 2 65535\n"), "deep.pgm"), "deep.pgm", "1 channel of 16 bits",
                    "needs at least 21 bytes, the file has 13");
}

TEST(HostileImages, CompleteFilesStillDecode) {
  // A PGM with a comment, then cut by one byte.
  Bytes pgm = text_bytes("P5\n# made by hand\n3 2\n255\n");
  const std::size_t header = pgm.size();
  for (std::uint8_t v : {10, 20, 30, 40, 50, 60}) pgm.push_back(v);
  const TensorData grey = decode_image(pgm, "ok.pgm");
  EXPECT_EQ(grey.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(values<std::uint8_t>(grey), (Bytes{10, 20, 30, 40, 50, 60}));
  EXPECT_KILN_ERROR(decode_image(cut(pgm, pgm.size() - 1), "cut.pgm"), "cut.pgm",
                    fmt::format("after a {}-byte header", header), "(1 missing)");

  // 16 bits a channel (the values are not checked: stb_image 2.27 reads them little-endian).
  Bytes deep = text_bytes("P5 2 1 65535\n");
  for (std::uint8_t v : {0x12, 0x34, 0xff, 0xff}) deep.push_back(v);
  EXPECT_EQ(decode_image(deep, "deep.pgm").shape(), (Shape{1, 1, 2}));

  // 5 × 3 RGB: rows of 15 bytes padded to 16. The last row's padding may be missing.
  Bytes rgb(5 * 3 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>(7 * i);
  Bytes bmp;
  ASSERT_NE(stbi_write_bmp_to_func(append_to, &bmp, 5, 3, 3, rgb.data()), 0);
  ASSERT_EQ(bmp.size(), 54u + 3 * 16);
  for (const std::size_t size : {bmp.size(), bmp.size() - 1}) {
    const TensorData image = decode_image(cut(bmp, size), "ok.bmp");
    EXPECT_EQ(image.shape(), (Shape{3, 3, 5}));
    EXPECT_EQ(values<std::uint8_t>(image)[1], rgb[3]);  // red of pixel (0, 1)
  }
  EXPECT_KILN_ERROR(decode_image(cut(bmp, bmp.size() - 2), "cut.bmp"), "cut.bmp", "5 × 3 BMP",
                    "needs at least 101 bytes, the file has 100 (1 missing)");

  // TGA, plain and RLE.
  for (const int rle : {0, 1}) {
    SCOPED_TRACE(rle);
    const int saved = stbi_write_tga_with_rle;
    stbi_write_tga_with_rle = rle;
    Bytes tga;
    const int written = stbi_write_tga_to_func(append_to, &tga, 5, 3, 3, rgb.data());
    stbi_write_tga_with_rle = saved;
    ASSERT_NE(written, 0);
    const TensorData image = decode_image(tga, "ok.tga");
    EXPECT_EQ(image.shape(), (Shape{3, 3, 5}));
    EXPECT_EQ(values<std::uint8_t>(image)[1], rgb[3]);
  }
}

TEST(HostileImages, TruncatedJpegIsRefused) {
  // A flat 1024 × 1024 JPEG is well above one bit per 8 × 8 block and decodes; cut right
  // after its scan header (stb_image would fill the rest with grey), it is refused.
  const Bytes flat(1024 * 1024, 90);
  Bytes jpeg;
  ASSERT_NE(stbi_write_jpg_to_func(append_to, &jpeg, 1024, 1024, 1, flat.data(), 90), 0);
  ASSERT_GT(jpeg.size(), 2048u);
  const TensorData image = decode_image(jpeg, "flat.jpg", 1);
  EXPECT_EQ(image.shape(), (Shape{1, 1024, 1024}));
  std::size_t scan = 0;
  while (scan + 1 < jpeg.size() && !(jpeg[scan] == 0xff && jpeg[scan + 1] == 0xda)) ++scan;
  ASSERT_LT(scan + 20, jpeg.size());
  EXPECT_KILN_ERROR(decode_image(cut(jpeg, scan + 20), "cut.jpg"), "read_image", "cut.jpg", "1024 × 1024 JPEG",
                    "one bit per 8 × 8 block", "needs at least 2048 bytes",
                    fmt::format("the file has {}", scan + 20));
}

TEST(HostileImages, ThePixelLimitIsAnOption) {
  TempDir dir;
  const Bytes pixels(100 * 100, 3);
  std::filesystem::create_directories(dir / "root" / "c");
  ASSERT_NE(stbi_write_png((dir / "root" / "c" / "big.png").c_str(), 100, 100, 1, pixels.data(), 100), 0);
  EXPECT_EQ(ImageFolder(dir / "root").get(0).image.shape(), (Shape{1, 100, 100}));
  EXPECT_KILN_ERROR(ImageFolder(dir / "root", {.max_pixels = 9999}).get(0), "read_image", "big.png",
                    "100 × 100 PNG has 10000 pixels, more than the limit of 9999");
  EXPECT_EQ(read_image(dir / "root" / "c" / "big.png", 0, 10000).shape(), (Shape{1, 100, 100}));
}

TEST(HostileImages, CompressionBombsAreRefused) {
  // A flat 4096 × 2048 JPEG takes a few bits per 8 × 8 block: about 100 KB for 8
  // megapixels, far above 8 pixels per byte. PNG's deflate packs zeros tighter still.
  const std::int64_t w = 4096, h = 2048;
  const Bytes flat(static_cast<std::size_t>(w * h), 128);
  Bytes jpeg, png;
  ASSERT_NE(stbi_write_jpg_to_func(append_to, &jpeg, w, h, 1, flat.data(), 90), 0);
  ASSERT_NE(stbi_write_png_to_func(append_to, &png, w, h, 1, flat.data(), w), 0);
  ASSERT_LT(jpeg.size() * 8, static_cast<std::size_t>(w * h));
  ASSERT_LT(png.size() * 8, static_cast<std::size_t>(w * h));
  EXPECT_KILN_ERROR(decode_image(jpeg, "flat.jpg"), "read_image", "flat.jpg", "4096 × 2048 JPEG",
                    fmt::format("of {} bytes has {} pixels per byte", jpeg.size(), (w * h + jpeg.size() - 1) / jpeg.size()),
                    "more than the limit of 8", "decompression bomb", "max_pixels_per_byte");
  EXPECT_KILN_ERROR(decode_image(png, "flat.png"), "flat.png", "4096 × 2048 PNG", "more than the limit of 8");
  // The limit is an option, and 0 turns it off.
  EXPECT_EQ(decode_image(jpeg, "flat.jpg", 1, default_max_image_pixels, 0).shape(), (Shape{1, h, w}));
  const TensorData image = decode_image(png, "flat.png", 0, default_max_image_pixels, 1u << 20);
  EXPECT_EQ(image.shape(), (Shape{1, h, w}));
  EXPECT_EQ(image.bytes()[12345], std::byte{128});
  // At most 2048 × 2048 pixels, no ratio is asked for.
  Bytes small;
  ASSERT_NE(stbi_write_png_to_func(append_to, &small, 2048, 2048, 1, flat.data(), 2048), 0);
  EXPECT_EQ(decode_image(small, "small.png").shape(), (Shape{1, 2048, 2048}));
  TempDir dir;
  std::filesystem::create_directories(dir / "root" / "c");
  write_file(dir / "root" / "c" / "flat.png", png);
  EXPECT_KILN_ERROR(ImageFolder(dir / "root").get(0), "flat.png", "pixels per byte");
  EXPECT_EQ(ImageFolder(dir / "root", {.max_pixels_per_byte = 0}).get(0).image.shape(), (Shape{1, h, w}));
}

// ---- CSV ----

TEST(HostileCsv, CarriageReturnsEndLines) {
  // Classic Mac OS line ends: three lines, not one.
  const CsvTable mac = parse_csv("a,b\r1,2\r3,4\r", "mac.csv");
  EXPECT_EQ(mac.columns(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(values<float>(mac.values()), (std::vector<float>{1, 2, 3, 4}));
  // A lone CR in the middle of LF lines ends a row too; the row after it is kept.
  EXPECT_EQ(values<float>(parse_csv("1,2\r9,9\n", "mixed.csv", {.header = false}).values()),
            (std::vector<float>{1, 2, 9, 9}));
  EXPECT_EQ(values<float>(parse_csv("a\r\n1\r2\n\r3", "all.csv").values()), (std::vector<float>{1, 2, 3}));
  // Lines are counted at every kind of line end.
  EXPECT_KILN_ERROR(parse_csv("a,b\r1,2\r\n3,x\r", "mac.csv"), "read_csv", "mac.csv", "line 3, column 2 ('b')",
                    "'x' is not a number");
  EXPECT_KILN_ERROR(parse_csv("a,b\r1,2\r3\r", "mac.csv"), "line 3 has 1 fields");
  // A CR inside quotes is part of the name, and a line all the same.
  const CsvTable quoted = parse_csv("\"a\rb\",c\r1,2\r", "quoted.csv");
  EXPECT_EQ(quoted.columns(), (std::vector<std::string>{"a\rb", "c"}));
  EXPECT_KILN_ERROR(parse_csv("\"a\rb\",c\r1,x\r", "quoted.csv"), "line 3, column 2 ('c')");
}

TEST(HostileCsv, ValuesBeyondTheDtypeOrNotFiniteAreErrors) {
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,1e300\n", "big.csv"), "read_csv", "big.csv", "line 2, column 2 ('b')",
                    "'1e300' is out of range for f32", "3.4028235e+38", "f64");
  EXPECT_KILN_ERROR(parse_csv("a\n-3.5e38\n", "big.csv"), "'-3.5e38' is out of range for f32");
  EXPECT_EQ(values<double>(parse_csv("a\n1e300\n", "big.csv", {.dtype = DType::f64}).values()),
            std::vector<double>{1e300});
  EXPECT_EQ(values<float>(parse_csv("a\n3.4028235e38\n", "max.csv").values()),
            std::vector<float>{std::numeric_limits<float>::max()});
  // NaN and infinities only when asked for.
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,nan\n", "nan.csv"), "nan.csv", "line 2, column 2 ('b')",
                    "'nan' is not a finite number", "allow_non_finite");
  EXPECT_KILN_ERROR(parse_csv("a\n-Infinity\n", "inf.csv", {.dtype = DType::f64}), "'-Infinity' is not a finite");
  const CsvTable special = parse_csv("a,b\nnan,-inf\n", "s.csv", {.allow_non_finite = true});
  EXPECT_TRUE(std::isnan(values<float>(special.values())[0]));
  EXPECT_EQ(values<float>(special.values())[1], -std::numeric_limits<float>::infinity());
}

TEST(HostileCsv, MessagesQuoteAtMost40BytesOfText) {
  const std::string huge(10'000'000, '7');
  const auto expect_short = [](const std::function<void()>& body, std::string_view part) {
    try {
      body();
      ADD_FAILURE() << "no kiln::Error was thrown";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
      EXPECT_NE(message.find(part), std::string::npos) << message.substr(0, 400);
    }
  };
  const std::string cut_field = std::string(40, '7') + "... (10000002 bytes)";
  expect_short([&] { parse_csv("a\n" + huge + "x7\n", "long.csv"); }, "'" + cut_field + "' is not a number");
  expect_short([&] { parse_csv("a\n\"1\"" + huge + "\n", "long.csv"); }, "after the closing quote");
  expect_short([&] { parse_csv(huge + "\nx\n", "long.csv"); }, "('77777");
  expect_short([&] { parse_csv("a,b\n" + huge + "e400,1\n", "long.csv", {.dtype = DType::f64}); },
               "is out of range for f64");
  expect_short([&] { parse_csv(huge + "\n1\n", "long.csv").column("z"); }, "no column named 'z'");
  // Cut at a UTF-8 character boundary: 39 bytes of 'x', then 'é' (2 bytes) would cross 40.
  expect_short([&] { parse_csv("a\n" + std::string(39, 'x') + "\xc3\xa9" + huge + "\n", "utf8.csv"); },
               "'" + std::string(39, 'x') + "... (");
}

// ---- IDX ----

TEST(HostileIdx, EveryPartialProductOfTheDimsFits) {
  // A zero dim makes no elements, but the strides of [0, 2^32-1, 2^32-1, 2^32-1] overflow.
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x08, {0, 0xffffffff, 0xffffffff, 0xffffffff}, {}), "zero.idx"), "read_idx",
                    "zero.idx", "dims [0, 4294967295, 4294967295, 4294967295] (bytes 4-19)",
                    "nonzero dims multiply to more than 2^48");
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x08, {0xffffffff, 0x20000, 0}, {}), "last.idx"), "last.idx",
                    "more than 2^48");
  // Large dims whose product fits are fine when one of them is zero.
  EXPECT_EQ(parse_idx(idx_file(0x0E, {0, 0x10000, 0x10000}, {}), "ok.idx").shape(), (Shape{0, 65536, 65536}));
}

TEST(HostileIdx, GzipStopsWhereTheHeaderSaysTheDataEnds) {
  // 16 labels, then gzip members of 16 MiB of zeros each: 256 MiB from about 260 KB.
  Bytes bomb = gzip(idx_file(0x08, {16}, counting(16)));
  const Bytes zeros = gzip(Bytes(std::size_t{16} << 20, 0));
  for (int i = 0; i < 16; ++i) bomb.insert(bomb.end(), zeros.begin(), zeros.end());
  EXPECT_LT(bomb.size(), 300'000u);
  EXPECT_KILN_ERROR(parse_idx(bomb, "bomb.gz"), "read_idx", "bomb.gz (gunzipped)",
                    "unexpected bytes after the data: dims [16] of ubyte end at byte 24",
                    "decompression stopped at byte 25");
  TempDir dir;
  write_file(dir / "bomb.gz", bomb);
  EXPECT_KILN_ERROR(read_idx(dir / "bomb.gz"), "read_idx", (dir / "bomb.gz").string(), "stopped at byte 25");
  // A header that promises far more than the stream holds is a truncation, found without
  // allocating what it promises.
  EXPECT_KILN_ERROR(parse_idx(gzip(idx_file(0x0E, {1u << 20, 1u << 20}, counting(64))), "promise.gz"), "promise.gz",
                    "need 8796093022208 data bytes", "only 64 follow");
}

// ---- gzip without a size in the header ----

TEST(HostileGzip, CsvAndCifarStopAt16TimesTheCompressedSize) {
  // 18 MiB of CSV zeros gzip to about 40 KB: past the 16 MiB floor and 16 times the size.
  std::string zeros = "a,b\n";
  while (zeros.size() < (std::size_t{18} << 20)) zeros += "0,0\n";
  const Bytes csv = gzip(Bytes(zeros.begin(), zeros.end()));
  TempDir dir;
  write_file(dir / "bomb.csv.gz", csv);
  EXPECT_KILN_ERROR(read_csv(dir / "bomb.csv.gz"), "read_csv", (dir / "bomb.csv.gz").string(),
                    "inflates to more than 16777216 bytes",
                    fmt::format("16 times its {} compressed bytes", csv.size()), "decompression bomb",
                    "gunzip it first");
  // The same text unzipped is read whole.
  write_text(dir / "plain.csv", zeros);
  EXPECT_EQ(read_csv(dir / "plain.csv").rows(), (zeros.size() - 4) / 4);
  // CIFAR: 6000 records of zeros (18 MB) in about 18 KB.
  write_file(dir / "bomb.bin.gz", gzip(Bytes(std::size_t{6000} * 3073, 0)));
  EXPECT_KILN_ERROR(read_cifar10(dir / "bomb.bin.gz"), "bomb.bin.gz", "inflates to more than 16777216 bytes");
  // Below the floor, any ratio is fine.
  write_file(dir / "ok.bin.gz", gzip(Bytes(std::size_t{100} * 3073, 0)));
  EXPECT_EQ(read_cifar10(dir / "ok.bin.gz").size(), 100u);
}

// ---- the budget: every reader, the worst files of at most 1 MiB ----

// `n` bytes of an APP15 segment (ignored by decoders) after a JPEG's start marker.
Bytes pad_jpeg(const Bytes& jpeg, std::size_t n) {
  Bytes out(jpeg.begin(), jpeg.begin() + 2);
  while (n >= 4) {
    const std::size_t size = std::min<std::size_t>(n, 65537);
    out.insert(out.end(), {0xff, 0xef, static_cast<std::uint8_t>((size - 2) >> 8), static_cast<std::uint8_t>(size - 2)});
    out.resize(out.size() + size - 4, 0x5a);
    n -= size;
  }
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

// A PNG chunk: length, type, data, CRC-32 of type and data.
void put_png_chunk(Bytes& out, std::string_view type, const Bytes& data) {
  put_be32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type.begin(), type.end());
  out.insert(out.end(), data.begin(), data.end());
  put_be32(out, static_cast<std::uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(out.size() - start))));
}

// A 16-bit RGBA PNG of zeros, padded with an ancillary chunk (which decoders skip) to
// `padding` more bytes.
Bytes png_rgba16_zeros(std::uint32_t width, std::uint32_t height, std::size_t padding) {
  Bytes out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {16, 6, 0, 0, 0});  // 16 bits, RGBA, deflate, filter 0, no interlace
  put_png_chunk(out, "IHDR", ihdr);
  put_png_chunk(out, "kiLn", Bytes(padding, 0x5a));
  const Bytes raw((std::size_t{8} * width + 1) * height, 0);  // filter byte 0 and zeros, row by row
  Bytes idat(compressBound(static_cast<uLong>(raw.size())));
  uLongf size = static_cast<uLongf>(idat.size());
  EXPECT_EQ(compress2(idat.data(), &size, raw.data(), static_cast<uLong>(raw.size()), 9), Z_OK);
  idat.resize(size);
  put_png_chunk(out, "IDAT", idat);
  put_png_chunk(out, "IEND", {});
  return out;
}

// A GIF whose screen is width × height with one 1 × 1 frame, and a comment of `padding`
// bytes: stb_image allocates the whole screen (several buffers of it) whatever the frames.
Bytes gif_screen(std::uint16_t width, std::uint16_t height, std::size_t padding) {
  Bytes out{'G', 'I', 'F', '8', '9', 'a'};
  put_le16(out, width);
  put_le16(out, height);
  out.insert(out.end(), {0x80, 0, 0, 0, 0, 0, 255, 255, 255});  // a global table of 2 colours
  out.insert(out.end(), {0x21, 0xfe});                           // a comment, in blocks of 255 bytes
  for (; padding >= 256; padding -= 256) {
    out.push_back(255);
    out.resize(out.size() + 255, 'k');
  }
  out.push_back(0);
  out.push_back(0x2c);  // the frame: at 0, 0, 1 × 1, no local table
  for (int v : {0, 0, 1, 1}) put_le16(out, static_cast<std::uint32_t>(v));
  out.push_back(0);
  // LZW, minimum code size 2: codes clear (4), 0, end (5) of 3 bits each.
  out.insert(out.end(), {2, 2, 0x44, 0x01, 0, 0x3b});
  return out;
}

// `copies` gzip members of 16 MiB of zeros each after `head` (gzipped): a stream that
// inflates to 16 MiB per 16 KB.
Bytes gzip_bomb(const Bytes& head, int copies) {
  Bytes out = gzip(head);
  const Bytes zeros = gzip(Bytes(std::size_t{16} << 20, 0));
  for (int i = 0; i < copies; ++i) out.insert(out.end(), zeros.begin(), zeros.end());
  return out;
}

TEST(HostileBudget, EveryReaderRefusesOrReadsTheWorstSmallFilesCheaply) {
  using Outcome = kiln::test::ReadUse::Outcome;
  using kiln::test::expect_within_budget;
  const auto decodes = [](const Bytes& bytes, std::string_view name) {
    return [&bytes, name] { (void)decode_image(bytes, name); };
  };
  // Images: headers that lie, compression bombs, and the largest images the limits let
  // through from 1 MiB (8 megapixels, 4 at 16 bits).
  const Bytes bmp = bmp_header(26000, 26000), ppm = text_bytes("P6\n40000 17000\n255\n");
  const Bytes pgm = text_bytes("P5\n64 64\n255\n"), tga = tga_header(3, 64, 64, 8);
  expect_within_budget("BMP header of 26000 x 26000", bmp.size(), Outcome::refused, decodes(bmp, "a.bmp"));
  expect_within_budget("PPM header of 40000 x 17000", ppm.size(), Outcome::refused, decodes(ppm, "a.ppm"));
  expect_within_budget("PGM header of 64 x 64, no pixels", pgm.size(), Outcome::refused, decodes(pgm, "a.pgm"));
  expect_within_budget("TGA header of 64 x 64, no pixels", tga.size(), Outcome::refused, decodes(tga, "a.tga"));
  const Bytes gif_lie = gif_screen(8192, 8192, 0), gif_big = gif_screen(2880, 2880, (1 << 20) - 100);
  expect_within_budget("GIF of an 8192 x 8192 screen, one pixel", gif_lie.size(), Outcome::refused,
                       decodes(gif_lie, "a.gif"), "pixels per byte");
  expect_within_budget("GIF of a 2880 x 2880 screen, padded to 1 MiB", gif_big.size(), Outcome::read,
                       decodes(gif_big, "b.gif"));
  {
    const Bytes flat(std::size_t{6144} * 6144, 128);
    Bytes jpeg;
    ASSERT_NE(stbi_write_jpg_to_func(append_to, &jpeg, 6144, 6144, 1, flat.data(), 90), 0);
    expect_within_budget("flat JPEG of 6144 x 6144", jpeg.size(), Outcome::refused, decodes(jpeg, "a.jpg"),
                         "pixels per byte");
  }
  {
    const Bytes flat(std::size_t{2896} * 2896 * 3, 77);
    Bytes jpeg;
    ASSERT_NE(stbi_write_jpg_to_func(append_to, &jpeg, 2896, 2896, 3, flat.data(), 95), 0);
    const Bytes padded = pad_jpeg(jpeg, (std::size_t{1} << 20) - jpeg.size());
    expect_within_budget("flat RGB JPEG of 2896 x 2896, padded to 1 MiB", padded.size(), Outcome::read,
                         decodes(padded, "b.jpg"));
  }
  const Bytes png_bomb = png_rgba16_zeros(4096, 4096, 0);
  const Bytes png_big = png_rgba16_zeros(2048, 2048, (std::size_t{1} << 20) - png_rgba16_zeros(2048, 2048, 0).size());
  expect_within_budget("16-bit RGBA PNG of zeros, 4096 x 4096", png_bomb.size(), Outcome::refused,
                       decodes(png_bomb, "a.png"), "16-bit pixels count twice");
  expect_within_budget("16-bit RGBA PNG of zeros, 2048 x 2048, padded to 1 MiB", png_big.size(), Outcome::read,
                       decodes(png_big, "b.png"));

  // gzip streams that inflate a thousandfold, behind headers of each kind.
  TempDir dir;
  const Bytes idx_bomb = gzip_bomb(idx_file(0x08, {1u << 30}, {}), 60);
  const Bytes cifar_bomb = gzip_bomb(Bytes(3073, 1), 60);
  std::string csv_head = "a,b\n";
  while (csv_head.size() < 4096) csv_head += "1,2\n";
  const Bytes csv_bomb = gzip_bomb(Bytes(csv_head.begin(), csv_head.end()), 60);
  write_file(dir / "idx.gz", idx_bomb);
  write_file(dir / "cifar.bin.gz", cifar_bomb);
  write_file(dir / "table.csv.gz", csv_bomb);
  expect_within_budget("IDX [2^30] gzip bomb (1 GiB of zeros)", idx_bomb.size(), Outcome::refused,
                       [&] { (void)read_idx(dir / "idx.gz"); }, "decompression bomb");
  expect_within_budget("CIFAR-10 gzip bomb", cifar_bomb.size(), Outcome::refused,
                       [&] { (void)read_cifar10(dir / "cifar.bin.gz"); }, "decompression bomb");
  expect_within_budget("CSV gzip bomb", csv_bomb.size(), Outcome::refused,
                       [&] { (void)read_csv(dir / "table.csv.gz"); }, "decompression bomb");
  // Plain files of 1 MiB read whole: a table of 262143 one-digit rows, one of a single row
  // of 524287 columns, a CIFAR-100 file of 341 records, an IDX file of 1 MiB.
  std::string rows = "a\n", columns;
  while (rows.size() + 2 <= (1u << 20)) rows += "7\n";
  for (std::size_t i = 0; columns.size() + 2 < (1u << 20); ++i) columns += i ? ",1" : "1";
  write_text(dir / "rows.csv", rows);
  write_text(dir / "columns.csv", columns + "\n");
  write_file(dir / "cifar100.bin", Bytes(std::size_t{341} * 3074, 3));
  write_file(dir / "big.idx", idx_file(0x08, {(1u << 20) - 8}, Bytes((1u << 20) - 8, 5)));
  expect_within_budget("CSV of 1-digit rows", rows.size(), Outcome::read, [&] { (void)read_csv(dir / "rows.csv"); });
  expect_within_budget("CSV of one row of 1-digit columns", columns.size() + 1, Outcome::read,
                       [&] { (void)read_csv(dir / "columns.csv", {.header = false}); });
  expect_within_budget("CIFAR-100 of 341 records", std::size_t{341} * 3074, Outcome::read,
                       [&] { (void)read_cifar100(dir / "cifar100.bin"); });
  expect_within_budget("IDX of 1 MiB", 1u << 20, Outcome::read, [&] { (void)read_idx(dir / "big.idx"); });
}

// ---- FIFOs and other files that are not regular ----

using kiln::test::waits_on;

TEST(HostileFiles, FifosAreRefusedAtOnce) {
  TempDir dir;
  const std::filesystem::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string name = fifo.string();
  EXPECT_FALSE(waits_on(fifo, [&] {
    EXPECT_KILN_ERROR(read_csv(fifo), "read_csv", name, "is a FIFO (named pipe), not a regular file");
  }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(read_idx(fifo), "read_idx", name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(read_mnist(fifo, fifo), "read_idx", name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(read_cifar10(fifo), "read_cifar10", name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(read_cifar100(fifo), "read_cifar100", name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(read_image(fifo), "read_image", name, "is a FIFO"); }));
  // An image folder lists regular files only: the FIFO named like an image is skipped.
  std::filesystem::create_directories(dir / "root" / "c");
  const Bytes pixel{5};
  ASSERT_NE(stbi_write_png((dir / "root" / "c" / "a.png").c_str(), 1, 1, 1, pixel.data(), 1), 0);
  ASSERT_EQ(::mkfifo((dir / "root" / "c" / "b.png").c_str(), 0600), 0);
  EXPECT_EQ(ImageFolder(dir / "root").size(), 1u);
  // A device that never ends is refused the same way.
  EXPECT_KILN_ERROR(read_csv("/dev/zero"), "read_csv", "/dev/zero", "is a character device, not a regular file");
}

}  // namespace
}  // namespace kiln::data::test
