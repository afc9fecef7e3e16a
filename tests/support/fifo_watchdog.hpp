// A watchdog for tests that hand a FIFO to a reader: a reader that blocks opening it (or
// reading it) would hang the test, so after two seconds the watchdog opens the FIFO's other
// end for a moment, again and again, until the reader returns, and says it had to.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace kiln::test {

class FifoWatchdog {
 public:
  explicit FifoWatchdog(std::filesystem::path fifo) : fifo_(std::move(fifo)), thread_([this] { watch(); }) {}
  ~FifoWatchdog() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;

  bool fired() const { return fired_; }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, std::chrono::seconds(2), [&] { return done_; })) return;
    while (!done_) {
      // Non-blocking: succeeds only while a reader has the FIFO open.
      const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        fired_ = true;
        ::close(fd);
      }
      wake_.wait_for(lock, std::chrono::milliseconds(20), [&] { return done_; });
    }
  }

  std::filesystem::path fifo_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;  // last, so that it starts after the members it uses
};

// True when `read` waited on `fifo` for a writer (and had to be let go by the watchdog).
bool waits_on(const std::filesystem::path& fifo, const std::function<void()>& read) {
  const FifoWatchdog watchdog(fifo);
  read();
  return watchdog.fired();
}

}  // namespace kiln::test
