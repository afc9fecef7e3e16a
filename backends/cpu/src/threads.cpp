// The CPU backend's threads (internal.hpp: prepare_team): one count for the whole process,
// set by KILN_NUM_THREADS or kiln::cpu::set_num_threads, applied to each thread's OpenMP
// team before it starts parallel work; teams that give up a thread while other work holds
// the cores; and OpenMP workers that never take asynchronous signals.
//
// Sharing the cores. An OpenMP team waits for its slowest member at every barrier, and
// oneDNN splits its work evenly. Beside a busy neighbour (a compile job, another training
// run), a worker that shares its core with the neighbour runs half the time, so every
// parallel region lasts as long as on one thread, and the members that wait spin on cores
// the neighbour could use: a training step on 2 cores took 3-4x its idle time beside one
// spinning process, against 1.6-1.8x on one thread. So each calling thread's team watches
// how long its threads sat ready to run without a core (the kernel's run delay per thread,
// /proc/thread-self/schedstat, read every 20 ms): where the team's threads together waited
// more than a tenth of the window in two windows in a row, it runs one thread smaller (beside
// a spinning process on 2 cores they wait 40-100 %; on an idle machine one window in forty
// passes a tenth, almost never two in a row). After a pause it tries one
// thread more; a try that finds the cores still taken doubles the pause (50 ms up to 2 s),
// so a loaded machine costs a try every 2 s and an idle one gets its threads back within
// 50 ms. KILN_ADAPTIVE_THREADS=0 or kiln::cpu::set_adaptive_threads(false) keeps the team
// at the set count.
#include "internal.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace kiln::cpu {
namespace {

// The count OpenMP starts with (OMP_NUM_THREADS, else one per core), read before any change.
int openmp_default() {
  static const int threads = omp_get_max_threads();
  return threads;
}

// KILN_NUM_THREADS, where it holds a positive count; 0 (OpenMP's default) otherwise, with a
// warning when it holds something else.
int from_environment() {
  const char* text = std::getenv("KILN_NUM_THREADS");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > 4096) {
    std::fprintf(stderr, "kiln: KILN_NUM_THREADS='%s' is not a thread count from 1 to 4096; using %d\n", text,
                 openmp_default());
    return 0;
  }
  return static_cast<int>(value);
}

// KILN_ADAPTIVE_THREADS: "0" keeps every team at the set count; unset or "1" lets teams
// shrink while the cores are busy (a warning for anything else).
bool adaptive_from_environment() {
  const char* text = std::getenv("KILN_ADAPTIVE_THREADS");
  if (text == nullptr || *text == '\0' || std::string_view(text) == "1") return true;
  if (std::string_view(text) == "0") return false;
  std::fprintf(stderr, "kiln: KILN_ADAPTIVE_THREADS='%s' is neither 0 nor 1; using 1\n", text);
  return true;
}

struct Request {
  int environment = 0;                  // KILN_NUM_THREADS; 0: unset
  std::atomic<int> threads{0};          // 0: OpenMP's default
  std::atomic<bool> adaptive{true};
  std::atomic<unsigned> generation{1};  // bumped by every change
};
Request& request() {
  static Request* r = [] {
    auto* made = new Request();
    (void)openmp_default();
    made->environment = from_environment();
    made->threads = made->environment;
    made->adaptive = adaptive_from_environment();
    return made;
  }();
  return *r;
}

constexpr std::int64_t kMillisecond = 1'000'000;  // in nanoseconds
constexpr std::int64_t kWindow = 20 * kMillisecond;
constexpr std::int64_t kFirstPause = 50 * kMillisecond, kLongestPause = 2000 * kMillisecond;
constexpr double kBusy = 0.1;  // run delay, in threads (summed over the team), that means the cores are taken

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);  // the vDSO's, a few nanoseconds
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The nanoseconds a thread has waited for a core, from its schedstat file ("run wait slices").
std::int64_t run_delay(int file) {
  char text[96];
  const ssize_t got = pread(file, text, sizeof(text) - 1, 0);
  if (got <= 0) return 0;  // the thread has exited
  text[got] = '\0';
  char* end = nullptr;
  std::strtoll(text, &end, 10);
  return std::strtoll(end, nullptr, 10);
}

