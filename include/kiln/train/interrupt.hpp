// Ctrl-C during training: while an InterruptGuard lives, SIGINT does not kill the process but
// asks the training loop to stop after the current step (the learner then saves a
// checkpoint and returns). A second SIGINT before the loop noticed the first ends the
// process as usual. The previous SIGINT disposition is restored when the guard dies.
#pragma once

namespace kiln::train {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handler and clears an earlier request
  ~InterruptGuard();  // restores the previous handler and forgets the request
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // Whether SIGINT arrived since the guard was installed (or since clear()).
  static bool requested();
  static void clear();
  // Whether a guard lives (Ctrl-C is being handled).
  static bool active();

 private:
  struct Saved;
  Saved* saved_;
};

}  // namespace kiln::train
