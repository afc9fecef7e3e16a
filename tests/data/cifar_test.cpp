// CIFAR-10 and CIFAR-100 binary files: records of label byte(s) + 3072 pixels, made here.
#include "data_test.hpp"

#include <kiln/data/cifar.hpp>

namespace kiln::data::test {
namespace {

constexpr std::size_t pixels = 3072;

// One record: the label bytes, then pixels counting from `start`.
Bytes record(std::initializer_list<std::uint8_t> labels, std::uint8_t start) {
  Bytes out(labels);
  const Bytes image = counting(pixels, start);
  out.insert(out.end(), image.begin(), image.end());
  return out;
}

Bytes records(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(Cifar, ReadsCifar10RecordsFromSeveralFiles) {
  TempDir dir;
  write_file(dir / "data_batch_1.bin", records({record({3}, 0), record({9}, 1)}));
  for (int b = 2; b <= 5; ++b)
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"), gzip(record({static_cast<std::uint8_t>(b)}, 7)));
  write_file(dir / "test_batch.bin", record({0}, 5));
  const ImageSet train = cifar10(Split::train, dir.path());
  ASSERT_EQ(train.size(), 6u);
  EXPECT_EQ(train.images().shape(), (Shape{6, 3, 32, 32}));
  EXPECT_EQ(train.labels(), (std::vector<std::int64_t>{3, 9, 2, 3, 4, 5}));
  EXPECT_EQ(train.classes()[3], "cat");
  const LabeledImage second = train.get(1);
  EXPECT_EQ(second.image.shape(), (Shape{3, 32, 32}));
  // Channels first, as stored: the first green pixel is byte 1024 of the image.
  EXPECT_EQ(values<std::uint8_t>(second.image)[1024], static_cast<std::uint8_t>(1 + 1024));
  EXPECT_EQ(values<std::uint8_t>(second.image), counting(pixels, 1));
  EXPECT_EQ(cifar10(Split::test, dir.path()).labels(), std::vector<std::int64_t>{0});
}

TEST(Cifar, ReadsCifar100FineOrCoarseLabels) {
  TempDir dir;
  write_file(dir / "train.bin", records({record({19, 99}, 0), record({0, 42}, 3)}));
  const ImageSet fine = cifar100(Split::train, dir.path());
  EXPECT_EQ(fine.labels(), (std::vector<std::int64_t>{99, 42}));
  EXPECT_EQ(fine.classes().size(), 100u);
  const ImageSet coarse = read_cifar100(dir / "train.bin", CifarLabels::coarse);
  EXPECT_EQ(coarse.labels(), (std::vector<std::int64_t>{19, 0}));
  EXPECT_EQ(coarse.classes().size(), 20u);
  EXPECT_EQ(values<std::uint8_t>(coarse.get(1).image), counting(pixels, 3));
}

TEST(CifarMalformed, TruncatedFiles) {
  TempDir dir;
  const Bytes two = records({record({1}, 0), record({2}, 0)});
  write_file(dir / "cut.bin", Bytes(two.begin(), two.end() - 5));
  EXPECT_KILN_ERROR(read_cifar10(dir / "cut.bin"), "read_cifar10", (dir / "cut.bin").string(),
                    "6141 bytes are not a whole number of 3073-byte records (1 records and 3068 bytes over)");
  write_file(dir / "cut100.bin", Bytes(3075, 0));
  EXPECT_KILN_ERROR(read_cifar100(dir / "cut100.bin"), "read_cifar100", "3074-byte records", "1 bytes over");
  write_file(dir / "empty.bin", Bytes{});
  EXPECT_KILN_ERROR(read_cifar10(dir / "empty.bin"), "read_cifar10", "empty.bin", "empty");
  const Bytes compressed = gzip(two);
  write_file(dir / "cut.bin.gz", Bytes(compressed.begin(), compressed.end() - 10));
  EXPECT_KILN_ERROR(read_cifar10(dir / "cut.bin.gz"), "read_cifar10", "cut.bin.gz", "truncated");
  TempDir missing;
  EXPECT_KILN_ERROR(cifar10(Split::train, missing.path()), "read_cifar10", "data_batch_1.bin", "no such file");
}

TEST(CifarMalformed, LabelsOutOfRange) {
  TempDir dir;
  write_file(dir / "bad10.bin", records({record({9}, 0), record({10}, 0)}));
  EXPECT_KILN_ERROR(read_cifar10(dir / "bad10.bin"), "read_cifar10", "bad10.bin",
                    "record 1 (byte 3073) has label 10, outside 0..9");
  // Both CIFAR-100 labels are checked, whichever is kept.
  write_file(dir / "bad-coarse.bin", records({record({1, 1}, 0), record({2, 2}, 0), record({20, 5}, 0)}));
  EXPECT_KILN_ERROR(read_cifar100(dir / "bad-coarse.bin", CifarLabels::fine), "read_cifar100",
                    "record 2 (byte 6148) has coarse label 20, outside 0..19");
  write_file(dir / "bad-fine.bin", record({1, 200}, 0));
  EXPECT_KILN_ERROR(read_cifar100(dir / "bad-fine.bin", CifarLabels::coarse),
                    "record 0 (byte 1) has fine label 200, outside 0..99");
  // A CIFAR-100 file read as CIFAR-10 is (almost always) caught by its length.
  write_file(dir / "hundred.bin", records({record({1, 1}, 0), record({2, 2}, 0)}));
  EXPECT_KILN_ERROR(read_cifar10(dir / "hundred.bin"), "read_cifar10", "not a whole number of 3073-byte records");
}

}  // namespace
}  // namespace kiln::data::test
