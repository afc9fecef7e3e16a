#include "kiln/train/dashboard.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string_view>

namespace kiln::train {
namespace {

constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kCyan = "\x1b[36m";
constexpr const char* kYellow = "\x1b[33m";
constexpr const char* kDim = "\x1b[2m";
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kReset = "\x1b[0m";

// The UTF-8 encoding of a code point below U+10000 (all the frame uses).
std::string utf8(unsigned code) {
  std::string s;
  if (code < 0x80) {
    s += static_cast<char>(code);
  } else if (code < 0x800) {
    s += static_cast<char>(0xc0 | (code >> 6));
    s += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (code >> 12));
    s += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (code & 0x3f));
  }
  return s;
}

std::string repeat(std::string_view piece, std::size_t count) {
  std::string s;
  s.reserve(piece.size() * count);
  for (std::size_t i = 0; i < count; ++i) s += piece;
  return s;
}

std::string pad_left(std::string_view text, std::size_t width) {
  const std::size_t w = display_width(text);
  return w >= width ? fit_width(text, width) : std::string(width - w, ' ') + std::string(text);
}

// One line of a frame: segments, some colored; finish() cuts or pads it to the frame's width
// counting only the visible text.
class Line {
 public:
  explicit Line(bool color) : color_(color) {}
  Line& add(std::string_view text, const char* color = nullptr) {
    parts_.push_back({std::string(text), color});
    return *this;
  }
  std::size_t width() const {
    std::size_t w = 0;
    for (const Part& p : parts_) w += display_width(p.text);
    return w;
  }
  std::string finish(std::size_t width) const {
    std::string out;
    std::size_t left = width;
    for (const Part& p : parts_) {
      if (left == 0) break;
      std::string text = p.text;
      std::size_t w = display_width(text);
      if (w > left) {
        text = fit_width(text, left);
        w = left;
      }
      if (color_ && p.color != nullptr) out += std::string(p.color) + text + kReset;
      else out += text;
      left -= w;
    }
    out.append(left, ' ');
    return out;
  }

 private:
  struct Part {
    std::string text;
    const char* color;
  };
  bool color_;
  std::vector<Part> parts_;
};

std::string fraction(std::int64_t done, std::int64_t total) {
  return total > 0 ? fmt::format("{}/{}", done, total) : fmt::format("{}", done);
}

// "label ████████▌░░░░ 12/30  40% 00:03 ETA 00:05"
Line progress_line(bool color, std::string_view label, std::int64_t done, std::int64_t total, double seconds,
                   double eta, std::size_t width) {
  const std::string counts = fraction(done, total);
  const std::string percent =
      total > 0 ? fmt::format("{:>3}%", static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)))
                : "   ?";
  const std::string suffix = fmt::format(" {:>13} {} {} ETA {}", counts, percent, format_duration(seconds),
                                         total > 0 ? format_duration(eta) : "--:--");
  const std::string head = fmt::format(" {:<6}", label);
  const std::size_t used = display_width(head) + display_width(suffix);
  const std::size_t bar = width > used + 4 ? width - used : 4;
  Line line(color);
  line.add(head, kBold);
  const double share = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 0.0;
  const auto eighths = static_cast<std::size_t>(std::floor(share * static_cast<double>(bar) * 8 + 1e-9));
  std::string filled = repeat("█", eighths / 8);
  std::size_t cells = eighths / 8;
  if (eighths % 8 != 0 && cells < bar) {
    filled += utf8(0x2590 - static_cast<unsigned>(eighths % 8));  // ▏ (1/8) .. ▉ (7/8): U+258F down to U+2589
    ++cells;
  }
  line.add(filled, kGreen).add(repeat("░", bar - cells), kDim).add(suffix);
  return line;
}

