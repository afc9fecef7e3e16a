// DistributedSampler: which items of a dataset each rank reads in an epoch, like PyTorch's
// torch.utils.data.DistributedSampler. The epoch's order (a permutation drawn from (seed,
// epoch), or 0..n-1) is padded by repeating its first items, or cut, to a multiple of the
// world size; rank r takes every world_size-th item from position r. The ranks' shards are
// disjoint and, unpadded, cover the dataset exactly once per epoch.
//
//   auto loader = data::DataLoader<B, ...>(dist::shard(dataset, {.seed = 7}), batcher, {.batch_size = 32});
#pragma once

#include "kiln/data/dataset.hpp"
#include "kiln/dist/process_group.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::dist {

struct SamplerOptions {
  bool shuffle = true;     // a new order each epoch, drawn from (seed, epoch)
  std::uint64_t seed = 0;  // the same on every rank
  bool drop_last = false;  // cut the order to a multiple of the world size, instead of padding it
};

class DistributedSampler {
 public:
  // The shard of rank() among world_size() (dist::init() first).
  explicit DistributedSampler(std::size_t items, SamplerOptions options = {});
  // The shard of `rank` among `world_size` ranks, without the process group.
  DistributedSampler(std::size_t items, int rank, int world_size, SamplerOptions options = {});

  // The items each rank reads per epoch (torch's num_samples), and all ranks together.
  std::size_t size() const { return per_rank_; }
  std::size_t total_size() const { return per_rank_ * static_cast<std::size_t>(world_size_); }
  std::size_t items() const { return items_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // This rank's item indices in epoch `epoch`, in order.
  std::vector<std::size_t> indices(std::uint64_t epoch) const;

 private:
  std::size_t items_ = 0, per_rank_ = 0;
  int rank_ = 0, world_size_ = 1;
  SamplerOptions options_;
};

// A dataset: this rank's shard of `inner`, item i of epoch e being item indices(e)[i] of
// `inner`. DataLoader passes the epoch of each loop, so each epoch is reshuffled. The indices
// of the latest epoch are kept (shared by copies, safe from loader workers).
template <data::Dataset D> class Shard {
 public:
  Shard(D inner, DistributedSampler sampler)
      : inner_(std::move(inner)), sampler_(std::move(sampler)), cache_(std::make_shared<Cache>()) {
    KILN_CHECK(sampler_.items() == inner_.size(), "dist::Shard: the sampler is for {} items, the dataset has {}",
               sampler_.items(), inner_.size());
  }

  std::size_t size() const { return sampler_.size(); }
  data::ItemOf<D> get(std::size_t i, std::uint64_t epoch = 0) const {
    data::detail::check_index("dist::Shard", i, size());
    return data::get_item(inner_, (*indices(epoch))[i], epoch);
  }
  const D& inner() const { return inner_; }
  const DistributedSampler& sampler() const { return sampler_; }

 private:
  struct Cache {
    std::mutex mutex;
    std::uint64_t epoch = 0;
    std::shared_ptr<const std::vector<std::size_t>> indices;
  };
  std::shared_ptr<const std::vector<std::size_t>> indices(std::uint64_t epoch) const {
    const std::lock_guard lock(cache_->mutex);
    if (!cache_->indices || cache_->epoch != epoch) {
      cache_->indices = std::make_shared<const std::vector<std::size_t>>(sampler_.indices(epoch));
      cache_->epoch = epoch;
    }
    return cache_->indices;
  }

  D inner_;
  DistributedSampler sampler_;
  std::shared_ptr<Cache> cache_;
};

// This rank's shard of `dataset` (dist::init() first).
template <data::Dataset D> Shard<D> shard(D dataset, SamplerOptions options = {}) {
  DistributedSampler sampler(dataset.size(), options);
  return Shard<D>(std::move(dataset), std::move(sampler));
}

}  // namespace kiln::dist
