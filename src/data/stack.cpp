#include "kiln/data/stack.hpp"

#include "kiln/core/error.hpp"

#include <cstring>

namespace kiln::data {

TensorData stack(std::span<const TensorData> items, std::string_view who) {
  KILN_CHECK(!items.empty(), "{}: no items to stack", who);
  const Shape& shape = items[0].shape();
  const DType dtype = items[0].dtype();
  const std::size_t bytes = items[0].bytes().size();
  std::vector<std::int64_t> dims{static_cast<std::int64_t>(items.size())};
  dims.insert(dims.end(), shape.begin(), shape.end());
  std::vector<std::byte> out(bytes * items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    KILN_CHECK(items[i].shape() == shape && items[i].dtype() == dtype,
               "{}: item {} is {} {} but item 0 is {} {}: the items of a batch must have one shape and dtype", who, i,
               items[i].dtype(), items[i].shape(), dtype, shape);
    if (bytes > 0) std::memcpy(out.data() + i * bytes, items[i].bytes().data(), bytes);
  }
  return TensorData(std::move(out), Shape(std::move(dims)), dtype);
}

std::pair<TensorData, TensorData> classification_batch(std::span<const LabeledImage> items) {
  constexpr std::string_view who = "ClassificationBatcher";
  KILN_CHECK(!items.empty(), "{}: no items to batch", who);
  const Shape& first = items[0].image.shape();
  KILN_CHECK(first.rank() == 2 || first.rank() == 3, "{}: image 0 has shape {}; images must be [H, W] or [C, H, W]",
             who, first);
  const Shape shape = first.rank() == 2 ? Shape{1, first[0], first[1]} : first;
  const auto numel = static_cast<std::size_t>(shape.numel());
  std::vector<float> pixels(numel * items.size());
  std::vector<std::int64_t> labels(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const TensorData& image = items[i].image;
    KILN_CHECK(image.shape() == first,
               "{}: image {} has shape {} but image 0 has {}: the images of a batch must have one shape (resize or "
               "crop them, or read them with a fixed number of channels)",
               who, i, image.shape(), first);
    float* out = pixels.data() + i * numel;
    if (image.dtype() == DType::u8) {
      const auto in = image.as<std::uint8_t>();
      for (std::size_t k = 0; k < numel; ++k) out[k] = static_cast<float>(in[k]) / 255.0f;
    } else {
      KILN_CHECK(is_float(image.dtype()), "{}: image {} is {}; images must be u8 or floating point", who, i,
                 image.dtype());
      const std::vector<float> in = image.to_vec<float>();
      std::memcpy(out, in.data(), numel * sizeof(float));
    }
    labels[i] = items[i].label;
  }
  const auto n = static_cast<std::int64_t>(items.size());
  return {TensorData::from(pixels, Shape{n, shape[0], shape[1], shape[2]}), TensorData::from(labels, Shape{n})};
}

}  // namespace kiln::data
