// Batchers turn the items of one batch into tensors on a device. A batcher is either
// generic over the backend — a member template `batch<B>(items, device)`, like
// ClassificationBatcher below — or a callable `(std::vector<Item>, const Device&)` for one
// backend (a lambda). The loader runs it on its worker threads, so it must not change
// shared state; backends' from_data is safe to call from several threads.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/data/image.hpp"
#include "kiln/data/stack.hpp"
#include "kiln/tensor/tensor.hpp"

#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::data {

template <class Bt, class B, class Item>
concept Batcher = Backend<B> &&(
    requires(const Bt& batcher, std::vector<Item> items, const typename B::Device& device) {
      batcher.template batch<B>(std::move(items), device);
    } ||
    requires(const Bt& batcher, std::vector<Item> items, const typename B::Device& device) {
      batcher(std::move(items), device);
    });

// Runs a batcher of either form.
template <Backend B, class Item, Batcher<B, Item> Bt>
auto make_batch(const Bt& batcher, std::vector<Item> items, const typename B::Device& device) {
  if constexpr (requires { batcher.template batch<B>(std::move(items), device); })
    return batcher.template batch<B>(std::move(items), device);
  else
    return batcher(std::move(items), device);
}

template <Backend B, class Item, Batcher<B, Item> Bt> using BatchOf = decltype(make_batch<B, Item, Bt>(
    std::declval<const Bt&>(), std::declval<std::vector<Item>>(), std::declval<const typename B::Device&>()));

template <Backend B> struct ClassificationBatch {
  Tensor<B, 4> images;        // [N, C, H, W]
  Tensor<B, 1, Int> targets;  // [N], i64
};

// LabeledImage items → ClassificationBatch<B>.
struct ClassificationBatcher {
  template <Backend B>
  ClassificationBatch<B> batch(std::vector<LabeledImage> items, const typename B::Device& device) const {
    auto [images, targets] = classification_batch(items);
    return {Tensor<B, 4>::from_data(images, device), Tensor<B, 1, Int>::from_data(targets, device)};
  }
};

}  // namespace kiln::data
