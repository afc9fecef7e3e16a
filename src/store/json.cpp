#include "json.hpp"

#include "kiln/core/error.hpp"

#include <set>

namespace kiln::store::detail::json {
namespace {

// Deeper documents are rejected rather than recursed into (a safetensors header needs 3).
constexpr int kMaxDepth = 64;
// At most this many values in one document: a parsed value takes about 100 bytes, so a
// 99 MB header of one array of zeros asked for 5 GB. 2^22 values (about 400 MB parsed)
// describe some 400,000 tensors; a file of 1 MB holds at most 500,000 values.
constexpr std::size_t kMaxValues = std::size_t{1} << 22;

// JSON's two-character escapes: a backslash and kEscapeLetters[i] stand for kEscapedChars[i].
constexpr std::string_view kEscapeLetters = "\"\\/bfnrt";
constexpr std::string_view kEscapedChars = "\"\\/\b\f\n\r\t";

// The length of the UTF-8 character at text[pos] (a lead byte >= 0x80), or 0 when it is
// not one: a bad lead or continuation byte, an overlong form, a surrogate, a code point
// beyond U+10FFFF, or a sequence cut short.
std::size_t utf8_length(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t length = 0;
  unsigned code = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0fu;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07u;
  } else {
    return 0;
  }
  if (text.size() - pos < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    const auto c = static_cast<unsigned char>(text[pos + i]);
    if ((c & 0xc0u) != 0x80u) return 0;
    code = (code << 6) | (c & 0x3fu);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return 0;
  return length;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view context, std::size_t base_offset)
      : text_(text), context_(context), base_offset_(base_offset) {}

  Value document() {
    skip_space();
    Value value = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected {} after the end of the JSON value", describe_here());
    return value;
  }

 private:
  template <class... Args>
  [[noreturn]] void fail_at(std::size_t at, fmt::format_string<Args...> format, Args&&... args) {
    KILN_FAIL("{}: invalid JSON at byte {} (file offset {}): {}", context_, at, base_offset_ + at,
              fmt::format(format, std::forward<Args>(args)...));
  }
  template <class... Args> [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    fail_at(pos_, format, std::forward<Args>(args)...);
  }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c);
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) fail("expected '{}', found {}", c, describe_here());
    ++pos_;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than {} levels", kMaxDepth);
    if (++values_ > kMaxValues) fail("more than {} values, Kiln's limit for one document", kMaxValues);
    if (pos_ >= text_.size()) fail("expected a value, found end of input");
    Value value;
    value.offset = pos_;
    switch (text_[pos_]) {
      case '{': parse_object(value, depth); break;
      case '[': parse_array(value, depth); break;
      case '"':
        value.kind = Value::Kind::string;
        value.text = parse_string();
        break;
      case 't': literal("true", value, Value::Kind::boolean, true); break;
      case 'f': literal("false", value, Value::Kind::boolean, false); break;
      case 'n': literal("null", value, Value::Kind::null, false); break;
      default:
        if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) {
          parse_number(value);
        } else {
          fail("expected a value, found {}", describe_here());
        }
    }
    return value;
  }

  void literal(std::string_view word, Value& value, Value::Kind kind, bool boolean) {
    if (text_.substr(pos_, word.size()) != word) fail("expected '{}'", word);
    pos_ += word.size();
    value.kind = kind;
    value.boolean = boolean;
  }

  // The items of an object or an array, from its opening bracket to `close`: `item`
  // reads one; a ',' or `close` must follow it.
  template <class Item> void parse_items(char close, std::string_view what, Item&& item) {
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == close) {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      item();
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == close) {
        ++pos_;
        return;
      }
      fail("expected ',' or '{}' in {}, found {}", close, what, describe_here());
    }
  }

  void parse_object(Value& value, int depth) {
    value.kind = Value::Kind::object;
    std::set<std::string, std::less<>> keys;
    parse_items('}', "an object", [&] {
      const std::size_t key_at = pos_;
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key string, found {}", describe_here());
      std::string key = parse_string();
      if (!keys.insert(key).second) fail_at(key_at, "duplicate key {}", quote(key));
      skip_space();
      expect(':');
      skip_space();
      Value member = parse_value(depth + 1);
      value.object.push_back(Member{std::move(key), std::move(member)});
    });
  }

  void parse_array(Value& value, int depth) {
    value.kind = Value::Kind::array;
    parse_items(']', "an array", [&] { value.array.push_back(parse_value(depth + 1)); });
  }

  void parse_number(Value& value) {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
      if (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') fail("a number may not have leading zeros");
    } else if (digits() == 0) {
      fail("expected a digit, found {}", describe_here());
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) fail("expected a digit after the decimal point, found {}", describe_here());
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("expected a digit in the exponent, found {}", describe_here());
    }
    value.kind = Value::Kind::number;
    value.text = std::string(text_.substr(start, pos_ - start));
  }

  unsigned hex4() {
    if (text_.size() - pos_ < 4) fail("a \\u escape needs 4 hex digits");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail_at(pos_ - 1, "'{}' is not a hex digit in a \\u escape", c);
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  void copy_utf8(std::string& out) {
    const std::size_t length = utf8_length(text_, pos_);
    if (length == 0) fail("invalid UTF-8 (a bad, overlong, surrogate or truncated sequence)");
    out.append(text_.substr(pos_, length));
    pos_ += length;
  }

  std::string parse_string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character 0x{:02x} in a string (it must be escaped)", c);
      if (c >= 0x80) {
        copy_utf8(out);
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char escape = text_[pos_++];
      if (const std::size_t at = kEscapeLetters.find(escape); at != std::string_view::npos) {
        out += kEscapedChars[at];
        continue;
      }
      if (escape != 'u') fail_at(pos_ - 1, "invalid escape '\\{}'", escape);
      const std::size_t escape_at = pos_ - 2;
      unsigned code = hex4();
      if (code >= 0xdc00 && code <= 0xdfff) fail_at(escape_at, "lone low surrogate \\u{:04x}", code);
      if (code >= 0xd800 && code <= 0xdbff) {
        if (text_.substr(pos_, 2) != "\\u") fail_at(escape_at, "high surrogate \\u{:04x} without its low half", code);
        pos_ += 2;
        const unsigned low = hex4();
        if (low < 0xdc00 || low > 0xdfff) fail_at(escape_at, "high surrogate \\u{:04x} without its low half", code);
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
      }
      append_utf8(out, code);
    }
  }

  std::string_view text_;
  std::string_view context_;
  std::size_t base_offset_;
  std::size_t pos_ = 0;
  std::size_t values_ = 0;  // parsed so far
};

}  // namespace

std::optional<std::uint64_t> Value::as_uint64() const {
  if (kind != Kind::number || text.empty() || text[0] == '-') return std::nullopt;
  std::uint64_t result = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(result, std::uint64_t{10}, &result) ||
        __builtin_add_overflow(result, static_cast<std::uint64_t>(c - '0'), &result))
      return std::nullopt;
  }
  return result;
}

Value parse(std::string_view text, std::string_view context, std::size_t base_offset) {
  return Parser(text, context, base_offset).document();
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const std::size_t length = utf8_length(text, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

std::string quote(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    const std::size_t at = kEscapedChars.find(c);
    if (at != std::string_view::npos && c != '/') {  // '/' may stand unescaped
      out += '\\';
      out += kEscapeLetters[at];
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "a boolean";
    case Value::Kind::number: return "a number";
    case Value::Kind::string: return "a string";
    case Value::Kind::array: return "an array";
    case Value::Kind::object: return "an object";
  }
  return "?";
}

}  // namespace kiln::store::detail::json
