// IDX files and MNIST pairs, plain and gzip: what a good file holds, and an error naming
// the reader, the file and the bytes for every way a file can be wrong.
#include "data_test.hpp"

#include <kiln/data/idx.hpp>

#include <cstring>

namespace kiln::data::test {
namespace {

TEST(Idx, ReadsEveryTypeBigEndian) {
  TempDir dir;
  write_file(dir / "u8", idx_file(0x08, {2, 3}, {0, 1, 2, 253, 254, 255}));
  const TensorData u8 = read_idx(dir / "u8");
  EXPECT_EQ(u8.dtype(), DType::u8);
  EXPECT_EQ(u8.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<std::uint8_t>(u8), (std::vector<std::uint8_t>{0, 1, 2, 253, 254, 255}));

  write_file(dir / "i8", idx_file(0x09, {3}, {0x7f, 0x80, 0xff}));
  EXPECT_EQ(values<std::int32_t>(read_idx(dir / "i8")), (std::vector<std::int32_t>{127, -128, -1}));
  write_file(dir / "i16", idx_file(0x0B, {2}, {0x01, 0x02, 0xff, 0xfe}));
  EXPECT_EQ(values<std::int32_t>(read_idx(dir / "i16")), (std::vector<std::int32_t>{258, -2}));
  write_file(dir / "i32", idx_file(0x0C, {2}, {0x00, 0x01, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00}));
  EXPECT_EQ(values<std::int32_t>(read_idx(dir / "i32")), (std::vector<std::int32_t>{65536, INT32_MIN}));
  write_file(dir / "f32", idx_file(0x0D, {1, 2}, {0x3f, 0xc0, 0x00, 0x00, 0xc1, 0x20, 0x00, 0x00}));
  const TensorData f32 = read_idx(dir / "f32");
  EXPECT_EQ(f32.shape(), (Shape{1, 2}));
  EXPECT_EQ(values<float>(f32), (std::vector<float>{1.5f, -10.0f}));
  write_file(dir / "f64", idx_file(0x0E, {1}, {0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}));
  EXPECT_EQ(values<double>(read_idx(dir / "f64")), std::vector<double>{3.141592653589793});
  // Zero-sized dims are valid and hold no data.
  write_file(dir / "empty", idx_file(0x08, {0, 28, 28}, {}));
  EXPECT_EQ(read_idx(dir / "empty").shape(), (Shape{0, 28, 28}));
}

TEST(Idx, GzipIsRecognizedByContent) {
  TempDir dir;
  const Bytes plain = idx_file(0x08, {3, 2, 2}, counting(12, 100));
  write_file(dir / "images.gz", gzip(plain));
  write_file(dir / "compressed-without-suffix", gzip(plain));
  for (const char* name : {"images.gz", "compressed-without-suffix"}) {
    const TensorData data = read_idx(dir / name);
    EXPECT_EQ(data.shape(), (Shape{3, 2, 2}));
    EXPECT_EQ(values<std::uint8_t>(data), counting(12, 100));
  }
  // Two gzip members one after the other (cat a.gz b.gz) are one stream.
  Bytes two = gzip(Bytes(plain.begin(), plain.begin() + 7));
  const Bytes rest = gzip(Bytes(plain.begin() + 7, plain.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_EQ(values<std::uint8_t>(parse_idx(two, "two-members.gz")), counting(12, 100));
  // A large one (more output than the first guess of the buffer).
  const Bytes big = idx_file(0x08, {1000, 100, 100}, Bytes(1000 * 100 * 100, 7));
  EXPECT_EQ(parse_idx(gzip(big), "big.gz").shape(), (Shape{1000, 100, 100}));
}

TEST(IdxMalformed, Header) {
  EXPECT_KILN_ERROR(parse_idx(Bytes{0, 0, 8}, "x.idx"), "read_idx", "x.idx", "3 bytes", "4-byte IDX magic");
  EXPECT_KILN_ERROR(parse_idx(Bytes{0x50, 0x4b, 3, 4, 0, 0, 0, 0}, "x.idx"), "read_idx", "x.idx",
                    "bad magic number 50 4b 03 04 (bytes 0-3)");
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x0A, {1}, {0}), "x.idx"), "x.idx", "unknown type code 0x0a (byte 2)");
  EXPECT_KILN_ERROR(parse_idx(Bytes{0, 0, 8, 0}, "x.idx"), "x.idx", "number of dims (byte 3) is 0");
  EXPECT_KILN_ERROR(parse_idx(Bytes{0, 0, 8, 3, 0, 0, 0, 2, 0, 0}, "x.idx"), "x.idx", "truncated header",
                    "3 dims need 16 header bytes", "has 10");
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x0E, {0xffffffff, 0xffffffff}, {}), "x.idx"), "x.idx",
                    "dims [4294967295, 4294967295]", "more elements than any file holds");
}

