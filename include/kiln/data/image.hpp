// Images as the data layer passes them around: a LabeledImage is one image (TensorData,
// [H, W] or channels-first [C, H, W]) and its class; an ImageSet holds many images of one
// size in one tensor, as the MNIST and CIFAR readers return them, and is a Dataset of
// LabeledImage. Compiled into kiln::data.
#pragma once

#include "kiln/core/tensor_data.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::data {

struct LabeledImage {
  TensorData image;  // [H, W] or [C, H, W]
  std::int64_t label = 0;
};

// The two parts of the MNIST, Fashion-MNIST, CIFAR-10 and CIFAR-100 datasets.
enum class Split { train, test };

class ImageSet {
 public:
  // `images`: [N, H, W] or [N, C, H, W], any dtype; one label per image; `classes`, when
  // given, names labels 0..classes.size()-1 and every label must be in that range.
  ImageSet(TensorData images, std::vector<std::int64_t> labels, std::vector<std::string> classes = {});

  std::size_t size() const;
  // Image i ([H, W] or [C, H, W], a copy) and its label.
  LabeledImage get(std::size_t i) const;

  const TensorData& images() const { return state_->images; }
  const std::vector<std::int64_t>& labels() const { return state_->labels; }
  const std::vector<std::string>& classes() const { return state_->classes; }

 private:
  struct State {
    TensorData images;
    std::vector<std::int64_t> labels;
    std::vector<std::string> classes;
  };
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::data
