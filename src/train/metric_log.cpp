#include "metric_log.hpp"

#include "kiln/core/error.hpp"

#include "store/json.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <system_error>

namespace kiln::train::detail {
namespace fs = std::filesystem;

namespace {

std::string csv_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : (std::isnan(v) ? "" : (v > 0 ? "inf" : "-inf")); }
std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

}  // namespace

MetricLog::MetricLog(const fs::path& dir, std::vector<std::string> columns, bool resume,
                     const std::vector<std::pair<std::string, std::uint64_t>>& sizes)
    : dir_(dir), columns_(std::move(columns)) {
  std::string header;
  for (const std::string& c : columns_) header += "," + c;
  const std::pair<File*, std::string> files[] = {
      {&steps_csv_, "split,epoch,step,global_step" + header + "\n"},
      {&steps_jsonl_, ""},
      {&epochs_csv_, "epoch,split,global_step" + header + "\n"},
      {&epochs_jsonl_, ""},
  };
  const char* names[] = {"steps.csv", "steps.jsonl", "epochs.csv", "epochs.jsonl"};
  for (std::size_t i = 0; i < 4; ++i) {
    File& file = *files[i].first;
    file.name = names[i];
    const fs::path path = dir_ / file.name;
    std::error_code error;
    bool fresh = !resume || !fs::exists(path, error);
    if (!fresh) {
      // Rows written after the checkpoint belong to steps the resumed run repeats.
      std::uint64_t keep = 0;
      for (const auto& [name, bytes] : sizes)
        if (name == file.name) keep = bytes;
      if (fs::file_size(path, error) > keep && !error) fs::resize_file(path, keep, error);
      fresh = keep == 0;
    }
    file.handle = std::fopen(path.c_str(), fresh ? "w" : "a");
    KILN_CHECK(file.handle != nullptr, "kiln::train: cannot open the log {}: {}", path.string(), std::strerror(errno));
    if (fresh && !files[i].second.empty()) write(file, files[i].second);
  }
}

MetricLog::~MetricLog() {
  for (File* file : {&steps_csv_, &steps_jsonl_, &epochs_csv_, &epochs_jsonl_})
    if (file->handle != nullptr) std::fclose(file->handle);
}

void MetricLog::write(File& file, const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), file.handle) != text.size())
    KILN_FAIL("kiln::train: writing the log {} failed: {}", (dir_ / file.name).string(), std::strerror(errno));
}

std::string MetricLog::csv_cells(const MetricValues& values) const {
  std::string out;
  for (const std::string& c : columns_) {
    const auto v = values.get(c);
    out += "," + (v ? csv_number(*v) : std::string());
  }
  return out;
}

std::string MetricLog::json_members(const MetricValues& values) const {
  std::string out;
  for (const auto& [name, value] : values.entries())
    out += fmt::format(", {}: {}", store::detail::json::quote(name), json_number(value));
  return out;
}

void MetricLog::step(Split split, std::int64_t epoch, std::int64_t step, std::int64_t global_step,
                     const MetricValues& values) {
  write(steps_csv_, fmt::format("{},{},{},{}{}\n", split_name(split), epoch, step, global_step, csv_cells(values)));
  write(steps_jsonl_, fmt::format("{{\"split\": \"{}\", \"epoch\": {}, \"step\": {}, \"global_step\": {}{}}}\n",
                                  split_name(split), epoch, step, global_step, json_members(values)));
}

void MetricLog::epoch(std::int64_t epoch, Split split, std::int64_t global_step, const MetricValues& values) {
  write(epochs_csv_, fmt::format("{},{},{}{}\n", epoch, split_name(split), global_step, csv_cells(values)));
  write(epochs_jsonl_, fmt::format("{{\"epoch\": {}, \"split\": \"{}\", \"global_step\": {}{}}}\n", epoch,
                                   split_name(split), global_step, json_members(values)));
}

std::vector<std::pair<std::string, std::uint64_t>> MetricLog::sizes() {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (File* file : {&steps_csv_, &steps_jsonl_, &epochs_csv_, &epochs_jsonl_}) {
    std::fflush(file->handle);
    std::error_code error;
    const std::uintmax_t bytes = fs::file_size(dir_ / file->name, error);
    out.emplace_back(file->name, error ? 0 : static_cast<std::uint64_t>(bytes));
  }
  return out;
}

}  // namespace kiln::train::detail