TEST(IdxMalformed, DataOfTheWrongLength) {
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x08, {2, 28, 28}, counting(1000)), "images.idx"), "read_idx", "images.idx",
                    "truncated", "dims [2, 28, 28] of ubyte need 1568 data bytes after the 16-byte header",
                    "only 1000 follow (568 missing)");
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x0C, {3}, counting(11)), "ints.idx"), "need 12 data bytes", "only 11 follow");
  EXPECT_KILN_ERROR(parse_idx(idx_file(0x08, {4}, counting(6)), "labels.idx"), "labels.idx",
                    "2 unexpected bytes after the data", "end at byte 12", "has 14 bytes");
}

TEST(IdxMalformed, EveryTruncationOfAFileIsAnError) {
  const Bytes plain = idx_file(0x08, {2, 3, 3}, counting(18));
  for (std::size_t size = 0; size < plain.size(); ++size) {
    SCOPED_TRACE(size);
    EXPECT_KILN_ERROR(parse_idx(Bytes(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(size)), "cut.idx"),
                      "read_idx", "cut.idx");
  }
  const Bytes compressed = gzip(plain);
  for (std::size_t size = 2; size < compressed.size(); ++size) {
    SCOPED_TRACE(size);
    EXPECT_KILN_ERROR(
        parse_idx(Bytes(compressed.begin(), compressed.begin() + static_cast<std::ptrdiff_t>(size)), "cut.idx.gz"),
        "read_idx", "cut.idx.gz");
  }
}

TEST(IdxMalformed, CorruptGzip) {
  const Bytes plain = idx_file(0x08, {50, 10}, counting(500));
  const Bytes good = gzip(plain);
  // A truncated stream says so, with the byte counts.
  EXPECT_KILN_ERROR(parse_idx(Bytes(good.begin(), good.end() - 4), "t.gz"), "read_idx", "t.gz",
                    "gzip stream is truncated", fmt::format("after {} compressed bytes", good.size() - 4));
  // A flipped bit in the data: a zlib error or a CRC mismatch, never wrong pixels.
  for (std::size_t at = 10; at < good.size(); at += 3) {
    Bytes bad = good;
    bad[at] ^= 0x10;
    SCOPED_TRACE(at);
    try {
      const TensorData data = parse_idx(bad, "flipped.gz");
      ADD_FAILURE() << "a corrupt gzip stream was read as " << data.shape().str();
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("flipped.gz"), std::string::npos) << error.what();
    }
  }
  Bytes crc = good;
  crc[crc.size() - 6] ^= 0xff;  // the CRC-32 in the trailer
  EXPECT_KILN_ERROR(parse_idx(crc, "crc.gz"), "crc.gz", "corrupt gzip data", "incorrect data check");
  Bytes method = good;
  method[2] = 7;  // compression method: only 8 (deflate) exists
  EXPECT_KILN_ERROR(parse_idx(method, "m.gz"), "m.gz", "corrupt gzip data near compressed byte");
  Bytes trailing = good;
  trailing.insert(trailing.end(), {'j', 'u', 'n', 'k'});
  EXPECT_KILN_ERROR(parse_idx(trailing, "junk.gz"), "junk.gz", "4 bytes follow the end of the gzip stream",
                    fmt::format("compressed byte {}", good.size()), "0x6a");
  // The IDX checks apply to the decompressed bytes, and say so.
  EXPECT_KILN_ERROR(parse_idx(gzip(idx_file(0x08, {60}, counting(59))), "short.gz"), "short.gz (gunzipped)",
                    "truncated", "only 59 follow");
}

