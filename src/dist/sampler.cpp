// DistributedSampler's indices (kiln/dist/sampler.hpp), as torch.utils.data.DistributedSampler
// computes them, with Kiln's permutation in place of torch's generator.
#include "kiln/dist/sampler.hpp"

#include "kiln/data/random.hpp"

#include <numeric>

namespace kiln::dist {

namespace {
// The Philox stream purpose of the sampler's shuffles (kiln/data/random.hpp's stream_key):
// apart from the loader's (2) and the shuffled dataset's (1).
constexpr std::uint64_t kSamplerPurpose = 0x4449'5354;  // "DIST"
}  // namespace

DistributedSampler::DistributedSampler(std::size_t items, SamplerOptions options)
    : DistributedSampler(items, dist::rank(), dist::world_size(), options) {}

DistributedSampler::DistributedSampler(std::size_t items, int rank, int world_size, SamplerOptions options)
    : items_(items), rank_(rank), world_size_(world_size), options_(options) {
  KILN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
             "DistributedSampler: rank {} is not a rank of a world of {} (0 to {})", rank, world_size, world_size - 1);
  const auto w = static_cast<std::size_t>(world_size);
  // drop_last: the most items every rank can have; else enough for each rank to have as many.
  per_rank_ = options.drop_last ? items / w : (items + w - 1) / w;
}

std::vector<std::size_t> DistributedSampler::indices(std::uint64_t epoch) const {
  std::vector<std::size_t> order;
  if (options_.shuffle) {
    order = data::permutation(items_, data::stream_key(options_.seed, kSamplerPurpose, epoch));
  } else {
    order.resize(items_);
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
  const std::size_t total = total_size();
  if (order.size() > total) order.resize(total);
  // Padding repeats the order from its start, as many times as it takes.
  for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i]);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  for (std::size_t i = static_cast<std::size_t>(rank_); i < total; i += static_cast<std::size_t>(world_size_))
    mine.push_back(order[i]);
  return mine;
}

}  // namespace kiln::dist
