// Image transforms on host images (TensorData [H, W] or channels-first [C, H, W]):
// to_tensor (uint8 → float in [0, 1], HWC → CHW), normalize, random crop with padding and
// random horizontal flip. The random ones draw from (seed, epoch, item index) — see
// random.hpp — so the result does not depend on the loader's workers. Each comes as a
// function (compiled into kiln::data) and as a callable for data::map, which also accepts
// a LabeledImage and keeps its label; compose() chains callables.
#pragma once

#include "kiln/core/tensor_data.hpp"
#include "kiln/data/image.hpp"
#include "kiln/data/random.hpp"

#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::data {

// How the pixels of a rank-3 image are laid out: channels first (Kiln's and the readers'
// layout) or channels last (as decoders and most image files store them).
enum class Layout { chw, hwc };

// uint8 pixels → f32 divided by 255; float images → f32 unchanged. The result is
// [C, H, W]: an [H, W] image becomes [1, H, W], an HWC image is transposed.
TensorData to_tensor(const TensorData& image, Layout layout = Layout::chw);
// (x - mean[c]) / std[c] per channel of a float [C, H, W] (or [H, W]) image; one mean and
// std may serve every channel. The result is f32.
TensorData normalize(const TensorData& image, std::span<const float> mean, std::span<const float> std);
// The window [top, top + height) × [left, left + width) of the image padded with `padding`
// zeros on every side (top and left count in the padded image).
TensorData crop(const TensorData& image, std::int64_t top, std::int64_t left, std::int64_t height, std::int64_t width,
                std::int64_t padding = 0);
// The image mirrored left to right.
TensorData horizontal_flip(const TensorData& image);

// A height × width window at a random place of the image padded by `padding`.
TensorData random_crop(const TensorData& image, std::int64_t height, std::int64_t width, std::int64_t padding,
                       std::uint64_t seed, Sample sample);
// The image mirrored with probability p.
TensorData random_horizontal_flip(const TensorData& image, double p, std::uint64_t seed, Sample sample);

// ---- callables for data::map

struct ToTensor {
  Layout layout = Layout::chw;
  TensorData operator()(const TensorData& image) const { return to_tensor(image, layout); }
  LabeledImage operator()(const LabeledImage& item) const { return {to_tensor(item.image, layout), item.label}; }
};

struct Normalize {
  std::vector<float> mean;
  std::vector<float> std;
  TensorData operator()(const TensorData& image) const { return normalize(image, mean, std); }
  LabeledImage operator()(const LabeledImage& item) const { return {normalize(item.image, mean, std), item.label}; }
};

struct RandomCrop {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t padding = 0;
  std::uint64_t seed = 0;
  TensorData operator()(const TensorData& image, Sample sample) const {
    return random_crop(image, height, width, padding, seed, sample);
  }
  LabeledImage operator()(const LabeledImage& item, Sample sample) const {
    return {(*this)(item.image, sample), item.label};
  }
};

struct RandomHorizontalFlip {
  double p = 0.5;
  std::uint64_t seed = 0;
  TensorData operator()(const TensorData& image, Sample sample) const {
    return random_horizontal_flip(image, p, seed, sample);
  }
  LabeledImage operator()(const LabeledImage& item, Sample sample) const {
    return {(*this)(item.image, sample), item.label};
  }
};

// Applies each transform in turn, passing the Sample to those that take one.
template <class... Fs> struct Compose {
  std::tuple<Fs...> transforms;

  template <class Item> auto operator()(Item item, Sample sample) const {
    return std::apply([&](const auto&... f) { return chain(std::move(item), sample, f...); }, transforms);
  }

 private:
  template <class Item> static Item chain(Item item, Sample) { return item; }
  template <class Item, class F, class... Rest>
  static auto chain(Item item, Sample sample, const F& f, const Rest&... rest) {
    if constexpr (std::is_invocable_v<const F&, Item, Sample>)
      return chain(f(std::move(item), sample), sample, rest...);
    else
      return chain(f(std::move(item)), sample, rest...);
  }
};

template <class... Fs> Compose<Fs...> compose(Fs... transforms) { return Compose<Fs...>{{std::move(transforms)...}}; }

}  // namespace kiln::data
