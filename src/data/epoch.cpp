#include "kiln/data/epoch.hpp"

#include "kiln/core/error.hpp"
#include "kiln/data/random.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

namespace kiln::data::detail {

EpochPlan::EpochPlan(std::size_t items, const LoaderOptions& options, std::uint64_t epoch)
    : batch_size_(options.batch_size) {
  KILN_CHECK(batch_size_ > 0, "DataLoader: batch_size must be at least 1");
  if (options.shuffle) {
    order_ = permutation(items, stream_key(options.seed, /*purpose: loader shuffle*/ 2, epoch));
  } else {
    order_.resize(items);
    std::iota(order_.begin(), order_.end(), std::size_t{0});
  }
  batches_ = options.drop_last ? items / batch_size_ : (items + batch_size_ - 1) / batch_size_;
}

std::span<const std::size_t> EpochPlan::batch(std::size_t b) const {
  KILN_CHECK(b < batches_, "DataLoader: batch {} is out of range for an epoch of {} batches", b, batches_);
  const std::size_t begin = b * batch_size_;
  return std::span<const std::size_t>(order_).subspan(begin, std::min(batch_size_, order_.size() - begin));
}

struct Prefetcher::State {
  std::size_t count = 0, window = 1;
  std::function<void(std::size_t)> job;
  std::mutex mutex;
  std::condition_variable work;  // workers: room in the window, or stop
  std::condition_variable done;  // consumer: a job finished
  std::size_t next = 0;          // the next job to hand out
  std::size_t released = 0;      // jobs below this are consumed; jobs below released + window may run
  std::vector<char> finished;    // per window slot (job % window)
  std::vector<std::exception_ptr> errors;
  bool stop = false;
  std::vector<std::thread> threads;

  void stop_and_join() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    work.notify_all();
    for (std::thread& thread : threads)
      if (thread.joinable()) thread.join();
  }

  void work_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      work.wait(lock, [&] { return stop || next >= count || next < released + window; });
      if (stop || next >= count) return;
      const std::size_t index = next++;
      lock.unlock();
      std::exception_ptr error;
      try {
        job(index);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      finished[index % window] = 1;
      errors[index % window] = error;
      done.notify_all();
    }
  }
};

Prefetcher::Prefetcher(std::size_t count, std::size_t workers, std::size_t window, std::function<void(std::size_t)> job)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.count = count;
  s.window = std::max<std::size_t>(window, 1);
  s.job = std::move(job);
  s.finished.assign(s.window, 0);
  s.errors.resize(s.window);
  // No more threads than jobs: a short epoch does not start idle threads.
  const std::size_t threads = std::min(workers, count);
  s.threads.reserve(threads);
  try {
    for (std::size_t t = 0; t < threads; ++t) s.threads.emplace_back([&s] { s.work_loop(); });
  } catch (...) {
    s.stop_and_join();  // the threads already started
    throw;
  }
}

Prefetcher::~Prefetcher() { state_->stop_and_join(); }

void Prefetcher::wait(std::size_t index) {
  State& s = *state_;
  KILN_CHECK(index < s.count, "DataLoader: batch {} is out of range for an epoch of {} batches", index, s.count);
  if (s.threads.empty()) {
    s.job(index);
    return;
  }
  std::unique_lock lock(s.mutex);
  KILN_CHECK(index >= s.released && index < s.released + s.window,
             "DataLoader: batch {} was waited for out of order (next is {})", index, s.released);
  s.done.wait(lock, [&] { return s.finished[index % s.window] != 0; });
  if (std::exception_ptr error = std::exchange(s.errors[index % s.window], nullptr)) {
    s.finished[index % s.window] = 0;
    std::rethrow_exception(error);
  }
}

void Prefetcher::release(std::size_t index) {
  State& s = *state_;
  if (s.threads.empty()) return;
  {
    std::lock_guard lock(s.mutex);
    s.finished[index % s.window] = 0;
    s.released = index + 1;
  }
  s.work.notify_all();
}

}  // namespace kiln::data::detail
