#include "kiln/train/interrupt.hpp"

#include "kiln/core/error.hpp"

#include <csignal>
#include <cstring>

namespace kiln::train {
namespace {

volatile std::sig_atomic_t g_requested = 0;
int g_active = 0;  // live guards (changed on the training thread only)

// Async-signal-safe: sets a flag; a second Ctrl-C before the loop noticed the first falls
// back to the default action (the process ends) so a stuck step can still be killed.
extern "C" void on_sigint(int) {
  if (g_requested != 0) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_requested = 1;
}

}  // namespace

struct InterruptGuard::Saved {
  struct sigaction previous {};
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
  ++g_active;
}

// The request belonged to this guard's loop; a later loop starts without it.
InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &saved_->previous, nullptr);
  delete saved_;
  --g_active;
  g_requested = 0;
}

bool InterruptGuard::active() { return g_active > 0; }

bool InterruptGuard::requested() { return g_requested != 0; }
void InterruptGuard::clear() { g_requested = 0; }

}  // namespace kiln::train