TEST(IdxFiles, MissingFileOrDirectory) {
  TempDir dir;
  EXPECT_KILN_ERROR(read_idx(dir / "nothing"), "read_idx", (dir / "nothing").string(), "no such file");
  EXPECT_KILN_ERROR(read_idx(dir.path()), "read_idx", "is a directory");
}

// An MNIST-style pair in `dir`: n images of 2x3 and labels.
void write_mnist(const TempDir& dir, std::string_view prefix, const Bytes& labels, bool compressed) {
  const auto n = static_cast<std::uint32_t>(labels.size());
  Bytes images = idx_file(0x08, {n, 2, 3}, counting(n * 6));
  Bytes label_file = idx_file(0x08, {n}, labels);
  const std::string suffix = compressed ? ".gz" : "";
  write_file(dir / (std::string(prefix) + "-images-idx3-ubyte" + suffix), compressed ? gzip(images) : images);
  write_file(dir / (std::string(prefix) + "-labels-idx1-ubyte" + suffix), compressed ? gzip(label_file) : label_file);
}

TEST(Mnist, ReadsAPairOfFiles) {
  TempDir dir;
  write_mnist(dir, "train", {3, 1, 4, 1, 5}, false);
  write_mnist(dir, "t10k", {9, 2}, true);
  const ImageSet train = mnist(Split::train, dir.path());
  EXPECT_EQ(train.size(), 5u);
  EXPECT_EQ(train.images().shape(), (Shape{5, 2, 3}));
  EXPECT_EQ(train.labels(), (std::vector<std::int64_t>{3, 1, 4, 1, 5}));
  EXPECT_EQ(train.classes().size(), 10u);
  const LabeledImage third = train.get(2);
  EXPECT_EQ(third.label, 4);
  EXPECT_EQ(third.image.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<std::uint8_t>(third.image), counting(6, 12));
  EXPECT_KILN_ERROR(train.get(5), "ImageSet", "index 5");
  const ImageSet test = mnist(Split::test, dir.path());
  EXPECT_EQ(test.labels(), (std::vector<std::int64_t>{9, 2}));
}

TEST(Mnist, MismatchedOrWrongFiles) {
  TempDir dir;
  write_file(dir / "images", idx_file(0x08, {3, 2, 2}, counting(12)));
  write_file(dir / "labels", idx_file(0x08, {2}, {0, 1}));
  EXPECT_KILN_ERROR(read_mnist(dir / "images", dir / "labels"), "read_mnist", "holds 3 images",
                    (dir / "labels").string(), "holds 2 labels");
  write_file(dir / "labels3", idx_file(0x08, {3}, {0, 12, 1}));
  EXPECT_KILN_ERROR(read_mnist(dir / "images", dir / "labels3"), "read_mnist", (dir / "labels3").string(),
                    "label 12 of item 1 (file byte 9) is outside 0..9");
  EXPECT_EQ(read_mnist(dir / "images", dir / "labels3", 26).labels()[1], 12);  // EMNIST letters have more classes
  write_file(dir / "flat", idx_file(0x08, {3, 4}, counting(12)));
  EXPECT_KILN_ERROR(read_mnist(dir / "flat", dir / "labels3"), "read_mnist",
                    "images must be a ubyte IDX file of 3 dims", "u8 of dims [3, 4]");
  write_file(dir / "int-labels", idx_file(0x0C, {3}, counting(12)));
  EXPECT_KILN_ERROR(read_mnist(dir / "images", dir / "int-labels"), "labels must be a ubyte IDX file of 1 dim",
                    "i32 of dims [3]");
  TempDir empty;
  EXPECT_KILN_ERROR(mnist(Split::train, empty.path()), "mnist", "has no train-images-idx3-ubyte",
                    "train-images-idx3-ubyte.gz");
}

}  // namespace
}  // namespace kiln::data::test
