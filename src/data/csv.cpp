#include "kiln/data/csv.hpp"

#include "bytes.hpp"
#include "kiln/core/error.hpp"

#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::data {

namespace {

// Text from the file as an error quotes it: at most 40 bytes (cut at a UTF-8 character
// boundary) and the full length after it, so that a 10 MB field cannot make a 10 MB message.
std::string excerpt(std::string_view text) {
  constexpr std::size_t most = 40;
  if (text.size() <= most) return std::string(text);
  std::size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", text.substr(0, cut), text.size());
}

}  // namespace

CsvTable::CsvTable(std::vector<std::string> columns, TensorData values)
    : columns_(std::move(columns)), values_(std::make_shared<const TensorData>(std::move(values))) {
  const Shape& shape = values_->shape();
  KILN_CHECK(shape.rank() == 2 && shape[1] == static_cast<std::int64_t>(columns_.size()),
             "CsvTable: values of shape {} do not match {} columns", shape, columns_.size());
}

std::size_t CsvTable::rows() const { return static_cast<std::size_t>(values_->shape()[0]); }

TensorData CsvTable::get(std::size_t row) const {
  KILN_CHECK(row < rows(), "CsvTable: row {} is out of range for a table of {} rows", row, rows());
  const std::size_t bytes = cols() * dtype_size(values_->dtype());
  std::vector<std::byte> out(bytes);
  if (bytes > 0) std::memcpy(out.data(), values_->bytes().data() + row * bytes, bytes);
  return TensorData(std::move(out), Shape{static_cast<std::int64_t>(cols())}, values_->dtype());
}

std::size_t CsvTable::column(std::string_view name) const {
  for (std::size_t c = 0; c < columns_.size(); ++c)
    if (columns_[c] == name) return c;
  std::vector<std::string> names;
  for (std::size_t c = 0; c < columns_.size() && c < 20; ++c) names.push_back(excerpt(columns_[c]));
  if (columns_.size() > 20) names.push_back(fmt::format("... ({} in all)", columns_.size()));
  KILN_FAIL("CsvTable: no column named '{}'; the columns are {}", excerpt(name), fmt::join(names, ", "));
}

namespace {

// Splits CSV text into rows of fields, honouring double quotes ("a,b" and "say ""hi"""). A
// line ends at LF, CRLF or a lone CR (classic Mac OS files): a CR is never part of a row.
class CsvLexer {
 public:
  CsvLexer(std::string_view text, std::string_view name, char delimiter)
      : text_(text), name_(name), delimiter_(delimiter) {}

  // The next non-blank row's fields; false at the end of the text. line() is its line number.
  bool next(std::vector<std::string>& fields) {
    fields.clear();
    for (;;) {
      if (at_ >= text_.size()) return false;
      line_ = next_line_;
      if (!blank_line()) break;
      skip_line();
    }
    std::string field;
    bool quoted = false;
    for (;;) {
      if (at_ >= text_.size()) {
        fields.push_back(finish(field, quoted));
        return true;
      }
      const char c = text_[at_];
      if (c == '"' && only_spaces(field) && !quoted) {
        quoted = true;
        field.clear();
        ++at_;
        read_quoted(field);
      } else if (c == delimiter_) {
        fields.push_back(finish(field, quoted));
        field.clear();
        quoted = false;
        ++at_;
      } else if (c == '\n' || c == '\r') {
        fields.push_back(finish(field, quoted));
        skip_line();
        return true;
      } else {
        KILN_CHECK(!quoted, "read_csv: {}: line {}: text '{}' after the closing quote of a field", name_, line_,
                   excerpt(rest_of_field()));
        field += c;
        ++at_;
      }
    }
  }
  std::size_t line() const { return line_; }

 private:
  bool blank_line() const {
    for (std::size_t i = at_; i < text_.size() && text_[i] != '\n' && text_[i] != '\r'; ++i)
      if (text_[i] != ' ' && text_[i] != '\t') return false;
    return true;
  }
  // Moves past the end of the current line: LF, CRLF or CR.
  void skip_line() {
    while (at_ < text_.size() && text_[at_] != '\n' && text_[at_] != '\r') ++at_;
    if (at_ < text_.size() && text_[at_++] == '\r' && at_ < text_.size() && text_[at_] == '\n') ++at_;
    ++next_line_;
  }
  static bool only_spaces(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }
  void read_quoted(std::string& field) {
    const std::size_t start_line = next_line_;
    for (;;) {
      KILN_CHECK(at_ < text_.size(), "read_csv: {}: line {}: a quoted field is not closed", name_, start_line);
      const char c = text_[at_++];
      if (c == '"') {
        if (at_ < text_.size() && text_[at_] == '"') {
          field += '"';
          ++at_;
        } else {
          break;
        }
      } else {
        // A line break inside quotes is part of the field; count it as a line all the same.
        if (c == '\n' || (c == '\r' && (at_ == text_.size() || text_[at_] != '\n'))) ++next_line_;
        field += c;
      }
    }
    // Only spaces may follow the closing quote before the delimiter.
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t')) ++at_;
  }
  std::string finish(const std::string& field, bool quoted) const {
    if (quoted) return field;
    const std::size_t begin = field.find_first_not_of(" \t");
    if (begin == std::string::npos) return {};
    return field.substr(begin, field.find_last_not_of(" \t") - begin + 1);
  }
  std::string_view rest_of_field() const {
    std::size_t end = at_;
    while (end < text_.size() && text_[end] != delimiter_ && text_[end] != '\n' && text_[end] != '\r') ++end;
    return text_.substr(at_, end - at_);
  }

