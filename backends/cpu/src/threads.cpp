// The OpenMP workers never take asynchronous signals (internal.hpp: keep_signals_off_workers).
#include "internal.hpp"

#include <pthread.h>
#include <signal.h>

namespace kiln::cpu {

void keep_signals_off_workers() {
  // Per team master (OpenMP keeps a pool of workers for each thread that starts parallel
  // work), and again when the team may have grown (set_num_threads).
  thread_local int blocked_for = 0;
  const int threads = omp_get_max_threads();
  if (threads <= blocked_for || omp_in_parallel()) return;
  blocked_for = threads;
  sigset_t asynchronous;
  sigfillset(&asynchronous);
  // Faults stay with the thread that causes them.
  for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&asynchronous, fault);
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &asynchronous, nullptr);
  }
}

}  // namespace kiln::cpu
