// The dataset combinators: what each returns, bounds errors, and the epoch reaching random
// transforms through every layer.
#include "data_test.hpp"

#include <kiln/data/dataset.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>

namespace kiln::data::test {
namespace {

InMemory<int> numbers(int n) {
  std::vector<int> items(static_cast<std::size_t>(n));
  std::iota(items.begin(), items.end(), 0);
  return InMemory<int>(items);
}

template <Dataset D> std::vector<ItemOf<D>> all(const D& dataset, std::uint64_t epoch = 0) {
  std::vector<ItemOf<D>> items;
  for (std::size_t i = 0; i < dataset.size(); ++i) items.push_back(get_item(dataset, i, epoch));
  return items;
}

static_assert(Dataset<InMemory<int>>);
static_assert(!Dataset<int>);
static_assert(std::same_as<ItemOf<InMemory<std::string>>, std::string>);

TEST(Dataset, InMemoryHoldsItsItemsAndChecksIndices) {
  const InMemory<std::string> words(std::vector<std::string>{"a", "b", "c"});
  EXPECT_EQ(words.size(), 3u);
  EXPECT_EQ(words.get(2), "c");
  EXPECT_KILN_ERROR(words.get(3), "InMemory", "index 3", "3 items");
  const InMemory<std::string> copy = words;  // copies share the items
  EXPECT_EQ(&copy.items(), &words.items());
  EXPECT_EQ(in_memory(std::vector<int>{}).size(), 0u);
}

TEST(Dataset, MappedAppliesTheTransformOnGet) {
  const auto squares = map(numbers(5), [](int x) { return std::to_string(x * x); });
  EXPECT_EQ(all(squares), (std::vector<std::string>{"0", "1", "4", "9", "16"}));
  EXPECT_KILN_ERROR(squares.get(5), "Mapped", "index 5");
  // A transform that takes a Sample sees the index in the mapped dataset and the epoch.
  const auto tagged = map(numbers(3), [](int x, Sample s) {
    return x * 1000 + static_cast<int>(s.index) * 10 + static_cast<int>(s.epoch);
  });
  EXPECT_EQ(all(tagged, 7), (std::vector<int>{7, 1017, 2027}));
  EXPECT_EQ(tagged.get(1), 1010);  // get(i) alone is epoch 0
}

TEST(Dataset, PartialAndSplit) {
  const Partial middle(numbers(10), 3, 7);
  EXPECT_EQ(all(middle), (std::vector<int>{3, 4, 5, 6}));
  EXPECT_KILN_ERROR(middle.get(4), "Partial", "index 4", "4 items");
  EXPECT_KILN_ERROR(Partial(numbers(10), 3, 11), "Partial", "[3, 11)", "10 items");
  EXPECT_KILN_ERROR(Partial(numbers(10), 5, 4), "Partial", "[5, 4)");

  const auto [train, valid] = split(numbers(10), 0.75);  // round(7.5) = 8
  EXPECT_EQ(all(train), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(all(valid), (std::vector<int>{8, 9}));
  EXPECT_EQ(split(numbers(10), 0.0).first.size(), 0u);
  EXPECT_EQ(split(numbers(10), 1.0).second.size(), 0u);
  EXPECT_KILN_ERROR(split(numbers(10), 1.5), "split", "fraction 1.5");

  const auto parts = split(numbers(10), {2, 0, 5, 3});
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(all(parts[0]), (std::vector<int>{0, 1}));
  EXPECT_EQ(parts[1].size(), 0u);
  EXPECT_EQ(all(parts[2]), (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_EQ(all(parts[3]), (std::vector<int>{7, 8, 9}));
  EXPECT_KILN_ERROR(split(numbers(10), {2, 5}), "split", "[2, 5]", "add up to 7", "10 items");
  EXPECT_KILN_ERROR(split(numbers(10), {6, 5}), "add up to 11");
}

TEST(Dataset, ShuffledIsASeededPermutation) {
  const auto a = shuffle(numbers(100), 42);
  const std::vector<int> order = all(a);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, all(numbers(100)));              // every item once
  EXPECT_NE(order, all(numbers(100)));               // moved
  EXPECT_EQ(all(shuffle(numbers(100), 42)), order);  // same seed, same order
  EXPECT_NE(all(shuffle(numbers(100), 43)), order);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(static_cast<std::size_t>(order[i]), a.order()[i]);
  EXPECT_KILN_ERROR(a.get(100), "Shuffled", "index 100");
  EXPECT_EQ(shuffle(numbers(0), 1).size(), 0u);
  EXPECT_EQ(all(shuffle(numbers(1), 1)), std::vector<int>{0});
}

TEST(Dataset, PermutationsAreUniform) {
  // All 6 orders of 3 items, each about 1/6 of 6000 keys (a Fisher-Yates that drew j from
  // [0, i) instead of [0, i] would give only the 2 cyclic orders).
  std::map<std::vector<std::size_t>, int> counts;
  for (std::uint64_t key = 0; key < 6000; ++key) ++counts[permutation(3, mix64(key))];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) EXPECT_NEAR(count, 1000, 150);
  // Where item 0 lands among 10, over many keys: uniform too.
  std::vector<int> position(10, 0);
  for (std::uint64_t key = 0; key < 10000; ++key) {
    const auto order = permutation(10, mix64(key));
    ++position[static_cast<std::size_t>(std::find(order.begin(), order.end(), 0u) - order.begin())];
  }
  for (const int count : position) EXPECT_NEAR(count, 1000, 150);
}

TEST(Dataset, ConcatChainsDatasetsOfOneItemType) {
  const auto doubled = map(numbers(2), [](int x) { return 100 + x; });
  const auto joined = concat(numbers(3), InMemory<int>(), doubled, Partial(numbers(10), 8, 10));
  EXPECT_EQ(joined.size(), 7u);
  EXPECT_EQ(all(joined), (std::vector<int>{0, 1, 2, 100, 101, 8, 9}));
  EXPECT_KILN_ERROR(joined.get(7), "Concat", "index 7", "7 items");
}

TEST(Dataset, WindowsOfConsecutiveItems) {
  const auto w = windows(numbers(6), 3);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w.get(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(w.get(3), (std::vector<int>{3, 4, 5}));
  EXPECT_KILN_ERROR(w.get(4), "Windows", "index 4");
  const auto strided = windows(numbers(7), 3, 2);
  ASSERT_EQ(strided.size(), 3u);
  EXPECT_EQ(strided.get(2), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(windows(numbers(2), 3).size(), 0u);
  EXPECT_EQ(windows(numbers(3), 3).size(), 1u);
  EXPECT_KILN_ERROR(windows(numbers(3), 0), "Windows", "length");
  EXPECT_KILN_ERROR(windows(numbers(3), 1, 0), "Windows", "stride");
}

TEST(Dataset, TheEpochReachesTransformsThroughEveryCombinator) {
  const auto seen = map(numbers(6), [](int x, Sample s) { return x * 100 + static_cast<int>(s.epoch); });
  const auto stacked = windows(concat(shuffle(Partial(seen, 1, 5), 3), seen), 2);
  for (const std::uint64_t epoch : {0u, 5u, 9u})
    for (std::size_t i = 0; i < stacked.size(); ++i)
      for (const int item : get_item(stacked, i, epoch)) EXPECT_EQ(item % 100, static_cast<int>(epoch));
}

}  // namespace
}  // namespace kiln::data::test
