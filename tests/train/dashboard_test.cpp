// The dashboard as pure functions: a frame rendered at 80x24 from a fixed state against the
// committed snapshot (tests/train/snapshots/), the colored frame against the plain one, the
// plain-log lines, the Dashboard's modes, and the learning-curve SVG.
// KILN_UPDATE_SNAPSHOTS=1 rewrites the snapshot files instead of comparing with them.
#include <kiln/train/chart.hpp>
#include <kiln/train/dashboard.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

using namespace kiln::train;

// A run in epoch 3 of 5, 12 of 30 train steps done, with two finished epochs.
DashboardState fixed_state() {
  DashboardState s;
  s.title = "Kiln · mnist-mlp";
  s.split = Split::train;
  s.epoch = 3;
  s.epochs = 5;
  s.step = 12;
  s.steps = 30;
  s.run_step = 2 * 36 + 12;
  s.run_steps = 5 * 36;
  s.phase_seconds = 7.5;
  s.phase_eta_seconds = 11.25;
  s.run_seconds = 83.2;
  s.run_eta_seconds = 121.9;
  s.metrics = {
      {"loss", "0.4012", "0.4377", "0.5121"},
      {"accuracy", "87.50%", "86.98%", "84.20%"},
      {"lr", "2.50e-03", "2.50e-03", ""},
      {"items_per_s", "5321/s", "5102/s", "9870/s"},
      {"epoch_time_s", "7.5s", "7.5s", "1.2s"},
      {"cpu_percent", "198%", "195%", "180%"},
      {"memory_mib", "312 MiB", "318 MiB", "305 MiB"},
  };
  for (int step = 1; step <= 72; ++step)
    s.train_loss.emplace_back(step, 0.3 + 2.0 * std::exp(-step / 15.0) + 0.04 * std::sin(step * 1.7));
  s.valid_loss = {{30, 0.81}, {60, 0.5121}};
  s.epoch_columns = {"epoch", "train loss", "valid loss", "train acc", "valid acc", "time"};
  s.epoch_rows = {{"1", "1.2034", "0.8100", "62.40%", "71.25%", "00:09"},
                  {"2", "0.5590", "0.5121", "82.91%", "84.20%", "00:09"}};
  s.status = "Ctrl-C stops after the current step and saves a checkpoint";
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void expect_snapshot(const std::string& name, const std::string& actual) {
  const std::string path = std::string(KILN_TRAIN_SNAPSHOTS) + "/" + name;
  if (const char* update = std::getenv("KILN_UPDATE_SNAPSHOTS"); update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual << '\n';
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string expected = read_file(path);
  ASSERT_FALSE(expected.empty()) << path << " is missing; run with KILN_UPDATE_SNAPSHOTS=1 to write it";
  EXPECT_EQ(actual + "\n", expected) << "the frame differs from " << path << "; if the change is intended, run with "
                                     << "KILN_UPDATE_SNAPSHOTS=1 and review the diff. The frame:\n" << actual;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Dashboard, FrameAt80x24MatchesTheSnapshot) {
  const std::string frame = render_frame(fixed_state(), 80, 24);
  const auto lines = lines_of(frame);
  ASSERT_EQ(lines.size(), 24u);
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(display_width(lines[i]), 80u) << "line " << i;
  EXPECT_EQ(frame.find('\x1b'), std::string::npos);  // no escapes without color
  expect_snapshot("frame_80x24.txt", frame);
}

TEST(Dashboard, FrameShowsTheStateItWasGiven) {
  const std::string frame = render_frame(fixed_state(), 80, 24);
  // Bars: 12 of 30 is 40%, 84 of 180 is 46%, with their clocks.
  EXPECT_NE(frame.find("12/30  40% 00:08 ETA 00:11"), std::string::npos) << frame;
  EXPECT_NE(frame.find("84/180  46% 01:23 ETA 02:02"), std::string::npos) << frame;
  EXPECT_NE(frame.find("epoch 3/5 · train 12/30"), std::string::npos);
  // Both finished epochs in the table, metrics in theirs, the curves drawn in braille.
  EXPECT_NE(frame.find("0.5590"), std::string::npos);
  EXPECT_NE(frame.find("86.98%"), std::string::npos);
  EXPECT_NE(frame.find("•"), std::string::npos);
  EXPECT_NE(frame.find("\xe2\xa0"), std::string::npos);  // U+2800..U+283F braille
}

TEST(Dashboard, ColoredFrameIsThePlainFrameWithEscapes) {
  const DashboardState s = fixed_state();
  for (const auto& [w, h] : {std::pair{80, 24}, std::pair{120, 30}, std::pair{40, 12}}) {
    const std::string colored = render_frame(s, w, h, {.color = true});
    EXPECT_NE(colored.find("\x1b[32m"), std::string::npos);
    EXPECT_EQ(strip_ansi(colored), render_frame(s, w, h)) << w << "x" << h;
  }
}

TEST(Dashboard, EveryLineHasTheFrameWidthAtAnySize) {
  DashboardState s = fixed_state();
  DashboardState empty;  // before the first step: unknown totals, no curves
  empty.epochs = 0;
  for (const DashboardState* state : {&s, &empty}) {
    for (const auto& [w, h] : {std::pair{40, 12}, std::pair{57, 15}, std::pair{100, 40}, std::pair{10, 3}}) {
      const auto lines = lines_of(render_frame(*state, w, h));
      const std::size_t width = static_cast<std::size_t>(std::max(w, 40)), height = static_cast<std::size_t>(std::max(h, 12));
      ASSERT_EQ(lines.size(), height) << w << "x" << h;
      for (const auto& line : lines) EXPECT_EQ(display_width(line), width) << w << "x" << h << ": " << line;
    }
  }
}

TEST(Dashboard, PlainLogLines) {
  DashboardState s = fixed_state();
  EXPECT_EQ(render_step_line(s),
            "[train] epoch 3/5 step 12/30 | loss 0.4377 | accuracy 86.98% | lr 2.50e-03 | items_per_s 5102/s | "
            "epoch_time_s 7.5s | cpu_percent 195% | memory_mib 318 MiB | eta 00:11");
  s.split = Split::valid;
  s.step = 2;
  s.steps = 0;  // unknown
  EXPECT_EQ(render_step_line(s),
            "[valid] epoch 3/5 step 2 | loss 0.5121 | accuracy 84.20% | items_per_s 9870/s | epoch_time_s 1.2s | "
            "cpu_percent 180% | memory_mib 305 MiB");
  s.phase_seconds = 65;
  EXPECT_EQ(render_epoch_line(s),
            "[epoch 3/5] done in 01:05 | train: loss 0.4377 accuracy 86.98% lr 2.50e-03 items_per_s 5102/s "
            "epoch_time_s 7.5s cpu_percent 195% memory_mib 318 MiB | valid: loss 0.5121 accuracy 84.20% items_per_s "
            "9870/s epoch_time_s 1.2s cpu_percent 180% memory_mib 305 MiB");
}

TEST(Dashboard, Helpers) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(62.4), "01:02");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_number(0.123456), "0.1235");
  EXPECT_EQ(display_width("a█⣿•"), 4u);
  EXPECT_EQ(fit_width("ab█d", 3), "ab█");
  EXPECT_EQ(fit_width("ab", 4), "ab  ");
  EXPECT_EQ(strip_ansi("\x1b[32mok\x1b[0m \x1b[2Kx"), "ok x");
}