// The braille plot of the loss curves: `rows` lines of `cells` characters.
std::vector<Line> loss_plot(const DashboardState& s, std::size_t cells, std::size_t rows, bool color) {
  constexpr std::size_t kLabel = 8;
  std::vector<Line> lines;
  double x_max = 1, y_min = INFINITY, y_max = -INFINITY;
  for (const auto* series : {&s.train_loss, &s.valid_loss})
    for (const auto& [x, y] : *series) {
      if (!std::isfinite(y)) continue;
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  const bool empty = !(y_min <= y_max);
  if (empty) y_min = 0, y_max = 1;
  if (y_max - y_min < 1e-12) {
    const double pad = std::max(std::abs(y_max) * 0.05, 1e-3);
    y_min -= pad;
    y_max += pad;
  }
  const std::size_t dot_cols = cells * 2, dot_rows = rows * 4;
  std::vector<unsigned> dots(cells * rows, 0);
  std::vector<bool> marks(cells * rows, false);
  auto to_col = [&](double x) {
    return static_cast<std::int64_t>(std::lround(x / x_max * static_cast<double>(dot_cols - 1)));
  };
  auto to_row = [&](double y) {
    return static_cast<std::int64_t>(std::lround((y_max - y) / (y_max - y_min) * static_cast<double>(dot_rows - 1)));
  };
  auto set_dot = [&](std::int64_t c, std::int64_t r) {
    if (c < 0 || r < 0 || c >= static_cast<std::int64_t>(dot_cols) || r >= static_cast<std::int64_t>(dot_rows)) return;
    // Braille dots: column 0 rows 0-2 are bits 0-2, column 1 rows 0-2 bits 3-5, row 3 bits 6 and 7.
    static constexpr unsigned kBits[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
    dots[static_cast<std::size_t>(r / 4) * cells + static_cast<std::size_t>(c / 2)] |= kBits[c % 2][r % 4];
  };
  std::int64_t pc = -1, pr = -1;
  for (const auto& [x, y] : s.train_loss) {
    if (!std::isfinite(y)) continue;
    const std::int64_t c = to_col(x), r = to_row(y);
    if (pc < 0) {
      set_dot(c, r);
    } else {  // a straight line of dots from the previous point
      const std::int64_t n = std::max(std::abs(c - pc), std::abs(r - pr));
      for (std::int64_t i = 1; i <= n; ++i)
        set_dot(pc + (c - pc) * i / n, pr + static_cast<std::int64_t>(std::lround(static_cast<double>((r - pr) * i) / static_cast<double>(n))));
      if (n == 0) set_dot(c, r);
    }
    pc = c, pr = r;
  }
  for (const auto& [x, y] : s.valid_loss) {
    if (!std::isfinite(y)) continue;
    const std::int64_t c = to_col(x), r = to_row(y);
    if (c >= 0 && r >= 0 && c < static_cast<std::int64_t>(dot_cols) && r < static_cast<std::int64_t>(dot_rows))
      marks[static_cast<std::size_t>(r / 4) * cells + static_cast<std::size_t>(c / 2)] = true;
  }
  for (std::size_t row = 0; row < rows; ++row) {
    Line line(color);
    std::string label;
    if (row == 0) label = format_number(y_max);
    else if (row + 1 == rows) label = format_number(y_min);
    else if (rows >= 5 && row == rows / 2) label = format_number(y_max - (y_max - y_min) * (static_cast<double>(row * 4) + 1.5) / static_cast<double>(dot_rows - 1));
    if (empty) label.clear();
    line.add(pad_left(label, kLabel)).add(label.empty() ? "│" : "┤", kDim);
    for (std::size_t c = 0; c < cells; ++c) {
      const std::size_t i = row * cells + c;
      if (marks[i]) line.add("•", kYellow);
      else if (dots[i] != 0) line.add(utf8(0x2800 + dots[i]), kCyan);
      else line.add(" ");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

// ---- helpers

std::size_t display_width(std::string_view text) {
  std::size_t n = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  return n;
}

std::string fit_width(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool lead = (static_cast<unsigned char>(text[i]) & 0xc0) != 0x80;
    if (lead && n == width) break;
    if (lead) ++n;
    out += text[i];
  }
  out.append(width - n, ' ');
  return out;
}

std::string strip_ansi(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7e)) ++i;  // to the final byte
      continue;
    }
    out += text[i];
  }
  return out;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "--:--";
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  const std::int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{:02}:{:02}", m, s);
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  return fmt::format("{:.4g}", value);
}

