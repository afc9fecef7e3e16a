// Image transforms: exact outputs of to_tensor, normalize, crop and flip, and random
// transforms that depend on (seed, epoch, index) only.
#include "data_test.hpp"

#include <kiln/data/dataset.hpp>
#include <kiln/data/transforms.hpp>

#include <set>

namespace kiln::data::test {
namespace {

TensorData u8(std::vector<std::uint8_t> pixels, Shape shape) { return TensorData::from(pixels, std::move(shape)); }

TEST(Transforms, ToTensorScalesAndPutsChannelsFirst) {
  const TensorData grey = to_tensor(u8({0, 51, 255, 102}, {2, 2}));
  EXPECT_EQ(grey.dtype(), DType::f32);
  EXPECT_EQ(grey.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(values<float>(grey), (std::vector<float>{0.0f, 0.2f, 1.0f, 0.4f}));
  // HWC [1, 2, 3] → CHW [3, 1, 2].
  const TensorData hwc = to_tensor(u8({0, 255, 51, 255, 0, 102}, {1, 2, 3}), Layout::hwc);
  EXPECT_EQ(hwc.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(values<float>(hwc), (std::vector<float>{0.0f, 1.0f, 1.0f, 0.0f, 0.2f, 0.4f}));
  const TensorData chw = to_tensor(u8({0, 255, 51, 255, 0, 102}, {3, 1, 2}));
  EXPECT_EQ(chw.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(values<float>(chw), (std::vector<float>{0.0f, 1.0f, 0.2f, 1.0f, 0.0f, 0.4f}));
  // Floats are kept as they are.
  EXPECT_EQ(values<float>(to_tensor(TensorData::from(std::vector<double>{2.5, -1}, Shape{1, 2}))),
            (std::vector<float>{2.5f, -1.0f}));
  EXPECT_KILN_ERROR(to_tensor(u8({1, 2}, {2})), "to_tensor", "shape [2]");
  EXPECT_KILN_ERROR(to_tensor(TensorData::from(std::vector<std::int32_t>{1}, Shape{1, 1})), "to_tensor", "i32");
}

TEST(Transforms, NormalizePerChannel) {
  const TensorData image = TensorData::from(std::vector<float>{0, 1, 0.5f, 0.25f}, Shape{2, 1, 2});
  const std::vector<float> mean{0.5f, 0.25f}, std{0.5f, 0.25f};
  EXPECT_EQ(values<float>(normalize(image, mean, std)), (std::vector<float>{-1, 1, 1, 0}));
  const std::vector<float> one_mean{1.0f}, one_std{2.0f};
  EXPECT_EQ(values<float>(normalize(image, one_mean, one_std)), (std::vector<float>{-0.5f, 0, -0.25f, -0.375f}));
  const std::vector<float> three{0, 0, 0};
  EXPECT_KILN_ERROR(normalize(image, three, three), "normalize", "3 means and 3 stds", "2 channels");
  const std::vector<float> zero{0};
  EXPECT_KILN_ERROR(normalize(image, one_mean, zero), "normalize", "std[0] is zero");
  EXPECT_KILN_ERROR(normalize(u8({1}, {1, 1}), one_mean, one_std), "normalize", "u8", "to_tensor");
  const Normalize callable{{0.5f, 0.25f}, {0.5f, 0.25f}};
  const LabeledImage item = callable(LabeledImage{image, 4});
  EXPECT_EQ(item.label, 4);
  EXPECT_EQ(values<float>(item.image), (std::vector<float>{-1, 1, 1, 0}));
}

TEST(Transforms, CropWithPaddingAndFlip) {
  // 3x3 image 1..9.
  const TensorData image = u8({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_EQ(values<std::uint8_t>(crop(image, 1, 0, 2, 2)), (Bytes{4, 5, 7, 8}));
  // Padded by 1: the window at (0, 0) takes the zero border.
  EXPECT_EQ(values<std::uint8_t>(crop(image, 0, 0, 2, 2, 1)), (Bytes{0, 0, 0, 1}));
  EXPECT_EQ(values<std::uint8_t>(crop(image, 3, 2, 2, 3, 1)), (Bytes{8, 9, 0, 0, 0, 0}));
  EXPECT_EQ(values<std::uint8_t>(crop(image, 0, 0, 5, 5, 1)),
            (Bytes{0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0}));
  EXPECT_KILN_ERROR(crop(image, 2, 2, 2, 2), "crop", "2x2 at (2, 2)", "3x3 image padded by 0");
  // Channels are cropped alike; floats too.
  const TensorData two = TensorData::from(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 2, 2});
  const TensorData cut = crop(two, 0, 1, 2, 1);
  EXPECT_EQ(cut.shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(values<float>(cut), (std::vector<float>{2, 4, 6, 8}));

  EXPECT_EQ(values<std::uint8_t>(horizontal_flip(image)), (Bytes{3, 2, 1, 6, 5, 4, 9, 8, 7}));
  EXPECT_EQ(values<float>(horizontal_flip(two)), (std::vector<float>{2, 1, 4, 3, 6, 5, 8, 7}));
}

TEST(Transforms, RandomCropAndFlipDependOnSeedEpochAndIndexOnly) {
  const TensorData image = u8({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  // Every 3x3 window of the image padded by 1 (25 positions) turns up, and only those.
  std::set<Bytes> crops;
  for (std::size_t i = 0; i < 2000; ++i) {
    const Bytes c = values<std::uint8_t>(random_crop(image, 3, 3, 1, 9, {i, 0}));
    EXPECT_EQ(c, values<std::uint8_t>(random_crop(image, 3, 3, 1, 9, {i, 0})));  // repeatable
    crops.insert(c);
  }
  EXPECT_EQ(crops.size(), 9u);  // 3x3 offsets in a 5x5 padded image
  // Another epoch, another place: the same window again only 1 time in 9.
  int same = 0;
  for (std::size_t i = 0; i < 900; ++i)
    same += values<std::uint8_t>(random_crop(image, 3, 3, 1, 9, {i, 0})) ==
            values<std::uint8_t>(random_crop(image, 3, 3, 1, 9, {i, 1}));
  EXPECT_NEAR(same, 100, 40);

  // Flips: about half, changing with the epoch, the index and the seed.
  auto flipped = [&](std::uint64_t seed, std::size_t index, std::uint64_t epoch) {
    return values<std::uint8_t>(random_horizontal_flip(image, 0.5, seed, {index, epoch}))[0] == 3;
  };
  int count = 0, epoch_changes = 0, seed_changes = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    count += flipped(1, i, 0);
    epoch_changes += flipped(1, i, 0) != flipped(1, i, 1);
    seed_changes += flipped(1, i, 0) != flipped(2, i, 0);
  }
  EXPECT_NEAR(count, 500, 70);
  EXPECT_NEAR(epoch_changes, 500, 70);
  EXPECT_NEAR(seed_changes, 500, 70);
  EXPECT_EQ(values<std::uint8_t>(random_horizontal_flip(image, 0.0, 1, {3, 3})), values<std::uint8_t>(image));
  EXPECT_EQ(values<std::uint8_t>(random_horizontal_flip(image, 1.0, 1, {3, 3})),
            values<std::uint8_t>(horizontal_flip(image)));
  EXPECT_KILN_ERROR(random_horizontal_flip(image, 1.5, 1, {}), "probability 1.5");
  EXPECT_KILN_ERROR(random_crop(image, 4, 4, 0, 1, {}), "random_crop", "4x4 window", "3x3 image padded by 0");
}

TEST(Transforms, CropAndFlipWithOneSeedAreIndependent) {
  // Same seed for both: the flip must not follow the crop's offset.
  const TensorData image = u8({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  int agree = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    const bool left = values<std::uint8_t>(random_crop(image, 3, 2, 0, 4, {i, 0}))[0] == 1;
    const bool flip = values<std::uint8_t>(random_horizontal_flip(image, 0.5, 4, {i, 0}))[0] == 3;
    agree += left == flip;
  }
  EXPECT_NEAR(agree, 500, 70);
}

TEST(Transforms, ComposeInAMappedDataset) {
  std::vector<LabeledImage> items;
  for (int i = 0; i < 4; ++i) items.push_back({u8({0, 255, 255, 0}, {2, 2}), i});
  const auto pipeline = compose(RandomHorizontalFlip{1.0, 0}, ToTensor{}, Normalize{{0.5f}, {0.5f}});
  const auto dataset = map(InMemory<LabeledImage>(items), pipeline);
  const LabeledImage item = get_item(dataset, 2, 3);
  EXPECT_EQ(item.label, 2);
  EXPECT_EQ(item.image.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(values<float>(item.image), (std::vector<float>{1, -1, -1, 1}));
}

}  // namespace
}  // namespace kiln::data::test
