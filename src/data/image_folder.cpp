#include "kiln/data/image_folder.hpp"

#include "bytes.hpp"
#include "image_limits.hpp"
#include "kiln/core/error.hpp"

// Debian's libstb provides the compiled decoders (libstb.so); this is the declarations only.
#include <stb_image.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <memory>

namespace kiln::data {

TensorData decode_image(std::span<const std::uint8_t> bytes, std::string_view name, int channels,
                        std::uint64_t max_pixels, std::uint64_t max_pixels_per_byte) {
  KILN_CHECK(channels >= 0 && channels <= 4, "read_image: {}: channels must be 0 (as stored) to 4, got {}", name,
             channels);
  KILN_CHECK(!bytes.empty(), "read_image: {}: the file is empty", name);
  KILN_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX),
             "read_image: {}: {} bytes are more than stb_image reads", name, bytes.size());
  detail::check_image_header(bytes, name, max_pixels, max_pixels_per_byte);
  int width = 0, height = 0, stored = 0;
  // stbi_failure_reason is thread-local in this stb, so workers can decode in parallel.
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &stored, channels),
      stbi_image_free);
  if (pixels == nullptr) detail::fail_to_decode(bytes, name);
  const int c = channels == 0 ? stored : channels;
  const auto h = static_cast<std::size_t>(height), w = static_cast<std::size_t>(width),
             cs = static_cast<std::size_t>(c);
  // stb gives rows of interleaved channels (HWC); Kiln's images are channels first.
  std::vector<std::byte> chw(cs * h * w);
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x)
      for (std::size_t k = 0; k < cs; ++k)
        chw[(k * h + y) * w + x] = static_cast<std::byte>(pixels.get()[(y * w + x) * cs + k]);
  return TensorData(std::move(chw), Shape{c, height, width}, DType::u8);
}

TensorData read_image(const std::filesystem::path& path, int channels, std::uint64_t max_pixels,
                      std::uint64_t max_pixels_per_byte) {
  return decode_image(detail::read_file("read_image", path), path.string(), channels, max_pixels, max_pixels_per_byte);
}

struct ImageFolder::State {
  std::filesystem::path root;
  ImageFolderOptions options;
  std::vector<std::string> classes;
  std::vector<std::filesystem::path> files;
  std::vector<std::int64_t> labels;
};

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

ImageFolder::ImageFolder(const std::filesystem::path& root, ImageFolderOptions options) {
  constexpr std::string_view reader = "ImageFolder";
  KILN_CHECK(options.channels >= 0 && options.channels <= 4, "{}: channels must be 0 (as stored) to 4, got {}", reader,
             options.channels);
  std::error_code error;
  KILN_CHECK(std::filesystem::is_directory(root, error), "{}: {} is not a directory", reader, root.string());
  auto state = std::make_shared<State>();
  state->root = root;
  std::vector<std::string> extensions;
  for (const std::string& extension : options.extensions) extensions.push_back(lower(extension));
  state->options = std::move(options);

  std::vector<std::filesystem::path> class_dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root))
    if (entry.is_directory()) class_dirs.push_back(entry.path());
  std::sort(class_dirs.begin(), class_dirs.end());
  KILN_CHECK(!class_dirs.empty(), "{}: {} has no subfolders; it should hold one folder of images per class", reader,
             root.string());
  for (const auto& dir : class_dirs) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string extension = lower(entry.path().extension().string());
      if (std::find(extensions.begin(), extensions.end(), extension) != extensions.end()) files.push_back(entry.path());
    }
    KILN_CHECK(!files.empty(), "{}: class folder {} holds no image files (names ending {})", reader, dir.string(),
               fmt::join(extensions, ", "));
    std::sort(files.begin(), files.end());
    const auto label = static_cast<std::int64_t>(state->classes.size());
    state->classes.push_back(dir.filename().string());
    for (auto& file : files) {
      state->files.push_back(std::move(file));
      state->labels.push_back(label);
    }
  }
  state_ = std::move(state);
}

std::size_t ImageFolder::size() const { return state_->files.size(); }

LabeledImage ImageFolder::get(std::size_t i) const {
  KILN_CHECK(i < size(), "ImageFolder: index {} is out of range for a dataset of {} items", i, size());
  return {read_image(state_->files[i], state_->options.channels, state_->options.max_pixels,
                     state_->options.max_pixels_per_byte), state_->labels[i]};
}

const std::vector<std::string>& ImageFolder::classes() const { return state_->classes; }

const std::filesystem::path& ImageFolder::path(std::size_t i) const {
  KILN_CHECK(i < size(), "ImageFolder: index {} is out of range for a dataset of {} items", i, size());
  return state_->files[i];
}

std::int64_t ImageFolder::label(std::size_t i) const {
  KILN_CHECK(i < size(), "ImageFolder: index {} is out of range for a dataset of {} items", i, size());
  return state_->labels[i];
}

}  // namespace kiln::data
