// Hostile files against the data readers: image headers that lie about their
// size, CSV that would lose rows or values silently, IDX dims and gzip streams that would
// overflow or inflate without bound, and FIFOs that nobody writes to. Each must give a
// kiln::Error naming the reader, the file and the sizes at fault, at once.
#include "data_test.hpp"
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