// ---- the frame

std::string render_frame(const DashboardState& s, int width_in, int height_in, const FrameOptions& options) {
  const auto width = static_cast<std::size_t>(std::max(width_in, 40));
  const auto height = static_cast<std::size_t>(std::max(height_in, 12));
  const bool color = options.color;
  std::vector<std::string> lines;

  // Title: what runs, and the run's clock.
  {
    Line title(color);
    title.add(" " + s.title, kBold)
        .add(fmt::format(" · epoch {} · {} {}", fraction(s.epoch, s.epochs), split_name(s.split),
                         fraction(s.step, s.steps)));
    const std::string clock = fmt::format("elapsed {} ", format_duration(s.run_seconds));
    const std::size_t used = title.width();
    if (used + display_width(clock) < width) title.add(std::string(width - used - display_width(clock), ' ')).add(clock);
    lines.push_back(title.finish(width));
  }
  lines.push_back(progress_line(color, split_name(s.split), s.step, s.steps, s.phase_seconds, s.phase_eta_seconds, width)
                      .finish(width));
  lines.push_back(progress_line(color, "run", s.run_step, s.run_steps, s.run_seconds, s.run_eta_seconds, width)
                      .finish(width));

  // Fixed rows: title, two bars, two rules, the status; the rest is shared by the metrics and
  // the plot (middle) and the epoch table (bottom).
  const std::size_t table_rows = std::max<std::size_t>(2, (height - 6) / 3);
  const std::size_t middle_rows = height - 6 - table_rows;
  const std::size_t left = std::min<std::size_t>(46, std::max<std::size_t>(30, width / 2 + 1));
  const std::size_t right = width - left - 1;
  constexpr std::size_t kPlotLabel = 9;  // the y labels and the axis

  lines.push_back(Line(color)
                      .add("─ metrics " + repeat("─", left - 10) + "┬─ loss " + repeat("─", right > 7 ? right - 7 : 0), kDim)
                      .finish(width));
  // Left: the metrics table.
  std::vector<Line> table;
  {
    const std::size_t value_width = (left - 2) / 4;
    const std::size_t name_width = left - 3 * value_width;
    Line header(color);
    header.add(fit_width(" metric", name_width), kBold)
        .add(pad_left("last ", value_width), kBold)
        .add(pad_left("train ", value_width), kBold)
        .add(pad_left("valid ", value_width), kBold);
    table.push_back(std::move(header));
    for (const auto& row : s.metrics) {
      Line line(color);
      line.add(fit_width(" " + row.name, name_width));
      for (const std::string* cell : {&row.last, &row.train, &row.valid})
        line.add(pad_left(fit_width(*cell, std::min(display_width(*cell), value_width - 1)) + " ", value_width));
      table.push_back(std::move(line));
    }
  }
  // Right: a legend line, then the braille plot.
  std::vector<Line> plot;
  {
    double x_max = 0;
    for (const auto& p : s.train_loss) x_max = std::max(x_max, p.first);
    for (const auto& p : s.valid_loss) x_max = std::max(x_max, p.first);
    Line legend(color);
    legend.add(" ").add("⠉⠉", kCyan).add(" train  ").add("•", kYellow).add(" valid");
    // The loss curve's points average buckets of steps (x 913.5): the axis names whole steps.
    legend.add(fmt::format("  x: step 0-{}", static_cast<std::int64_t>(std::ceil(x_max))), kDim);
    plot.push_back(std::move(legend));
    const std::size_t plot_rows = middle_rows > 1 ? middle_rows - 1 : 1;
    const std::size_t cells = right > kPlotLabel + 1 ? right - kPlotLabel : 1;
    for (Line& line : loss_plot(s, cells, plot_rows, color)) plot.push_back(std::move(line));
  }
  for (std::size_t r = 0; r < middle_rows; ++r) {
    std::string text = r < table.size() ? table[r].finish(left) : std::string(left, ' ');
    text += color ? std::string(kDim) + "│" + kReset : "│";
    text += r < plot.size() ? plot[r].finish(right) : std::string(right, ' ');
    lines.push_back(std::move(text));
  }

  lines.push_back(Line(color)
                      .add("─ epochs " + repeat("─", left - 9) + "┴" + repeat("─", right), kDim)
                      .finish(width));
  // The epoch table: a header and the latest epochs that fit.
  {
    const std::size_t columns = s.epoch_columns.size();
    std::vector<std::size_t> widths(columns);
    for (std::size_t c = 0; c < columns; ++c) {
      widths[c] = display_width(s.epoch_columns[c]);
      for (const auto& row : s.epoch_rows)
        if (c < row.size()) widths[c] = std::max(widths[c], display_width(row[c]));
    }
    auto render_row = [&](const std::vector<std::string>& cells, const char* style) {
      Line line(color);
      for (std::size_t c = 0; c < columns; ++c)
        line.add(pad_left(c < cells.size() ? cells[c] : "", widths[c] + 2), style);
      return line.finish(width);
    };
    std::vector<std::string> rows;
    if (columns > 0) rows.push_back(render_row(s.epoch_columns, kBold));
    const std::size_t shown = std::min(s.epoch_rows.size(), table_rows - rows.size());
    for (std::size_t i = s.epoch_rows.size() - shown; i < s.epoch_rows.size(); ++i)
      rows.push_back(render_row(s.epoch_rows[i], nullptr));
    if (s.epoch_rows.empty() && rows.size() < table_rows) rows.push_back(Line(color).add("  no epoch finished yet", kDim).finish(width));
    while (rows.size() < table_rows) rows.push_back(std::string(width, ' '));
    for (auto& r : rows) lines.push_back(std::move(r));
  }
  lines.push_back(Line(color).add(" " + s.status, kDim).finish(width));

  std::string frame;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) frame += '\n';
    frame += lines[i];
  }
  return frame;
}

