#include "kiln/train/interrupt.hpp"

#include "kiln/core/error.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

// Ctrl-C is taken on a thread of its own, never on a thread that computes. A signal handler
// runs on whichever thread the kernel picks and pushes its frame on that thread's stack;
// delivered to a thread inside oneDNN's JIT-compiled kernels it corrupted the heap (3 of
// 75 interrupted runs). So while a guard lives SIGINT is blocked on the training thread (threads it
// starts, the data loader's workers, inherit that), the CPU backend's OpenMP workers block
// asynchronous signals for good (backends/cpu/src/threads.cpp), and a watcher thread takes
// SIGINT with sigtimedwait. The handler stays installed for any other thread of the program
// that does not block SIGINT; it only sets the flag. A SIGINT raised on the training thread
// itself (raise(), as tests do) waits blocked on that thread: requested() takes it from there.
namespace kiln::train {
namespace {

std::atomic<int> g_requested{0};  // set by the watcher or the handler, read by the loop
static_assert(std::atomic<int>::is_always_lock_free, "the handler writes it: it must be async-signal-safe");
int g_active = 0;  // live guards (changed on the training thread only)

// The second Ctrl-C before the loop noticed the first: the default action, so that a stuck
// step can still be killed. Async-signal-safe.
void end_the_process() {
  std::signal(SIGINT, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(SIGINT);
}

void note_interrupt() {
  if (g_requested != 0) end_the_process();
  g_requested = 1;
}

extern "C" void on_sigint(int) { note_interrupt(); }

sigset_t sigint_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

// Takes a SIGINT pending on this thread or on the process, if there is one, without waiting.
bool take_pending_sigint() {
  sigset_t pending;
  if (sigpending(&pending) != 0 || sigismember(&pending, SIGINT) != 1) return false;
  const sigset_t set = sigint_set();
  const timespec now{0, 0};
  return sigtimedwait(&set, nullptr, &now) == SIGINT;
}

// The watcher: one thread, shared by nested guards.
std::mutex g_watcher_mutex;
std::thread g_watcher;
std::atomic<bool> g_stop{false};
int g_watchers = 0;

void watch() {
  const sigset_t set = sigint_set();
  const timespec period{0, 50'000'000};  // how long stopping the watcher can take
  while (!g_stop.load()) {
    if (sigtimedwait(&set, nullptr, &period) == SIGINT) note_interrupt();
  }
}

}  // namespace

struct InterruptGuard::Saved {
  struct sigaction previous {};
  sigset_t mask{};
};

InterruptGuard::InterruptGuard() : saved_(new Saved) {
  g_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // system calls in a step (reads, writes) carry on
  if (sigaction(SIGINT, &action, &saved_->previous) != 0) {
    delete saved_;
    KILN_FAIL("kiln::train: installing the SIGINT handler failed: {}", std::strerror(errno));
  }
  const sigset_t set = sigint_set();
  pthread_sigmask(SIG_BLOCK, &set, &saved_->mask);  // the watcher, started below, inherits it
  {
    const std::lock_guard lock(g_watcher_mutex);
    if (g_watchers++ == 0) {
      g_stop = false;
      g_watcher = std::thread(watch);
    }
  }
  ++g_active;
}

// The request belonged to this guard's loop; a later loop starts without it.
InterruptGuard::~InterruptGuard() {
  {
    const std::lock_guard lock(g_watcher_mutex);
    if (--g_watchers == 0) {
      g_stop = true;
      g_watcher.join();
    }
  }
  while (take_pending_sigint()) {
  }
  sigaction(SIGINT, &saved_->previous, nullptr);
  pthread_sigmask(SIG_SETMASK, &saved_->mask, nullptr);
  delete saved_;
  --g_active;
  g_requested = 0;
}

bool InterruptGuard::active() { return g_active > 0; }

bool InterruptGuard::requested() {
  if (g_requested == 0 && g_active > 0 && take_pending_sigint()) note_interrupt();
  return g_requested != 0;
}
void InterruptGuard::clear() { g_requested = 0; }

}  // namespace kiln::train
