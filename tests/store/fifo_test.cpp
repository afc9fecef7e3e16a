// Weights files that are not regular files (issue 14): a FIFO that nobody writes to must
// be refused at once by the safetensors and .pt readers, which map files into memory,
// never waited on; a character device likewise.
#include "store_test.hpp"

#include <kiln/store/safetensors.hpp>
#include <kiln/store/torch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace kiln::store::test {
namespace {

// Opens the FIFO's other end for a moment, again and again, once two seconds have passed:
// a reader stuck opening the FIFO then returns, so that it fails the test instead of hanging.
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

TEST(StoreFifo, WeightsReadersRefuseAFifoAtOnce) {
  TempDir dir;
  const std::filesystem::path fifo = dir / "weights.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string name = fifo.string();
  EXPECT_FALSE(waits_on(fifo, [&] {
    EXPECT_KILN_ERROR(SafetensorsFile::open(fifo), name, "is a FIFO (named pipe), not a regular file");
  }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(load_safetensors(fifo), name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(load_torch(fifo), name, "is a FIFO"); }));
  EXPECT_KILN_ERROR(SafetensorsFile::open("/dev/zero"), "/dev/zero", "is a character device, not a regular file");
}

}  // namespace
}  // namespace kiln::store::test