// ---- plain logs

std::string render_step_line(const DashboardState& s) {
  std::string line = fmt::format("[{}] epoch {} step {}", split_name(s.split), fraction(s.epoch, s.epochs),
                                 fraction(s.step, s.steps));
  for (const auto& row : s.metrics) {
    const std::string& value = s.split == Split::train ? row.train : row.valid;
    if (!value.empty()) line += fmt::format(" | {} {}", row.name, value);
  }
  if (s.steps > 0) line += fmt::format(" | eta {}", format_duration(s.phase_eta_seconds));
  return line;
}

std::string render_epoch_line(const DashboardState& s) {
  std::string line = fmt::format("[epoch {}] done in {}", fraction(s.epoch, s.epochs), format_duration(s.phase_seconds));
  for (const Split split : {Split::train, Split::valid}) {
    std::string part;
    for (const auto& row : s.metrics) {
      const std::string& value = split == Split::train ? row.train : row.valid;
      if (!value.empty()) part += fmt::format(" {} {}", row.name, value);
    }
    if (!part.empty()) line += fmt::format(" | {}:{}", split_name(split), part);
  }
  return line;
}

// ---- the dashboard

namespace {
bool stdout_is_terminal() {
  if (::isatty(STDOUT_FILENO) == 0) return false;
  const char* term = std::getenv("TERM");
  return term != nullptr && std::string_view(term) != "dumb" && std::string_view(term) != "";
}
}  // namespace

