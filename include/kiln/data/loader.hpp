// DataLoader<B, Dataset, Batcher>: iterates a dataset in batches of tensors on a device,
// `for (auto batch : loader)`. Each loop is one epoch; the order of an epoch depends on
// (seed, epoch) only, and batches arrive in that order whatever the number of workers.
// Workers load up to `prefetch` batches ahead of the loop; leaving the loop early (break,
// an exception) stops and joins them; an exception thrown while loading a batch is
// rethrown in the loop, at that batch. The threads live in kiln::data (detail::Prefetcher).
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/data/batcher.hpp"
#include "kiln/data/dataset.hpp"
#include "kiln/data/epoch.hpp"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::data {

template <Backend B, Dataset D, class Bt>
requires Batcher<Bt, B, ItemOf<D>>
class DataLoader {
 public:
  using Item = ItemOf<D>;
  using Batch = BatchOf<B, Item, Bt>;
  using Device = typename B::Device;

  DataLoader(D dataset, Bt batcher, LoaderOptions options = {}, Device device = {})
      : dataset_(std::move(dataset)), batcher_(std::move(batcher)), options_(options), device_(std::move(device)) {
    KILN_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be at least 1");
  }

  // Batches per epoch.
  std::size_t size() const {
    const std::size_t n = dataset_.size(), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
  }
  const D& dataset() const { return dataset_; }
  const LoaderOptions& options() const { return options_; }
  // The epoch that the next loop (begin()) runs; each begin() moves it on by one.
  std::uint64_t epoch() const { return next_epoch_; }
  void set_epoch(std::uint64_t epoch) { next_epoch_ = epoch; }

  // Loads batch `b` of `plan` (what the workers run).
  Batch load(const detail::EpochPlan& plan, std::size_t b, std::uint64_t epoch) const {
    std::vector<Item> items;
    const auto indices = plan.batch(b);
    items.reserve(indices.size());
    for (const std::size_t i : indices) items.push_back(get_item(dataset_, i, epoch));
    return make_batch<B, Item>(batcher_, std::move(items), device_);
  }

  class Iterator;
  Iterator begin() { return Iterator(std::make_unique<Run>(*this, next_epoch_++)); }
  std::default_sentinel_t end() const { return {}; }

 private:
  // One epoch in progress: the plan, the batches that workers have loaded, the workers.
  class Run {
   public:
    Run(const DataLoader& loader, std::uint64_t epoch)
        : plan_(loader.dataset_.size(), loader.options_, epoch),
          window_(loader.options_.workers == 0    ? 1
                  : loader.options_.prefetch == 0 ? 2 * loader.options_.workers
                                                  : loader.options_.prefetch),
          slots_(window_) {
      // Job b writes slot b % window: the prefetcher never runs more than window jobs
      // ahead of the consumer, so a slot is free again before it is reused.
      prefetcher_ = std::make_unique<detail::Prefetcher>(
          plan_.batches(), loader.options_.workers, window_,
          [this, &loader, epoch](std::size_t b) { slots_[b % window_].emplace(loader.load(plan_, b, epoch)); });
      advance();
    }

    bool done() const { return !current_.has_value(); }
    Batch& current() { return *current_; }
    void advance() {
      current_.reset();
      if (next_ == plan_.batches()) return;
      prefetcher_->wait(next_);
      std::optional<Batch>& slot = slots_[next_ % window_];
      current_.emplace(std::move(*slot));
      slot.reset();
      prefetcher_->release(next_);
      ++next_;
    }

   private:
    detail::EpochPlan plan_;
    std::size_t window_;
    std::vector<std::optional<Batch>> slots_;
    std::optional<Batch> current_;
    std::size_t next_ = 0;
    // Last, so that it is destroyed (its workers joined) before the slots they write.
    std::unique_ptr<detail::Prefetcher> prefetcher_;
  };

 public:
  // A move-only input iterator that owns its epoch: destroying it (the end of the loop,
  // a break) stops the workers.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator() = default;
    Batch& operator*() const { return run_->current(); }
    Batch* operator->() const { return &run_->current(); }
    Iterator& operator++() {
      run_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return !it.run_ || it.run_->done(); }

   private:
    friend class DataLoader;
    explicit Iterator(std::unique_ptr<Run> run) : run_(std::move(run)) {}
    std::unique_ptr<Run> run_;
  };

 private:
  D dataset_;
  Bt batcher_;
  LoaderOptions options_;
  Device device_;
  std::uint64_t next_epoch_ = 0;
};

// DataLoader with the backend named and the rest deduced: make_loader<Cpu>(dataset, batcher, options).
template <Backend B, Dataset D, class Bt>
requires Batcher<Bt, B, ItemOf<D>> DataLoader<B, D, Bt> make_loader(D dataset, Bt batcher, LoaderOptions options = {},
                                                                    typename B::Device device = {}) {
  return DataLoader<B, D, Bt>(std::move(dataset), std::move(batcher), options, std::move(device));
}

}  // namespace kiln::data
