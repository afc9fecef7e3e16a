// kiln::Error, the one exception type Kiln throws for bad input, and KILN_CHECK, which
// builds its message only when the check fails.
//
// Messages are written like fmt's: "op: expected {}, got {}", one plain {} per argument
// ({{ and }} for braces; no format specs: pass fmt::format("{:02x}", b) as the argument for
// those). The count of {} is checked at compile time. A message instantiates no fmt
// templates at the check: every argument becomes one kiln::detail::MessageArg (numbers,
// strings, anything with a str() member or an ADL to_string; other fmt-formattable types
// through fmt::to_string), and a non-template function joins them. Checks sit in every
// tensor op, so this keeps fmt's heavy templates out of each translation unit that uses
// tensors; it is most of the compile time of a small model file.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <ranges>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

// A float or double as fmt's "{}" writes it: the shortest text that reads back as the same
// value of its type, fixed notation for decimal exponents in [-4, 16), scientific with a
// signed exponent of at least two digits otherwise.
template <std::floating_point T> std::string message_float(T v) {
  if (v != v) return "nan";
  if (v == std::numeric_limits<T>::infinity()) return "inf";
  if (v == -std::numeric_limits<T>::infinity()) return "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::scientific);
  if (ec != std::errc{}) return "?";
  const std::string_view s(buffer, static_cast<std::size_t>(end - buffer));  // [-]d[.ddd]e±XX
  const std::size_t e = s.find('e');
  const bool negative = s[0] == '-';
  std::string digits;
  for (const char c : s.substr(negative ? 1 : 0, e - (negative ? 1 : 0)))
    if (c != '.') digits += c;
  int exponent = 0;
  std::from_chars(s.data() + e + (s[e + 1] == '+' ? 2 : 1), s.data() + s.size(), exponent);
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    const int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0');
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
           digits.substr(static_cast<std::size_t>(exponent) + 1);
  }
  return out;
}

template <class T>
concept HasStr = requires(const T& v) {
  { v.str() } -> std::convertible_to<std::string>;
};
template <class T>
concept HasToString = requires(const T& v) {
  { to_string(v) } -> std::convertible_to<std::string_view>;
};

// One argument of a failed check's message, as text.
class MessageArg {
 public:
  MessageArg(bool v) : MessageArg(std::string_view(v ? "true" : "false")) {}
  MessageArg(char v) : MessageArg(std::string_view(&v, 1)) {}
  template <std::integral T>
    requires(!std::same_as<T, bool> && !std::same_as<T, char>)
  MessageArg(T v) {
    if constexpr (std::is_signed_v<T>) set_signed(v);
    else set_unsigned(v);
  }
  template <std::floating_point T> MessageArg(T v) {
    if constexpr (std::same_as<T, float>) set_float(v);
    else set_double(static_cast<double>(v));
  }
  MessageArg(const char* v) : MessageArg(std::string_view(v)) {}
  MessageArg(const std::string& v) : MessageArg(std::string_view(v)) {}
  MessageArg(std::string_view v) { set_text(v); }
  template <HasStr T> MessageArg(const T& v) { set_text(v.str()); }
  template <HasToString T>
    requires(!HasStr<T>)
  MessageArg(const T& v) {
    set_text(to_string(v));
  }
  // A range (std::array, std::vector, std::span...) as fmt/ranges writes it: "[1, 2]".
  template <std::ranges::input_range R>
    requires(!HasStr<R> && !HasToString<R> && !std::is_convertible_v<R, std::string_view> &&
             std::constructible_from<MessageArg, std::ranges::range_reference_t<const R>>)
  MessageArg(const R& range) {
    set_text("[");
    bool first = true;
    for (const auto& item : range) {
      append(first ? "" : ", ");
      append(MessageArg(item).text());
      first = false;
    }
    append("]");
  }
  template <class T>
    requires(!HasStr<T> && !HasToString<T> && !std::is_arithmetic_v<T> && !std::is_convertible_v<T, std::string_view> &&
             !std::ranges::input_range<T>)
  MessageArg(const T& v) {
    set_text(fmt::to_string(v));
  }

  const std::string& text() const { return text_; }

 private:
  // Out of line and cold: a check's failure path is a few calls, not inlined string code.
  [[gnu::noinline, gnu::cold]] void set_text(std::string_view v) { text_.assign(v); }
  [[gnu::noinline, gnu::cold]] void append(std::string_view v) { text_.append(v); }
  [[gnu::noinline, gnu::cold]] void set_signed(long long v) { text_ = std::to_string(v); }
  [[gnu::noinline, gnu::cold]] void set_unsigned(unsigned long long v) { text_ = std::to_string(v); }
  [[gnu::noinline, gnu::cold]] void set_float(float v) { text_ = message_float(v); }
  [[gnu::noinline, gnu::cold]] void set_double(double v) { text_ = message_float(v); }

  std::string text_;
};

// The number of {} in a message; -1 when a brace is neither {}, {{ nor }}.
consteval int count_placeholders(std::string_view s) {
  int n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') {
      if (i + 1 < s.size() && s[i + 1] == '{') ++i;
      else if (i + 1 < s.size() && s[i + 1] == '}') ++n, ++i;
      else return -1;
    } else if (s[i] == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') ++i;
      else return -1;
    }
  }
  return n;
}

// A message with exactly N {}: a wrong count does not compile.
template <std::size_t N> struct Message {
  template <std::size_t L>
  consteval Message(const char (&s)[L]) : text(s, L - 1) {
    if (count_placeholders(text) != static_cast<int>(N))
      throw "KILN_CHECK: the message needs one plain {} per argument (no format specs)";
  }
  std::string_view text;
};

// The message with each {} replaced by the next argument's text.
inline std::string join_message(std::string_view format, std::initializer_list<MessageArg> args) {
  std::string out;
  const MessageArg* next = args.begin();
  for (std::size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '{') {
      if (next != args.end()) out += (next++)->text();
      ++i;
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn, gnu::noinline, gnu::cold]] inline void throw_message(std::string_view format,
                                                                 std::initializer_list<MessageArg> args) {
  throw Error(join_message(format, args));
}

template <class... Args>
[[noreturn, gnu::cold]] inline void fail(Message<sizeof...(Args)> message, const Args&... args) {
  throw_message(message.text, {MessageArg(args)...});
}

}  // namespace detail
}  // namespace kiln

// KILN_CHECK(cond, "op: expected {}, got {}", a, b): throws kiln::Error when cond is false.
#define KILN_CHECK(cond, ...)                 \
  do {                                        \
    if (!(cond)) [[unlikely]]                 \
      ::kiln::detail::fail(__VA_ARGS__);      \
  } while (0)

#define KILN_FAIL(...) ::kiln::detail::fail(__VA_ARGS__)
