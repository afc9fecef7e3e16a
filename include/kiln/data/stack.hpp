// Stacking host tensors into batches: what batchers do before the data go to a device.
// Compiled into kiln::data.
#pragma once

#include "kiln/core/tensor_data.hpp"
#include "kiln/data/image.hpp"

#include <span>
#include <string_view>
#include <utility>

namespace kiln::data {

// Stacks equally shaped items of one dtype into one [N, ...item shape] tensor; `who` names
// the caller in the error that a mismatched item gives.
TensorData stack(std::span<const TensorData> items, std::string_view who = "stack");

// The images of a classification batch as f32 [N, C, H, W] (an [H, W] image is one
// channel; uint8 pixels are scaled to [0, 1], as to_tensor does; float ones are kept) and
// the labels as i64 [N]. All images must have one shape.
std::pair<TensorData, TensorData> classification_batch(std::span<const LabeledImage> items);

}  // namespace kiln::data
