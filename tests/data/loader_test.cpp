// DataLoader: batches in order, deterministic shuffling whatever the workers, drop_last,
// bounded prefetch, and clean ends — leaving a loop early joins the workers, an exception
// thrown while loading reaches the loop at its batch.
#include "data_test.hpp"

#include <kiln/data/loader.hpp>
#include <kiln/data/transforms.hpp>
#include <kiln/tensor.hpp>

#include <atomic>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace kiln::data::test {
namespace {

using Ints = Tensor<Cpu, 1, Int>;

InMemory<int> numbers(int n) {
  std::vector<int> items(static_cast<std::size_t>(n));
  std::iota(items.begin(), items.end(), 0);
  return InMemory<int>(items);
}

// A batcher for the CPU backend only: the items as an Int tensor.
constexpr auto to_ints = [](std::vector<int> items, const CpuDevice& device) {
  std::vector<std::int64_t> values(items.begin(), items.end());
  return Ints::from_data(TensorData::from(values, Shape{static_cast<std::int64_t>(values.size())}), device);
};

// Every batch of one loop, as vectors.
template <class Loader> std::vector<std::vector<std::int64_t>> epoch_of(Loader& loader) {
  std::vector<std::vector<std::int64_t>> batches;
  for (auto batch : loader) batches.push_back(batch.template to_vec<std::int64_t>());
  return batches;
}

// Runs one loop, keeping nothing.
template <class Loader> int drain(Loader& loader) {
  int batches = 0;
  for ([[maybe_unused]] auto batch : loader) ++batches;
  return batches;
}

std::vector<std::int64_t> flat(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// The threads of this process (Linux): a loader's workers must be gone when its loop ends.
std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// The threads left after joining should be back to `baseline` (the check waits a little
// for the kernel to drop exited threads from /proc).
void expect_threads(std::size_t baseline) {
  for (int i = 0; i < 200 && thread_count() != baseline; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(thread_count(), baseline);
}

using IntLoader = DataLoader<Cpu, InMemory<int>, decltype(to_ints)>;
static_assert(std::input_iterator<IntLoader::Iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, IntLoader::Iterator>);
static_assert(std::same_as<IntLoader::Batch, Ints>);
static_assert(Batcher<ClassificationBatcher, Cpu, LabeledImage>);
static_assert(!Batcher<ClassificationBatcher, Cpu, int>);  // it takes LabeledImage items only

TEST(DataLoader, BatchesInOrderWithAnyNumberOfWorkers) {
  for (const std::size_t workers : {0u, 1u, 3u, 8u}) {
    SCOPED_TRACE(workers);
    auto loader = make_loader<Cpu>(numbers(10), to_ints, {.batch_size = 4, .workers = workers});
    EXPECT_EQ(loader.size(), 3u);
    const auto batches = epoch_of(loader);
    EXPECT_EQ(batches, (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  }
}

TEST(DataLoader, OrderHoldsWhenWorkersFinishOutOfOrder) {
  // Early items are slow: later batches are ready first, yet arrive after them.
  const auto slow = map(numbers(40), [](int x) {
    std::this_thread::sleep_for(std::chrono::microseconds((40 - x) * 150));
    return x;
  });
  auto loader = make_loader<Cpu>(slow, to_ints, {.batch_size = 2, .workers = 4, .prefetch = 8});
  std::vector<std::int64_t> expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(flat(epoch_of(loader)), expected);
}

TEST(DataLoader, DropLast) {
  auto kept = make_loader<Cpu>(numbers(10), to_ints, {.batch_size = 3});
  EXPECT_EQ(kept.size(), 4u);
  const auto all = epoch_of(kept);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.back(), std::vector<std::int64_t>{9});

  for (const std::size_t workers : {0u, 2u}) {
    auto dropped = make_loader<Cpu>(numbers(10), to_ints, {.batch_size = 3, .workers = workers, .drop_last = true});
    EXPECT_EQ(dropped.size(), 3u);
    const auto batches = epoch_of(dropped);
    ASSERT_EQ(batches.size(), 3u);
    for (const auto& b : batches) EXPECT_EQ(b.size(), 3u);
    EXPECT_EQ(batches.back(), (std::vector<std::int64_t>{6, 7, 8}));
  }
  // Fewer items than a batch: one short batch, or none with drop_last.
  auto short_kept = make_loader<Cpu>(numbers(2), to_ints, {.batch_size = 5});
  EXPECT_EQ(epoch_of(short_kept).size(), 1u);
  auto short_dropped = make_loader<Cpu>(numbers(2), to_ints, {.batch_size = 5, .workers = 2, .drop_last = true});
  EXPECT_EQ(short_dropped.size(), 0u);
  EXPECT_TRUE(epoch_of(short_dropped).empty());
  auto empty = make_loader<Cpu>(numbers(0), to_ints, {.batch_size = 5, .workers = 2});
  EXPECT_TRUE(epoch_of(empty).empty());
  EXPECT_KILN_ERROR(make_loader<Cpu>(numbers(3), to_ints, {.batch_size = 0}), "batch_size");
}

TEST(DataLoader, ShufflingDependsOnSeedAndEpochOnly) {
  const LoaderOptions options{.batch_size = 7, .shuffle = true, .seed = 11};
  std::vector<std::vector<std::int64_t>> reference;  // epochs 0..2 with no workers
  {
    auto loader = make_loader<Cpu>(numbers(50), to_ints, options);
    for (int epoch = 0; epoch < 3; ++epoch) {
      EXPECT_EQ(loader.epoch(), static_cast<std::uint64_t>(epoch));
      reference.push_back(flat(epoch_of(loader)));
    }
  }
  std::vector<std::int64_t> sorted_order(50);
  std::iota(sorted_order.begin(), sorted_order.end(), 0);
  for (const auto& order : reference) {
    std::vector<std::int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, sorted_order);  // each epoch is a permutation
    EXPECT_NE(order, sorted_order);
  }
  EXPECT_NE(reference[0], reference[1]);  // a new order every epoch
  EXPECT_NE(reference[1], reference[2]);

  for (const std::size_t workers : {1u, 2u, 5u}) {
    for (const std::size_t prefetch : {0u, 1u, 9u}) {
      SCOPED_TRACE(fmt::format("workers {}, prefetch {}", workers, prefetch));
      LoaderOptions threaded = options;
      threaded.workers = workers;
      threaded.prefetch = prefetch;
      auto loader = make_loader<Cpu>(numbers(50), to_ints, threaded);
      for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(flat(epoch_of(loader)), reference[epoch]);
      loader.set_epoch(1);  // an epoch can be replayed
      EXPECT_EQ(flat(epoch_of(loader)), reference[1]);
    }
  }
  LoaderOptions other_seed = options;
  other_seed.seed = 12;
  auto reseeded = make_loader<Cpu>(numbers(50), to_ints, other_seed);
  EXPECT_NE(flat(epoch_of(reseeded)), reference[0]);
}

TEST(DataLoader, RandomTransformsGiveTheSameBatchesWithAnyWorkers) {
  // 4x4 images, label = index; random crops and flips keyed by (seed, epoch, index).
  std::vector<LabeledImage> images;
  for (int i = 0; i < 12; ++i) {
    std::vector<std::uint8_t> pixels(16);
    std::iota(pixels.begin(), pixels.end(), static_cast<std::uint8_t>(i * 16));
    images.push_back({TensorData::from(pixels, Shape{4, 4}), i});
  }
  const auto augmented =
      map(InMemory<LabeledImage>(images), compose(RandomCrop{4, 4, 1, 5}, RandomHorizontalFlip{0.5, 6}, ToTensor{}));
  auto run = [&](std::size_t workers, std::uint64_t epoch) {
    auto loader = make_loader<Cpu>(augmented, ClassificationBatcher{},
                                   {.batch_size = 5, .shuffle = true, .seed = 3, .workers = workers});
    loader.set_epoch(epoch);
    std::vector<float> pixels;
    std::vector<std::int64_t> labels;
    for (auto batch : loader) {
      EXPECT_EQ(batch.images.dims()[1], 1);
      const auto p = batch.images.to_vec<float>();
      const auto l = batch.targets.to_vec<std::int64_t>();
      pixels.insert(pixels.end(), p.begin(), p.end());
      labels.insert(labels.end(), l.begin(), l.end());
    }
    return std::pair{pixels, labels};
  };
  const auto epoch0 = run(0, 0);
  EXPECT_EQ(run(3, 0), epoch0);
  EXPECT_EQ(run(6, 0), epoch0);
  const auto epoch1 = run(2, 1);
  EXPECT_EQ(run(0, 1), epoch1);
  EXPECT_NE(epoch1.first, epoch0.first);
}

TEST(DataLoader, PrefetchIsBounded) {
  std::atomic<int> started{0};
  const auto counted = map(numbers(60), [&](int x) {
    if (x % 2 == 0) ++started;  // one per batch of 2
    return x;
  });
  for (const std::size_t prefetch : {1u, 3u}) {
    SCOPED_TRACE(prefetch);
    started = 0;
    auto loader = make_loader<Cpu>(counted, to_ints, {.batch_size = 2, .workers = 4, .prefetch = prefetch});
    int consumed = 0;
    for (auto batch : loader) {
      ++consumed;
      // Give the workers time to run as far ahead as they may.
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      EXPECT_LE(started.load(), consumed + static_cast<int>(prefetch));
      if (consumed == 1) {
        for (int i = 0; i < 400 && started.load() < 1 + static_cast<int>(prefetch); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_EQ(started.load(), 1 + static_cast<int>(prefetch));  // it does load ahead
      }
    }
    EXPECT_EQ(consumed, 30);
  }
}

TEST(DataLoader, BreakingOutJoinsTheWorkers) {
  std::atomic<int> loads{0};
  const auto slow = map(numbers(10000), [&](int x) {
    ++loads;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return x;
  });
  const std::size_t baseline = thread_count();
  auto loader = make_loader<Cpu>(slow, to_ints, {.batch_size = 10, .workers = 4});
  const auto start = std::chrono::steady_clock::now();
  int seen = 0;
  for (auto batch : loader) {
    EXPECT_EQ(batch.to_vec<std::int64_t>()[0], seen * 10);
    if (++seen == 3) {
      EXPECT_GT(thread_count(), baseline);  // the workers are running
      break;
    }
  }
  const int after_break = loads.load();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  expect_threads(baseline);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(loads.load(), after_break);      // nothing loads after the loop
  EXPECT_LT(after_break, 10 * (3 + 8 + 4));  // consumed + prefetched + in progress, not the epoch

  // An iterator dropped mid-epoch, then the loader itself: threads gone too.
  {
    auto scoped = make_loader<Cpu>(slow, to_ints, {.batch_size = 10, .workers = 3});
    auto it = scoped.begin();
    EXPECT_EQ((*it).to_vec<std::int64_t>()[0], 0);
    ++it;
    EXPECT_EQ(it->to_vec<std::int64_t>()[0], 10);
  }
  expect_threads(baseline);
}

TEST(DataLoader, LeavingWhileWorkersWaitForRoomDoesNotHang) {
  // Fast items and a small window: by the time the loop leaves, every worker is blocked
  // waiting for the consumer. Destroying the epoch must wake and join them (a hang here
  // is a failure: ctest's timeout ends it).
  std::atomic<int> loads{0};
  const auto counted = map(numbers(1000), [&](int x) {
    ++loads;
    return x;
  });
  const std::size_t baseline = thread_count();
  for (const std::size_t workers : {1u, 4u}) {
    SCOPED_TRACE(workers);
    loads = 0;
    auto loader = make_loader<Cpu>(counted, to_ints, {.batch_size = 2, .workers = workers, .prefetch = 2});
    for (auto batch : loader) {
      EXPECT_EQ(batch.to_vec<std::int64_t>()[0], 0);
      for (int i = 0; i < 400 && loads.load() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(loads.load(), 6);  // the batch in hand and two ahead, then the workers wait
      break;
    }
    expect_threads(baseline);
  }
}

TEST(DataLoader, AWorkerExceptionIsRethrownAtItsBatch) {
  const auto failing = map(numbers(30), [](int x) {
    if (x == 13) throw std::runtime_error("item 13 is broken");
    return x;
  });
  const std::size_t baseline = thread_count();
  for (const std::size_t workers : {0u, 1u, 4u}) {
    SCOPED_TRACE(workers);
    auto loader = make_loader<Cpu>(failing, to_ints, {.batch_size = 5, .workers = workers});
    std::vector<std::int64_t> first_items;
    try {
      for (auto batch : loader) first_items.push_back(batch.to_vec<std::int64_t>()[0]);
      ADD_FAILURE() << "the loop ended without the exception";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "item 13 is broken");
    }
    // Batches 0 and 1 arrive; batch 2 (items 10..14) throws.
    EXPECT_EQ(first_items, (std::vector<std::int64_t>{0, 5}));
    expect_threads(baseline);
  }
  // A kiln::Error from a batcher keeps its type and message.
  const auto bad_batcher = [](std::vector<int> items, const CpuDevice& device) {
    KILN_CHECK(items.front() != 4, "bad batch starting at {}", items.front());
    return to_ints(std::move(items), device);
  };
  auto loader = make_loader<Cpu>(numbers(8), bad_batcher, {.batch_size = 2, .workers = 2});
  EXPECT_KILN_ERROR(epoch_of(loader), "bad batch starting at 4");
  expect_threads(baseline);
}

TEST(DataLoader, ClassificationBatches) {
  // Two 2x3 grey images (u8) and their labels → [2, 1, 2, 3] floats in [0, 1].
  const ImageSet set(
      TensorData::from(std::vector<std::uint8_t>{0, 51, 102, 153, 204, 255, 255, 0, 0, 0, 0, 255}, Shape{2, 2, 3}),
      {7, 2});
  auto loader = make_loader<Autodiff<Cpu>>(set, ClassificationBatcher{}, {.batch_size = 2});
  int batches = 0;
  for (auto batch : loader) {
    ++batches;
    EXPECT_EQ(batch.images.dims(), (std::array<std::int64_t, 4>{2, 1, 2, 3}));
    const auto pixels = batch.images.to_vec<float>();
    EXPECT_FLOAT_EQ(pixels[1], 0.2f);
    EXPECT_FLOAT_EQ(pixels[5], 1.0f);
    EXPECT_FLOAT_EQ(pixels[6], 1.0f);
    EXPECT_EQ(batch.targets.to_vec<std::int64_t>(), (std::vector<std::int64_t>{7, 2}));
  }
  EXPECT_EQ(batches, 1);
  // Images of different shapes cannot share a batch.
  const auto mixed = InMemory<LabeledImage>(
      std::vector<LabeledImage>{{TensorData::from(std::vector<std::uint8_t>(4), Shape{2, 2}), 0},
                                {TensorData::from(std::vector<std::uint8_t>(6), Shape{2, 3}), 1}});
  auto bad = make_loader<Cpu>(mixed, ClassificationBatcher{}, {.batch_size = 2});
  EXPECT_KILN_ERROR(drain(bad), "ClassificationBatcher", "image 1 has shape [2, 3]", "image 0 has [2, 2]");
}

}  // namespace
}  // namespace kiln::data::test
