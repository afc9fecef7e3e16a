// DistributedSampler: torch's shards (strided over the padded or cut order), each epoch's
// shards covering the dataset once, reshuffled by epoch; dist::shard in a DataLoader on the
// real ranks (run by ctest on 1, 2 and 3 ranks).
#include "expect_error.hpp"

#include <kiln/cpu/instances.hpp>
#include <kiln/data.hpp>
#include <kiln/dist.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace {

using namespace kiln;
using Indices = std::vector<std::size_t>;

TEST(Sampler, ShardsAsTorchWithoutShuffling) {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)
  const Indices expected_padded[] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  const Indices expected_dropped[] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; ++r) {
    const dist::DistributedSampler padded(10, r, 3, {.shuffle = false});
    EXPECT_EQ(padded.size(), 4u);
    EXPECT_EQ(padded.total_size(), 12u);
    EXPECT_EQ(padded.indices(0), expected_padded[r]);
    const dist::DistributedSampler dropped(10, r, 3, {.shuffle = false, .drop_last = true});
    EXPECT_EQ(dropped.size(), 3u);
    EXPECT_EQ(dropped.indices(5), expected_dropped[r]);
  }
  // Padding longer than the dataset repeats it: 2 items on 5 ranks.
  const Indices tiny[] = {{0}, {1}, {0}, {1}, {0}};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(dist::DistributedSampler(2, r, 5, {.shuffle = false}).indices(0), tiny[r]);
}

TEST(Sampler, EachEpochCoversTheDatasetOnceAcrossRanks) {
  for (const std::size_t items : {12u, 13u, 1u, 0u}) {
    for (const int world : {1, 2, 3, 5}) {
      for (const bool drop_last : {false, true}) {
        SCOPED_TRACE(testing::Message() << items << " items, " << world << " ranks, drop_last " << drop_last);
        for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
          Indices all;
          for (int r = 0; r < world; ++r) {
            const dist::DistributedSampler sampler(items, r, world, {.seed = 3, .drop_last = drop_last});
            const Indices mine = sampler.indices(epoch);
            EXPECT_EQ(mine.size(), sampler.size());
            all.insert(all.end(), mine.begin(), mine.end());
          }
          std::vector<int> seen(items, 0);
          for (const std::size_t i : all) {
            ASSERT_LT(i, items);
            ++seen[i];
          }
          const auto w = static_cast<std::size_t>(world);
          if (drop_last) {
            EXPECT_EQ(all.size(), items / w * w);
            EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n <= 1; }));
          } else {
            EXPECT_EQ(all.size(), (items + w - 1) / w * w);
            // Every item at least once; the padding repeats the order's first items.
            EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n >= 1; }));
            if (all.size() - items < items)
              EXPECT_EQ(all.size() - items, static_cast<std::size_t>(std::count(seen.begin(), seen.end(), 2)));
          }
        }
      }
    }
  }
}

TEST(Sampler, ReshufflesEachEpochTheSameWayForTheSameSeed) {
  const dist::DistributedSampler a(100, 1, 2, {.seed = 7}), b(100, 1, 2, {.seed = 7}), c(100, 1, 2, {.seed = 8});
  EXPECT_EQ(a.indices(3), b.indices(3));
  EXPECT_NE(a.indices(3), a.indices(4));
  EXPECT_NE(a.indices(3), c.indices(3));
  Indices sorted = a.indices(0);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, a.indices(0));  // shuffled, not 0, 2, 4...
}

TEST(Sampler, Errors) {
  EXPECT_KILN_ERROR(dist::DistributedSampler(10, 3, 3), "DistributedSampler", "rank 3");
  EXPECT_KILN_ERROR(dist::DistributedSampler(10, 0, 0), "DistributedSampler");
  EXPECT_KILN_ERROR((dist::Shard<data::InMemory<int>>(data::in_memory(std::vector<int>{1, 2}),
                                                      dist::DistributedSampler(3, 0, 1))),
                    "dist::Shard", "3 items", "has 2");
}

// On the real ranks: each rank loads its shard with a DataLoader; gathered, the epoch's
// items are the dataset's, once each; the next epoch orders them differently.
TEST(Sampler, ShardsInADataLoaderCoverTheDatasetOnTheRanks) {
  constexpr int kItems = 12;  // divides by 1, 2 and 3 ranks: no padding
  std::vector<int> items(kItems);
  std::iota(items.begin(), items.end(), 0);
  const auto to_ints = [](std::vector<int> batch, const CpuDevice& device) {
    std::vector<std::int64_t> values(batch.begin(), batch.end());
    return Tensor<Cpu, 1, Int>::from_data(TensorData::from(values, Shape{static_cast<std::int64_t>(values.size())}), device);
  };
  auto loader = data::make_loader<Cpu>(dist::shard(data::in_memory(items), {.seed = 11}), to_ints,
                                       {.batch_size = 3, .workers = 2});
  std::vector<std::int64_t> previous;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> mine;
    for (const auto& batch : loader) {
      const auto values = batch.to_vec<std::int64_t>();
      mine.insert(mine.end(), values.begin(), values.end());
    }
    ASSERT_EQ(mine.size(), static_cast<std::size_t>(kItems / dist::world_size()));
    std::vector<std::int64_t> all =
        dist::all_gather(TensorData::from(mine, Shape{static_cast<std::int64_t>(mine.size())})).to_vec<std::int64_t>();
    const std::vector<std::int64_t> order = all;
    std::sort(all.begin(), all.end());
    std::vector<std::int64_t> expected(kItems);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected) << "epoch " << epoch;
    if (epoch == 1) EXPECT_NE(order, previous);
    previous = order;
  }
}

}  // namespace
