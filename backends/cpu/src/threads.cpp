// The CPU backend's threads (internal.hpp: prepare_team): one count for the whole process,
// set by KILN_NUM_THREADS or kiln::cpu::set_num_threads, applied to each thread's OpenMP
// team before it starts parallel work; and OpenMP workers that never take asynchronous
// signals.
#include "internal.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <signal.h>

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

struct Request {
  int environment = 0;                  // KILN_NUM_THREADS; 0: unset
  std::atomic<int> threads{0};          // 0: OpenMP's default
  std::atomic<unsigned> generation{1};  // bumped by every set_num_threads
};
Request& request() {
  static Request* r = [] {
    auto* made = new Request();
    (void)openmp_default();
    made->environment = from_environment();
    made->threads = made->environment;
    return made;
  }();
  return *r;
}

}  // namespace

int prepare_team() {
  // The process-wide count, applied once per change to this thread's OpenMP state (OpenMP
  // keeps the count per thread: a count set on one thread would not reach the others).
  thread_local unsigned applied = 0;
  Request& r = request();
  if (const unsigned generation = r.generation.load(std::memory_order_acquire); applied != generation) {
    applied = generation;
    const int requested = r.threads.load(std::memory_order_relaxed);
    omp_set_num_threads(requested > 0 ? requested : openmp_default());
  }
  // The workers block asynchronous signals, per team master (OpenMP keeps a pool of workers
  // for each thread that starts parallel work), and again when the team may have grown.
  thread_local int blocked_for = 0;
  const int threads = omp_get_max_threads();
  if (threads <= blocked_for || omp_in_parallel()) return threads;
  blocked_for = threads;
  sigset_t asynchronous;
  sigfillset(&asynchronous);
  // Faults stay with the thread that causes them.
  for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&asynchronous, fault);
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &asynchronous, nullptr);
  }
  return threads;
}

void set_num_threads(int threads) {
  KILN_CHECK(threads >= 0 && threads <= 4096, "cpu::set_num_threads: {} is not a thread count from 0 (the default) to 4096",
             threads);
  Request& r = request();
  r.threads.store(threads > 0 ? threads : r.environment, std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_acq_rel);
}

int num_threads() { return prepare_team(); }

}  // namespace kiln::cpu