TEST(Dashboard, ModesAndOutput) {
  std::ostringstream out;
  Dashboard automatic(DashboardMode::automatic, &out, 5);
  EXPECT_EQ(automatic.mode(), DashboardMode::plain);  // a stream that is not stdout is not a terminal
  EXPECT_TRUE(automatic.wants_update(10, 30));
  EXPECT_FALSE(automatic.wants_update(11, 30));
  EXPECT_TRUE(automatic.wants_update(30, 30));  // a phase's last step
  automatic.update(fixed_state());
  automatic.message("resumed");
  EXPECT_EQ(out.str(), render_step_line(fixed_state()) + "\nresumed\n");

  std::ostringstream none_out;
  Dashboard none(DashboardMode::none, &none_out, 1);
  EXPECT_FALSE(none.wants_update(1, 1));
  none.update(fixed_state());
  none.epoch_done(fixed_state());
  EXPECT_EQ(none_out.str(), "");

  // A terminal: the second frame moves the cursor back up over the first and redraws it.
  std::ostringstream tty;
  {
    Dashboard terminal(DashboardMode::terminal, &tty, 1);
    terminal.update(fixed_state());
    terminal.update(fixed_state());
    terminal.finish(fixed_state());
  }
  const std::string text = tty.str();
  EXPECT_EQ(text.rfind("\x1b[?25l", 0), 0u);  // the cursor hidden first
  const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  EXPECT_GE(lines, 3u * 11);
  EXPECT_NE(text.find("A"), std::string::npos);
  // Three frames of h lines and a final newline: 3 (h - 1) + 1 newlines; up by h - 1.
  EXPECT_NE(text.find(fmt::format("\r\x1b[{}A", (lines - 1) / 3)), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 7), "\n\x1b[?25h");  // below the last frame, the cursor back

  // The last message is printed whole below the last frame, not cut to the frame's width.
  std::ostringstream tty_done;
  const std::string done = "[done] completed after 1 epoch (938 train steps); checkpoint " + std::string(150, 'c');
  {
    Dashboard terminal(DashboardMode::terminal, &tty_done, 1);
    terminal.update(fixed_state());
    terminal.message(done);
    terminal.finish(fixed_state());
  }
  EXPECT_EQ(tty_done.str().substr(tty_done.str().size() - done.size() - 7), done + "\n\x1b[?25h");
}

