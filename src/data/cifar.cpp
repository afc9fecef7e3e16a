#include "kiln/data/cifar.hpp"

#include "bytes.hpp"
#include "kiln/core/error.hpp"

#include <string>
#include <vector>

namespace kiln::data {

namespace {

constexpr std::size_t pixels = 3 * 32 * 32;

const std::vector<std::string> cifar10_classes{"airplane", "automobile", "bird",  "cat",  "deer",
                                               "dog",      "frog",       "horse", "ship", "truck"};

// Appends the records of one file: `label_bytes` label bytes (CIFAR-10: one, below 10;
// CIFAR-100: coarse below 20, then fine below 100), then the pixels; the label kept is
// byte `label_at` of the record.
void read_records(std::string_view reader, const std::filesystem::path& path, std::size_t label_bytes,
                  std::size_t label_at, std::vector<std::byte>& images, std::vector<std::int64_t>& labels) {
  std::string name;
  const std::vector<std::uint8_t> bytes = detail::read_maybe_gzip(reader, path, name);
  const std::size_t record = label_bytes + pixels;
  KILN_CHECK(!bytes.empty(), "{}: {}: the file is empty", reader, name);
  KILN_CHECK(bytes.size() % record == 0,
             "{}: {}: {} bytes are not a whole number of {}-byte records ({} records and {} bytes over): the file is "
             "truncated or not in the binary format",
             reader, name, bytes.size(), record, bytes.size() / record, bytes.size() % record);
  const std::size_t count = bytes.size() / record;
  images.reserve(images.size() + count * pixels);
  for (std::size_t r = 0; r < count; ++r) {
    const std::uint8_t* at = bytes.data() + r * record;
    for (std::size_t b = 0; b < label_bytes; ++b) {
      // Every label byte is checked, kept or not: a wrong one means a misread file.
      const std::size_t limit = label_bytes == 1 ? 10 : (b == 0 ? 20 : 100);
      KILN_CHECK(at[b] < limit, "{}: {}: record {} (byte {}) has {}label {}, outside 0..{}", reader, name, r,
                 r * record + b, label_bytes == 1 ? "" : (b == 0 ? "coarse " : "fine "), at[b], limit - 1);
    }
    labels.push_back(at[label_at]);
    const auto* pixel_bytes = reinterpret_cast<const std::byte*>(at + label_bytes);
    images.insert(images.end(), pixel_bytes, pixel_bytes + pixels);
  }
}

ImageSet image_set(std::vector<std::byte> images, std::vector<std::int64_t> labels, std::vector<std::string> classes) {
  const auto n = static_cast<std::int64_t>(labels.size());
  return ImageSet(TensorData(std::move(images), Shape{n, 3, 32, 32}, DType::u8), std::move(labels), std::move(classes));
}

}  // namespace

ImageSet read_cifar10(std::span<const std::filesystem::path> files) {
  KILN_CHECK(!files.empty(), "read_cifar10: no files given");
  std::vector<std::byte> images;
  std::vector<std::int64_t> labels;
  for (const auto& file : files) read_records("read_cifar10", file, 1, 0, images, labels);
  return image_set(std::move(images), std::move(labels), cifar10_classes);
}

ImageSet read_cifar10(const std::filesystem::path& file) { return read_cifar10(std::span(&file, 1)); }

ImageSet read_cifar100(const std::filesystem::path& file, CifarLabels kind) {
  std::vector<std::byte> images;
  std::vector<std::int64_t> labels;
  const bool fine = kind == CifarLabels::fine;
  read_records("read_cifar100", file, 2, fine ? 1 : 0, images, labels);
  std::vector<std::string> classes;
  for (int c = 0; c < (fine ? 100 : 20); ++c) classes.push_back(std::to_string(c));
  return image_set(std::move(images), std::move(labels), std::move(classes));
}

ImageSet cifar10(Split split, const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  if (split == Split::train) {
    for (int b = 1; b <= 5; ++b) files.push_back(directory / ("data_batch_" + std::to_string(b) + ".bin"));
  } else {
    files.push_back(directory / "test_batch.bin");
  }
  return read_cifar10(files);
}

ImageSet cifar100(Split split, const std::filesystem::path& directory, CifarLabels labels) {
  return read_cifar100(directory / (split == Split::train ? "train.bin" : "test.bin"), labels);
}

}  // namespace kiln::data