// One calling thread's OpenMP team (OpenMP keeps a team per thread that starts parallel work).
struct Team {
  unsigned generation = 0;  // of the request applied
  int ceiling = 1;          // the set count
  bool adaptive = true;
  int size = 0;             // the threads it uses now
  int prepared = 0;         // the team size of the last setup region; 0: none yet
  std::vector<int> delay_files;  // each member's schedstat, [0] this thread's; -1 where it cannot be read
  std::int64_t window_start = 0, window_delay = 0, retry_at = 0, pause = kFirstPause;
  bool trying = false;      // the last window ran one thread more than the one before
  int busy_windows = 0;     // windows in a row in which the team waited for cores

  ~Team() { close_files(); }
  void close_files() {
    for (const int file : delay_files)
      if (file >= 0) close(file);
    delay_files.clear();
  }
  std::int64_t delay() const {
    std::int64_t total = 0;
    for (const int file : delay_files)
      if (file >= 0) total += run_delay(file);
    return total;
  }

  // Blocks asynchronous signals on the workers and opens each member's schedstat, for a team
  // of `threads`; run again whenever the team grows, since OpenMP ends the workers a smaller
  // team left out and starts new ones.
  void set_up(int threads) {
    prepared = threads;
    close_files();
    delay_files.assign(static_cast<std::size_t>(threads), -1);
    sigset_t asynchronous;
    sigfillset(&asynchronous);
    // Faults stay with the thread that causes them.
    for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&asynchronous, fault);
    std::vector<int>& files = delay_files;
#pragma omp parallel num_threads(threads)
    {
      const int member = omp_get_thread_num();
      if (member != 0) pthread_sigmask(SIG_BLOCK, &asynchronous, nullptr);
      if (member < static_cast<int>(files.size())) files[member] = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    }
    window_start = now_ns();
    window_delay = delay();
  }

  // One window's verdict: one thread fewer where the team waited for cores, one more after
  // the pause where it did not.
  void judge(std::int64_t now) {
    const std::int64_t delay_now = delay();
    const double waited = static_cast<double>(delay_now - window_delay) / static_cast<double>(now - window_start);
    window_start = now;
    window_delay = delay_now;
    // One window is enough to end a try; otherwise it takes two in a row: on an idle machine
    // about one window in forty has a wait this long (a thread woken on its master's core
    // before the kernel moves it).
    busy_windows = waited > kBusy ? busy_windows + 1 : 0;
    if (busy_windows >= 2 || (trying && busy_windows == 1)) {
      busy_windows = 0;
      if (trying) pause = std::min(2 * pause, kLongestPause);
      trying = false;
      size = std::max(1, size - 1);
      retry_at = now + pause;
      return;
    }
    if (busy_windows > 0) return;
    if (trying) pause = kFirstPause;
    trying = false;
    if (size < ceiling && now >= retry_at) {
      ++size;
      trying = true;
    }
  }
};

}  // namespace

int prepare_team() {
  thread_local Team team;
  Request& r = request();
  // The process-wide count, applied once per change to this thread's OpenMP state (OpenMP
  // keeps the count per thread: a count set on one thread would not reach the others).
  if (const unsigned generation = r.generation.load(std::memory_order_acquire); team.generation != generation) {
    team.generation = generation;
    const int requested = r.threads.load(std::memory_order_relaxed);
    team.ceiling = requested > 0 ? requested : openmp_default();
    team.adaptive = r.adaptive.load(std::memory_order_relaxed);
    team.size = team.ceiling;
    team.trying = false;
    team.busy_windows = 0;
    team.pause = kFirstPause;
    team.retry_at = 0;
  }
  if (omp_in_parallel()) return omp_get_max_threads();
  const int before = omp_get_max_threads();
  if (team.adaptive && team.ceiling > 1 && team.prepared > 0) {
    if (const std::int64_t now = now_ns(); now - team.window_start >= kWindow) team.judge(now);
  }
  if (team.size != before) omp_set_num_threads(team.size);
  // A team larger than the last one set up gets its workers set up (signals, run-delay files).
  if (team.size > 1 && (team.prepared == 0 || team.size > before)) team.set_up(team.size);
  return team.size;
}

void set_num_threads(int threads) {
  KILN_CHECK(threads >= 0 && threads <= 4096, "cpu::set_num_threads: {} is not a thread count from 0 (the default) to 4096",
             threads);
  Request& r = request();
  r.threads.store(threads > 0 ? threads : r.environment, std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_acq_rel);
}

int num_threads() {
  const int requested = request().threads.load(std::memory_order_relaxed);
  return requested > 0 ? requested : openmp_default();
}

int active_threads() { return prepare_team(); }

void set_adaptive_threads(bool adaptive) {
  Request& r = request();
  r.adaptive.store(adaptive, std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace kiln::cpu