Dashboard::Dashboard(DashboardMode mode, std::ostream* out, std::int64_t log_every)
    : mode_(mode), out_(out != nullptr ? out : &std::cout), log_every_(std::max<std::int64_t>(log_every, 1)) {
  if (mode_ == DashboardMode::automatic)
    mode_ = out_ == &std::cout && stdout_is_terminal() ? DashboardMode::terminal : DashboardMode::plain;
  color_ = mode_ == DashboardMode::terminal && std::getenv("NO_COLOR") == nullptr;
}

Dashboard::~Dashboard() {
  if (mode_ == DashboardMode::terminal && drawn_lines_ > 0) {
    *out_ << "\x1b[?25h" << std::flush;  // the cursor back, should finish() not have run
  }
}

bool Dashboard::wants_update(std::int64_t step, std::int64_t steps) const {
  switch (mode_) {
    case DashboardMode::terminal:
      return drawn_lines_ == 0 || std::chrono::steady_clock::now() - last_draw_ >= std::chrono::milliseconds(100);
    case DashboardMode::plain: return step % log_every_ == 0 || (steps > 0 && step == steps);
    default: return false;
  }
}

void Dashboard::update(const DashboardState& state) {
  if (mode_ == DashboardMode::terminal) draw(state);
  else if (mode_ == DashboardMode::plain) *out_ << render_step_line(state) << '\n' << std::flush;
}

void Dashboard::epoch_done(const DashboardState& state) {
  if (mode_ == DashboardMode::terminal) draw(state);
  else if (mode_ == DashboardMode::plain) *out_ << render_epoch_line(state) << '\n' << std::flush;
}

void Dashboard::message(const std::string& text) {
  if (mode_ == DashboardMode::terminal) message_ = text;
  else if (mode_ == DashboardMode::plain) *out_ << text << '\n' << std::flush;
}

void Dashboard::finish(const DashboardState& state) {
  if (mode_ != DashboardMode::terminal) return;
  // The last message goes below the last frame, whole: in the frame's status line it would
  // be cut at the frame's width (a checkpoint path makes it long).
  const std::string last = std::move(message_);
  message_.clear();
  draw(state);
  *out_ << '\n';
  if (!last.empty()) *out_ << last << '\n';
  *out_ << "\x1b[?25h" << std::flush;
  drawn_lines_ = 0;
}

void Dashboard::draw(const DashboardState& state) {
  int columns = 81, rows = 25;  // not a terminal (tests): 80x24 frames
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    columns = size.ws_col;
    rows = size.ws_row;
  }
  DashboardState shown = state;
  if (!message_.empty()) shown.status = message_;
  // The last column stays empty: a line that fills it leaves the cursor waiting to wrap,
  // where the erase-to-end that follows would eat its last character.
  const int width = std::min(columns - 1, 160);
  const int height = std::min(rows - 1, 30);
  std::string frame;
  if (width < 40 || height < 12) {  // too small for a frame: one line
    frame = fit_width(message_.empty() ? render_step_line(shown) : message_, static_cast<std::size_t>(std::max(width, 1)));
  } else {
    frame = render_frame(shown, width, height, {.color = color_});
  }
  std::string text;
  if (drawn_lines_ == 0) text += "\x1b[?25l";  // hide the cursor while frames are drawn
  else text += drawn_lines_ > 1 ? fmt::format("\r\x1b[{}A", drawn_lines_ - 1) : "\r";
  std::size_t start = 0;
  int count = 0;
  while (true) {
    const std::size_t end = frame.find('\n', start);
    text += frame.substr(start, end == std::string::npos ? std::string::npos : end - start);
    text += "\x1b[K";
    ++count;
    if (end == std::string::npos) break;
    text += '\n';
    start = end + 1;
  }
  if (count < drawn_lines_) text += "\x1b[J";  // a smaller frame: clear what the larger one left
  *out_ << text << std::flush;
  drawn_lines_ = count;
  last_draw_ = std::chrono::steady_clock::now();
}

}  // namespace kiln::train
