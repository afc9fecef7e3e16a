#include "kiln/data/image.hpp"

#include "kiln/core/error.hpp"

#include <cstring>

namespace kiln::data {

ImageSet::ImageSet(TensorData images, std::vector<std::int64_t> labels, std::vector<std::string> classes) {
  const Shape& shape = images.shape();
  KILN_CHECK(shape.rank() == 3 || shape.rank() == 4, "ImageSet: images must be [N, H, W] or [N, C, H, W], got shape {}",
             shape);
  KILN_CHECK(static_cast<std::int64_t>(labels.size()) == shape[0], "ImageSet: {} images (shape {}) but {} labels",
             shape[0], shape, labels.size());
  if (!classes.empty()) {
    for (std::size_t i = 0; i < labels.size(); ++i)
      KILN_CHECK(labels[i] >= 0 && labels[i] < static_cast<std::int64_t>(classes.size()),
                 "ImageSet: label {} of image {} is outside the {} classes (0..{})", labels[i], i, classes.size(),
                 classes.size() - 1);
  }
  state_ = std::make_shared<const State>(State{std::move(images), std::move(labels), std::move(classes)});
}

std::size_t ImageSet::size() const { return state_->labels.size(); }

LabeledImage ImageSet::get(std::size_t i) const {
  KILN_CHECK(i < size(), "ImageSet: index {} is out of range for a dataset of {} items", i, size());
  const TensorData& images = state_->images;
  const std::vector<std::int64_t> dims(images.shape().dims().begin() + 1, images.shape().dims().end());
  const Shape shape(dims);
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(images.dtype());
  std::vector<std::byte> image(bytes);
  if (bytes > 0) std::memcpy(image.data(), images.bytes().data() + i * bytes, bytes);
  return {TensorData(std::move(image), shape, images.dtype()), state_->labels[i]};
}

}  // namespace kiln::data