  std::string_view text_, name_;
  char delimiter_;
  std::size_t at_ = 0;
  std::size_t line_ = 1, next_line_ = 1;
};

// The number in a field; `names` are the column names for errors (null without a header).
double parse_number(const std::string& field, std::string_view name, std::size_t line, std::size_t column,
                    const std::vector<std::string>* names, const CsvOptions& options) {
  const char* begin = field.data();
  const char* end = begin + field.size();
  if (begin != end && *begin == '+') ++begin;  // from_chars does not take a leading '+'
  double value = 0.0;
  const auto [stop, error] = std::from_chars(begin, end, value);
  const bool parsed = error == std::errc() && stop == end && begin != end;
  // f32 tables: a value beyond float's range would become inf on conversion.
  const bool fits = std::isfinite(value) ? options.dtype != DType::f32 || std::isfinite(static_cast<float>(value))
                                         : options.allow_non_finite;
  if (parsed && fits) [[likely]]
    return value;
  const std::string where = names == nullptr
                                ? fmt::format("column {}", column + 1)
                                : fmt::format("column {} ('{}')", column + 1, excerpt((*names)[column]));
  KILN_CHECK(!field.empty(), "read_csv: {}: line {}, {}: the field is empty; every field must be a number", name, line,
             where);
  KILN_CHECK(stop == end && begin != end && error != std::errc::invalid_argument,
             "read_csv: {}: line {}, {}: '{}' is not a number", name, line, where, excerpt(field));
  KILN_CHECK(error != std::errc::result_out_of_range, "read_csv: {}: line {}, {}: '{}' is out of range for f64", name,
             line, where, excerpt(field));
  KILN_CHECK(std::isfinite(value),
             "read_csv: {}: line {}, {}: '{}' is not a finite number; set CsvOptions::allow_non_finite to read NaN "
             "and infinities",
             name, line, where, excerpt(field));
  KILN_FAIL("read_csv: {}: line {}, {}: '{}' is out of range for f32 (at most {} in magnitude); read the file with "
            "dtype f64",
            name, line, where, excerpt(field), std::numeric_limits<float>::max());
}

}  // namespace

CsvTable parse_csv(std::string_view text, std::string_view name, const CsvOptions& options) {
  KILN_CHECK(options.dtype == DType::f32 || options.dtype == DType::f64,
             "read_csv: {}: dtype must be f32 or f64, not {}", name, options.dtype);
  KILN_CHECK(options.delimiter != '"' && options.delimiter != '\n' && options.delimiter != '\r',
             "read_csv: {}: the delimiter cannot be a quote or a line break", name);
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  CsvLexer lexer(text, name, options.delimiter);
  std::vector<std::string> columns, fields;
  std::size_t header_line = 0;
  if (options.header) {
    KILN_CHECK(lexer.next(columns), "read_csv: {}: the file is empty; expected a header row", name);
    header_line = lexer.line();
  }
  std::vector<double> values;
  std::size_t width = columns.size(), rows = 0;
  while (lexer.next(fields)) {
    if (!options.header && rows == 0) {
      width = fields.size();
      for (std::size_t c = 0; c < width; ++c) columns.push_back(std::to_string(c));
    }
    KILN_CHECK(fields.size() == width, "read_csv: {}: line {} has {} fields, but {} has {}", name, lexer.line(),
               fields.size(), options.header ? fmt::format("the header (line {})", header_line) : "the first row",
               width);
    for (std::size_t c = 0; c < width; ++c)
      values.push_back(parse_number(fields[c], name, lexer.line(), c, options.header ? &columns : nullptr, options));
    ++rows;
  }
  const Shape shape{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(width)};
  return CsvTable(std::move(columns), TensorData::from(values, shape).convert(options.dtype));
}

CsvTable read_csv(const std::filesystem::path& path, const CsvOptions& options) {
  std::string name;
  const std::vector<std::uint8_t> bytes = detail::read_maybe_gzip("read_csv", path, name);
  return parse_csv(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name, options);
}

}  // namespace kiln::data
