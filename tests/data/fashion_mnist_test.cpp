// The real Fashion-MNIST files of Debian's dataset-fashion-mnist package, when installed.
#include "data_test.hpp"

#include <kiln/data/idx.hpp>

#include <numeric>

namespace kiln::data::test {
namespace {

bool installed() {
  std::error_code ignored;
  return std::filesystem::exists(std::filesystem::path(fashion_mnist_directory) / "train-images-idx3-ubyte.gz",
                                 ignored);
}

TEST(FashionMnist, ReadsTheDebianPackage) {
  if (!installed())
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (no " << fashion_mnist_directory
                 << "/train-images-idx3-ubyte.gz)";
  const ImageSet train = fashion_mnist(Split::train);
  const ImageSet test = fashion_mnist(Split::test);
  EXPECT_EQ(train.images().shape(), (Shape{60000, 28, 28}));
  EXPECT_EQ(train.images().dtype(), DType::u8);
  EXPECT_EQ(test.images().shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(train.classes()[9], "Ankle boot");
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  for (const auto& [set, per_class] : {std::pair{&train, 6000}, std::pair{&test, 1000}}) {
    std::vector<int> counts(10, 0);
    for (const std::int64_t label : set->labels()) ++counts[static_cast<std::size_t>(label)];
    for (const int count : counts) EXPECT_EQ(count, per_class);
  }
  // The first training image is an ankle boot (label 9) whose border is black and whose
  // pixels are not all dark.
  const LabeledImage first = train.get(0);
  EXPECT_EQ(first.label, 9);
  const auto pixels = values<std::uint8_t>(first.image);
  EXPECT_EQ(pixels[0], 0);
  EXPECT_GT(std::accumulate(pixels.begin(), pixels.end(), 0), 28 * 28 * 40);
  EXPECT_EQ(test.labels()[0], 9);
  EXPECT_EQ(test.labels()[1], 2);
}

TEST(FashionMnist, AMissingDirectoryNamesThePackage) {
  TempDir dir;
  EXPECT_KILN_ERROR(fashion_mnist(Split::test, dir.path()), "fashion_mnist", dir.path().string(),
                    "has no t10k-images-idx3-ubyte (nor t10k-images-idx3-ubyte.gz)",
                    "install Debian's dataset-fashion-mnist package", "/usr/share/datasets/fashion-mnist");
  // Labels without images, or the other way round, say which file is missing.
  write_file(dir / "train-images-idx3-ubyte.gz", gzip(idx_file(0x08, {1, 28, 28}, Bytes(784, 0))));
  EXPECT_KILN_ERROR(fashion_mnist(Split::train, dir.path()), "has no train-labels-idx1-ubyte");
}

}  // namespace
}  // namespace kiln::data::test
