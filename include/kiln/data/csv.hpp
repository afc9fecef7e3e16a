// CSV files of numbers: an optional header row of column names, then rows of numeric
// fields, all rows as long as the first. Fields may be quoted; spaces around a field are
// ignored; lines end at LF, CRLF or CR. A field that is not a number (or not a finite one,
// unless asked for), a value beyond f32's range in an f32 table, a ragged row or an
// unclosed quote is a kiln::Error naming the file, the line, the column and the text (cut
// to 40 bytes). Compiled into kiln::data.
#pragma once

#include "kiln/core/tensor_data.hpp"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

struct CsvOptions {
  bool header = true;  // the first row names the columns
  char delimiter = ',';
  DType dtype = DType::f32;  // f32 or f64
  // Accept "nan", "inf" and "infinity" (any case, signed); otherwise they are errors, as
  // non-finite values in a dataset are usually a mistake made upstream.
  bool allow_non_finite = false;
};

// The numbers of a CSV file: a Dataset of its rows (TensorData [columns]).
class CsvTable {
 public:
  CsvTable(std::vector<std::string> columns, TensorData values);

  std::size_t size() const { return rows(); }
  TensorData get(std::size_t row) const;

  std::size_t rows() const;
  std::size_t cols() const { return columns_.size(); }
  // Column names: the header's, or "0", "1"... without one.
  const std::vector<std::string>& columns() const { return columns_; }
  // The index of a named column; an unknown name is an error that lists the names.
  std::size_t column(std::string_view name) const;
  // Every value, [rows, columns].
  const TensorData& values() const { return *values_; }

 private:
  std::vector<std::string> columns_;
  std::shared_ptr<const TensorData> values_;
};

CsvTable read_csv(const std::filesystem::path& path, const CsvOptions& options = {});
// The same from text in memory; `name` stands for the file in errors.
CsvTable parse_csv(std::string_view text, std::string_view name, const CsvOptions& options = {});

}  // namespace kiln::data
