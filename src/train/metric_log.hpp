// The run's metric logs in its output directory: steps.csv / steps.jsonl (a row per step,
// train and valid) and epochs.csv / epochs.jsonl (a row per epoch and phase). A resumed
// run cuts each file back to its size at the checkpoint and appends; a fresh run starts
// them afresh. Private to kiln::train.
#pragma once

#include "kiln/train/metric.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train::detail {

class MetricLog {
 public:
  // `columns`: the metric names, in order. `sizes`: each file's bytes at the checkpoint a
  // resumed run continues from (empty for a fresh run).
  MetricLog(const std::filesystem::path& dir, std::vector<std::string> columns, bool resume,
            const std::vector<std::pair<std::string, std::uint64_t>>& sizes);
  ~MetricLog();
  MetricLog(const MetricLog&) = delete;
  MetricLog& operator=(const MetricLog&) = delete;

  void step(Split split, std::int64_t epoch, std::int64_t step, std::int64_t global_step, const MetricValues& values);
  void epoch(std::int64_t epoch, Split split, std::int64_t global_step, const MetricValues& values);
  // Flushes and gives each file's size, for a checkpoint.
  std::vector<std::pair<std::string, std::uint64_t>> sizes();

 private:
  struct File {
    std::string name;
    std::FILE* handle = nullptr;
  };
  void write(File& file, const std::string& text);
  std::string csv_cells(const MetricValues& values) const;
  std::string json_members(const MetricValues& values) const;

  std::filesystem::path dir_;
  std::vector<std::string> columns_;
  File steps_csv_, steps_jsonl_, epochs_csv_, epochs_jsonl_;
};

}  // namespace kiln::train::detail