// The loss plot's x axis names whole steps even when the last point averages a bucket of
// steps (x = 913.5).
TEST(Dashboard, LossAxisNamesWholeSteps) {
  DashboardState s = fixed_state();
  s.train_loss.emplace_back(913.5, 0.4);
  const std::string frame = render_frame(s, 80, 24);
  EXPECT_NE(frame.find("x: step 0-914"), std::string::npos) << frame;
  EXPECT_EQ(frame.find("913.5"), std::string::npos);
}

TEST(Chart, LearningCurvesSvg) {
  std::vector<EpochRecord> history(4);
  for (int e = 0; e < 4; ++e) {
    history[e].epoch = e + 1;
    history[e].train.set("loss", 1.0 / (e + 1));
    history[e].train.set("accuracy", 50.0 + 10 * e);
    if (e != 1) history[e].valid.set("loss", 1.2 / (e + 1));  // no validation in epoch 2
  }
  const std::string svg = learning_curves_svg(history);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("data-metric=\"loss\""), std::string::npos);
  EXPECT_NE(svg.find("data-metric=\"accuracy\""), std::string::npos);
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  // Train loss 4 dots, valid loss 3, train accuracy 4; valid accuracy has none.
  EXPECT_EQ(count("<circle"), 11u);
  EXPECT_EQ(count("<polyline"), 3u);
  EXPECT_EQ(count("<g"), count("</g>"));
  EXPECT_NE(svg.find("<title>train loss epoch 3: 0.3333333333333333</title>"), std::string::npos);
  // No epoch yet: a document that says so; a metric without values gets no panel.
  EXPECT_NE(learning_curves_svg({}).find("no epoch finished"), std::string::npos);
  EXPECT_EQ(learning_curves_svg(history, {"loss", "top5_accuracy"}).find("top5_accuracy"), std::string::npos);
}

// After one epoch the loss panel has a curve, not a dot: the training loss within the epoch,
// from x = 0 (the start of training) to 1 (its end, where the epoch's dots stand).
TEST(Chart, OneEpochDrawsTheLossWithinIt) {
  std::vector<EpochRecord> history(1);
  history[0].epoch = 1;
  history[0].global_step = 100;
  history[0].train.set("loss", 0.8);
  history[0].valid.set("loss", 0.9);
  std::vector<std::pair<double, double>> within;
  for (int step = 1; step <= 100; step += 3) within.emplace_back(step / 100.0, 2.0 / step);
  const std::string svg = learning_curves_svg(history, {"loss"}, "one epoch", within);
  const std::size_t line = svg.find("<polyline class=\"train-steps\" points=\"");
  ASSERT_NE(line, std::string::npos) << svg;
  const std::string points = svg.substr(line, svg.find('"', line + 40) - line);
  EXPECT_EQ(static_cast<std::size_t>(std::count(points.begin(), points.end(), ',')), within.size());
  // The x axis starts at epoch 0 and ends at 1: tick labels 0 and 1.
  EXPECT_NE(svg.find("text-anchor=\"middle\">0</text>"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"middle\">1</text>"), std::string::npos);
  // The loss within epochs alone (no epoch finished yet) still makes a loss panel.
  EXPECT_NE(learning_curves_svg({}, {"loss"}, "t", within).find("data-metric=\"loss\""), std::string::npos);
}

}  // namespace
