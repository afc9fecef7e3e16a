// Image folders: tiny PNG and JPEG files written here with stb_image_write, decoded by
// kiln::data into channels-first u8 images, and the errors for folders and files that
// are wrong.
#include "data_test.hpp"

#include <kiln/data/image_folder.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/data/transforms.hpp>
#include <kiln/tensor.hpp>

#include <stb_image_write.h>

namespace kiln::data::test {
namespace {

// Writes a PNG of `channels` interleaved channels (HWC, as image files hold them).
void write_png(const std::filesystem::path& path, int width, int height, int channels, const Bytes& hwc) {
  std::filesystem::create_directories(path.parent_path());
  ASSERT_EQ(hwc.size(), static_cast<std::size_t>(width * height * channels));
  ASSERT_NE(stbi_write_png(path.c_str(), width, height, channels, hwc.data(), width * channels), 0) << path;
}

Bytes read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A 3x2 RGB image: pixel (y, x) is (10y + x, 100 + 10y + x, 200 + x).
Bytes rgb_pixels() {
  Bytes hwc;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (const int base : {0, 100, 200})
        hwc.push_back(static_cast<std::uint8_t>(base + (base == 200 ? x : 10 * y + x)));
  return hwc;
}

TEST(ImageFolder, ClassesFromSubfoldersAndChannelsFirstPixels) {
  TempDir dir;
  write_png(dir / "root" / "dog" / "b.png", 3, 2, 3, rgb_pixels());
  write_png(dir / "root" / "dog" / "a.PNG", 3, 2, 3, rgb_pixels());
  write_png(dir / "root" / "cat" / "only.png", 2, 2, 1, {0, 64, 128, 255});
  write_text(dir / "root" / "cat" / "notes.txt", "not an image");
  write_text(dir / "root" / "README", "files at the root are not images of a class");

  const ImageFolder folder(dir / "root");
  EXPECT_EQ(folder.classes(), (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(folder.size(), 3u);
  EXPECT_EQ(folder.path(0).filename(), "only.png");
  EXPECT_EQ(folder.path(1).filename(), "a.PNG");  // sorted within a class, extension case ignored
  EXPECT_EQ(folder.label(2), 1);

  const LabeledImage grey = folder.get(0);
  EXPECT_EQ(grey.label, 0);
  EXPECT_EQ(grey.image.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(values<std::uint8_t>(grey.image), (Bytes{0, 64, 128, 255}));

  const LabeledImage rgb = folder.get(2);
  EXPECT_EQ(rgb.label, 1);
  EXPECT_EQ(rgb.image.shape(), (Shape{3, 2, 3}));
  // Red plane, then green, then blue.
  EXPECT_EQ(values<std::uint8_t>(rgb.image),
            (Bytes{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112, 200, 201, 202, 200, 201, 202}));
  EXPECT_KILN_ERROR(folder.get(3), "ImageFolder", "index 3");

  // A fixed channel count converts: grey → RGB repeats the grey value.
  const ImageFolder as_rgb(dir / "root", {.channels = 3});
  const LabeledImage converted = as_rgb.get(0);
  EXPECT_EQ(converted.image.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(values<std::uint8_t>(converted.image), (Bytes{0, 64, 128, 255, 0, 64, 128, 255, 0, 64, 128, 255}));
}

TEST(ImageFolder, JpegAndLoadingWithWorkers) {
  TempDir dir;
  // A flat grey JPEG decodes to nearly its value (JPEG is lossy).
  for (int i = 0; i < 6; ++i) {
    const std::filesystem::path path = dir / "root" / (i % 2 ? "odd" : "even") / fmt::format("{}.jpg", i);
    std::filesystem::create_directories(path.parent_path());
    const Bytes pixels(8 * 8 * 3, static_cast<std::uint8_t>(40 * i));
    ASSERT_NE(stbi_write_jpg(path.c_str(), 8, 8, 3, pixels.data(), 95), 0);
  }
  const ImageFolder folder(dir / "root");
  EXPECT_EQ(folder.classes(), (std::vector<std::string>{"even", "odd"}));
  const LabeledImage first = folder.get(0);
  EXPECT_EQ(first.image.shape(), (Shape{3, 8, 8}));
  for (const std::uint8_t v : values<std::uint8_t>(first.image)) EXPECT_NEAR(v, 0, 3);

  // Decoded by three workers into batches of tensors.
  auto loader = make_loader<Cpu>(folder, ClassificationBatcher{}, {.batch_size = 4, .workers = 3});
  std::vector<std::int64_t> labels;
  for (auto batch : loader) {
    EXPECT_EQ(batch.images.dims()[1], 3);
    const auto l = batch.targets.to_vec<std::int64_t>();
    labels.insert(labels.end(), l.begin(), l.end());
  }
  EXPECT_EQ(labels, (std::vector<std::int64_t>{0, 0, 0, 1, 1, 1}));
}

TEST(ImageFolderMalformed, FoldersAndFiles) {
  TempDir dir;
  EXPECT_KILN_ERROR(ImageFolder(dir / "missing"), "ImageFolder", "missing", "is not a directory");
  std::filesystem::create_directories(dir / "flat");
  write_png(dir / "flat" / "x.png", 1, 1, 1, {5});
  EXPECT_KILN_ERROR(ImageFolder(dir / "flat"), "ImageFolder", "has no subfolders");
  std::filesystem::create_directories(dir / "holes" / "empty");
  write_png(dir / "holes" / "full" / "x.png", 1, 1, 1, {5});
  EXPECT_KILN_ERROR(ImageFolder(dir / "holes"), "ImageFolder", "empty", "holds no image files", ".png");
  EXPECT_KILN_ERROR(ImageFolder(dir / "holes", {.channels = 5}), "channels must be 0");

  // Files that are not what their names say: errors at get, naming the file and stb's reason.
  write_png(dir / "bad" / "c" / "good.png", 2, 2, 1, {1, 2, 3, 4});
  write_text(dir / "bad" / "c" / "text.png", "this is not a PNG");
  const Bytes png = read_bytes(dir / "bad" / "c" / "good.png");
  write_file(dir / "bad" / "c" / "truncated.png",
             Bytes(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2)));
  write_file(dir / "bad" / "c" / "zero.png", Bytes{});
  const ImageFolder bad(dir / "bad");
  ASSERT_EQ(bad.size(), 4u);  // good, text, truncated, zero
  EXPECT_EQ(values<std::uint8_t>(bad.get(0).image), (Bytes{1, 2, 3, 4}));
  EXPECT_KILN_ERROR(bad.get(1), "read_image", "text.png", "cannot decode", "74 68 69 73");
  EXPECT_KILN_ERROR(bad.get(2), "read_image", "truncated.png", "cannot decode");
  EXPECT_KILN_ERROR(bad.get(3), "read_image", "zero.png", "empty");
  EXPECT_KILN_ERROR(decode_image(png, "mem.png", 7), "mem.png", "channels must be 0");
}

}  // namespace
}  // namespace kiln::data::test
