// The training dashboard: a snapshot of a run's state (DashboardState), pure functions that
// render it (a full-screen frame for a terminal, one-line logs otherwise), and Dashboard,
// which shows the frames in place on a terminal at most ~10 times a second or, when the
// output is not a terminal (CI, a file), prints a line every N steps and one per epoch.
#pragma once

#include "kiln/train/metric.hpp"

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train {

// Everything a frame shows, already formatted where it is text: rendering is a pure
// function of this and the frame's size, so tests compare frames with snapshots.
struct DashboardState {
  std::string title = "Kiln";
  Split split = Split::train;        // the phase in progress
  std::int64_t epoch = 1, epochs = 1;
  std::int64_t step = 0, steps = 0;  // within the phase; steps 0: unknown
  std::int64_t run_step = 0, run_steps = 0;  // train and valid steps of the whole run; 0: unknown
  double phase_seconds = 0, phase_eta_seconds = -1;  // negative: unknown
  double run_seconds = 0, run_eta_seconds = -1;

  // One row per metric: its last step's value, its epoch value so far in training, and in
  // validation (the running value while validating, else the last epoch's); "" if none.
  struct MetricRow {
    std::string name, last, train, valid;
  };
  std::vector<MetricRow> metrics;

  // The loss curves, x in epochs (2.5: half way through epoch 3): the train loss by steps
  // (averaged over buckets of steps), the valid loss once per epoch.
  std::vector<std::pair<double, double>> train_loss, valid_loss;

  // The epoch table: column names and one row of cells per finished epoch.
  std::vector<std::string> epoch_columns;
  std::vector<std::vector<std::string>> epoch_rows;

  std::string status;  // the bottom line: a hint, or why the run stops
};

struct FrameOptions {
  bool color = false;  // ANSI colors (bars, curves); off for snapshots and dumb terminals
};

// The frame, exactly `height` lines of exactly `width` columns (UTF-8: box drawing, block
// and braille characters, one column each), joined by '\n' without a final newline.
// Sizes below 40x12 are raised to that.
std::string render_frame(const DashboardState& state, int width, int height, const FrameOptions& options = {});

// The plain-log lines: one for a step (the running epoch values) and one for a finished
// epoch (train and valid values, its duration). No trailing newline.
std::string render_step_line(const DashboardState& state);
std::string render_epoch_line(const DashboardState& state);

// Display helpers used by the renderers, public for tests: "1:02:03" / "02:03"; a value as
// "{:.4g}" without noise; the number of terminal columns of a UTF-8 string (one per code
// point); `text` cut or padded with spaces to `width` columns.
std::string format_duration(double seconds);
std::string format_number(double value);
std::size_t display_width(std::string_view text);
std::string fit_width(std::string_view text, std::size_t width);
// `text` without its ANSI escape sequences.
std::string strip_ansi(std::string_view text);

enum class DashboardMode {
  automatic,  // terminal when stdout is one (isatty and TERM is not "dumb"), plain otherwise
  terminal,   // frames redrawn in place with ANSI escapes
  plain,      // lines: one every log_every steps and one per epoch
  none,       // nothing
};

// Shows DashboardStates on a stream. Not thread-safe; the learner calls it between steps.
class Dashboard {
 public:
  // `out` null: std::cout. log_every: plain mode's step lines (>= 1).
  Dashboard(DashboardMode mode, std::ostream* out, std::int64_t log_every);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // The resolved mode (never automatic).
  DashboardMode mode() const { return mode_; }
  // Shows nothing from now on (the ranks other than 0 of a data-parallel run).
  void silence() { mode_ = DashboardMode::none; }
  // Whether update() would draw now: a terminal frame not drawn in the last 100 ms, a plain
  // line at every log_every-th step and at a phase's last step.
  bool wants_update(std::int64_t step, std::int64_t steps) const;
  void update(const DashboardState& state);
  // A finished epoch: a forced frame, or the epoch line.
  void epoch_done(const DashboardState& state);
  // A line of its own (resuming, stopping): printed in plain mode; in terminal mode shown
  // in place of the frame's status line until the next message.
  void message(const std::string& text);
  // The last frame stays on the screen, the cursor goes below it.
  void finish(const DashboardState& state);

 private:
  void draw(const DashboardState& state);

  DashboardMode mode_;
  std::ostream* out_;
  std::int64_t log_every_;
  int drawn_lines_ = 0;  // lines of the frame on the screen (terminal mode)
  std::chrono::steady_clock::time_point last_draw_{};
  std::string message_;
  bool color_ = false;
};

}  // namespace kiln::train
