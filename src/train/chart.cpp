#include "kiln/train/chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace kiln::train {
namespace {

constexpr double kPanelWidth = 440, kPanelHeight = 300;
constexpr double kLeft = 64, kRight = 16, kTop = 40, kBottom = 46;  // margins inside a panel
constexpr const char* kTrainColor = "#1f77b4";
constexpr const char* kValidColor = "#ff7f0e";

std::string escape_xml(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Round tick steps: 1, 2 or 5 times a power of ten, about `count` ticks over [low, high].
double tick_step(double low, double high, int count) {
  const double raw = (high - low) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

std::string tick_label(double value, double step) {
  if (std::abs(value) < step * 1e-9) value = 0;
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

using Points = std::vector<std::pair<double, double>>;

// One metric's panel at horizontal offset x0; `within` holds the metric's values within
// epochs (x in epochs), empty for most metrics.
std::string panel(const std::vector<EpochRecord>& history, const std::string& metric, const Points& within, double x0) {
  std::string svg;
  const double plot_w = kPanelWidth - kLeft - kRight, plot_h = kPanelHeight - kTop - kBottom;
  double low = INFINITY, high = -INFINITY;
  auto extend = [&](double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  };
  for (const EpochRecord& r : history)
    for (const MetricValues* values : {&r.train, &r.valid})
      if (auto v = values->get(metric)) extend(*v);
  for (const auto& point : within) extend(point.second);
  if (high - low < 1e-12) {
    const double pad = std::max(std::abs(high) * 0.05, 1e-3);
    low -= pad;
    high += pad;
  }
  const double step = tick_step(low, high, 5);
  low = std::floor(low / step) * step;
  high = std::ceil(high / step) * step;
  // The x axis: from the first epoch shown (from 0, the start of training, when the values
  // within epochs are drawn) to the last one.
  double first_epoch = history.empty() ? 0 : static_cast<double>(history.front().epoch);
  double last_epoch = history.empty() ? 1 : static_cast<double>(history.back().epoch);
  if (!within.empty()) {
    first_epoch = std::min(first_epoch, std::floor(within.front().first));
    last_epoch = std::max(last_epoch, std::ceil(within.back().first));
  }
  last_epoch = std::max(last_epoch, first_epoch + 1);
  auto px = [&](double epoch) { return x0 + kLeft + (epoch - first_epoch) / (last_epoch - first_epoch) * plot_w; };
  auto py = [&](double v) { return kTop + (high - v) / (high - low) * plot_h; };

  svg += fmt::format("<g class=\"panel\" data-metric=\"{}\">\n", escape_xml(metric));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"24\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", x0 + kLeft,
                     escape_xml(metric));
  // Horizontal grid lines with their values.
  for (double v = low; v <= high + step * 0.5; v += step) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n",
        x0 + kLeft, py(v), x0 + kLeft + plot_w, py(v), x0 + kLeft - 6, py(v) + 4, tick_label(v, step));
  }
  // Epoch ticks: every epoch, or a round step when there are many.
  const double epoch_step = std::max(1.0, tick_step(first_epoch, last_epoch, 8));
  for (double e = first_epoch; e <= last_epoch + 1e-9; e += epoch_step)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" font-size=\"11\" text-anchor=\"middle\">{4}</text>\n",
        px(e), kTop + plot_h, kTop + plot_h + 5, kTop + plot_h + 18, static_cast<std::int64_t>(e));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">epoch</text>\n",
                     x0 + kLeft + plot_w / 2, kTop + plot_h + 36);
  svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333\"/>\n",
                     x0 + kLeft, kTop, plot_w, plot_h);
  // Within epochs: a thin line under the epochs' dots.
  std::string line;
  for (const auto& [x, v] : within)
    if (std::isfinite(v)) line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", px(x), py(v));
  if (!line.empty())
    svg += fmt::format(
        "<polyline class=\"train-steps\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\" "
        "stroke-opacity=\"0.45\"/>\n",
        line, kTrainColor);
  // The curves: a polyline and a dot per epoch for each phase that has values.
  for (const Split split : {Split::train, Split::valid}) {
    const char* color = split == Split::train ? kTrainColor : kValidColor;
    std::string points;
    std::string dots;
    for (const EpochRecord& r : history) {
      const auto v = (split == Split::train ? r.train : r.valid).get(metric);
      if (!v || !std::isfinite(*v)) continue;
      const double x = px(static_cast<double>(r.epoch)), y = py(*v);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
      dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{} {} epoch {}: {}</title></circle>\n",
                          x, y, color, split_name(split), escape_xml(metric), r.epoch, *v);
    }
    if (points.empty()) continue;
    svg += fmt::format("<polyline class=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       split_name(split), points, color);
    svg += dots;
  }
  // The legend, top right.
  const double lx = x0 + kLeft + plot_w - 110;
  svg += fmt::format(
      "<rect x=\"{0:.1f}\" y=\"{1:.1f}\" width=\"12\" height=\"3\" fill=\"{2}\"/>"
      "<text x=\"{3:.1f}\" y=\"{4:.1f}\" font-size=\"11\">train</text>"
      "<rect x=\"{5:.1f}\" y=\"{1:.1f}\" width=\"12\" height=\"3\" fill=\"{6}\"/>"
      "<text x=\"{7:.1f}\" y=\"{4:.1f}\" font-size=\"11\">valid</text>\n",
      lx, kTop - 14, kTrainColor, lx + 16, kTop - 10, lx + 56, kValidColor, lx + 72);
  svg += "</g>\n";
  return svg;
}

}  // namespace

std::string learning_curves_svg(const std::vector<EpochRecord>& history, const std::vector<std::string>& metrics,
                                const std::string& title, const std::vector<std::pair<double, double>>& train_loss) {
  std::vector<std::string> shown;
  for (const std::string& metric : metrics) {
    const bool has_value = std::any_of(history.begin(), history.end(), [&](const EpochRecord& r) {
      const auto t = r.train.get(metric), v = r.valid.get(metric);
      return (t && std::isfinite(*t)) || (v && std::isfinite(*v));
    });
    if (has_value || (metric == "loss" && !train_loss.empty())) shown.push_back(metric);
  }
  const double width = kPanelWidth * static_cast<double>(std::max<std::size_t>(shown.size(), 1));
  const double height = kPanelHeight + 30;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format("<title>{}</title>\n", escape_xml(title));
  svg += "<g transform=\"translate(0,24)\">\n";
  for (std::size_t i = 0; i < shown.size(); ++i)
    svg += panel(history, shown[i], shown[i] == "loss" ? train_loss : Points{}, kPanelWidth * static_cast<double>(i));
  if (shown.empty())
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"14\" text-anchor=\"middle\">no epoch finished</text>\n",
                       width / 2, kPanelHeight / 2);
  svg += "</g>\n";
  svg += fmt::format("<text x=\"12\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", escape_xml(title));
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln::train
