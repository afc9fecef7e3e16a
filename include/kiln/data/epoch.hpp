// What DataLoader needs that is not a template, compiled once into kiln::data: its
// options, the plan of an epoch (which items go in which batch) and the worker threads
// that load batches ahead of the loop (Prefetcher).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace kiln::data {

struct LoaderOptions {
  std::size_t batch_size = 1;
  bool shuffle = false;  // a new order each epoch, drawn from (seed, epoch)
  std::uint64_t seed = 0;
  std::size_t workers = 0;   // loader threads; 0 loads each batch in the loop's thread, when it is reached
  std::size_t prefetch = 0;  // batches loaded ahead of the loop (with workers); 0 means 2 per worker
  bool drop_last = false;    // leave out a last batch smaller than batch_size
};

namespace detail {

// The item indices of each batch of one epoch.
class EpochPlan {
 public:
  EpochPlan(std::size_t items, const LoaderOptions& options, std::uint64_t epoch);
  std::size_t batches() const { return batches_; }
  std::span<const std::size_t> batch(std::size_t b) const;

 private:
  std::vector<std::size_t> order_;
  std::size_t batch_size_ = 1;
  std::size_t batches_ = 0;
};

// Runs job(0), job(1)... job(count - 1) on `workers` threads, at most `window` jobs ahead of
// the consumer, who takes them in order: wait(i) blocks until job i is done (rethrowing
// what it threw), and release(i) then frees its place. With no workers, wait(i) runs job i
// itself. The destructor stops handing out jobs and joins the threads (a job that is
// running finishes first).
class Prefetcher {
 public:
  Prefetcher(std::size_t count, std::size_t workers, std::size_t window, std::function<void(std::size_t)> job);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  void wait(std::size_t index);
  void release(std::size_t index);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace detail

}  // namespace kiln::data
