// The examples' command-line parser: each flag is bound to the variable that holds its
// default, so `--help` can list every flag with its default, and a bad command line is
// refused, naming the flag and the value, before an example reads any file.
//
//   examples::Flags flags("infer", "Classifies Fashion-MNIST test images with a saved model.");
//   flags.add("--model", model_path, "PATH", "the model file");
//   flags.add("--count", count, "N", "how many test images", examples::positive);
//   if (auto exit_code = flags.parse(argc, argv)) return *exit_code;  // 0 after --help, 2 on a bad flag
//
// Values are given as `--count 5` or `--count=5`, and must parse completely (`5x` is refused).
// Numbers are read with std::from_chars, which refuses a sign on an unsigned type instead of
// wrapping it as std::stoul does. Header-only; needs only the standard library and fmt.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace examples {

// The values a numeric flag takes, besides being a number of its type.
enum class Range { any, non_negative, positive };
inline constexpr Range non_negative = Range::non_negative;  // 0 and up: seeds, learning rates
inline constexpr Range positive = Range::positive;          // 1 and up: counts, epochs, batch sizes

class Flags {
 public:
  Flags(std::string_view program, std::string_view summary) : program_(program), summary_(summary) {}

  // An integer flag (int, std::int64_t, std::size_t...).
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void add(std::string_view name, T& value, std::string_view metavar, std::string_view help, Range range = Range::any) {
    const Range effective = std::is_unsigned_v<T> && range == Range::any ? Range::non_negative : range;
    const std::string expected = fmt::format("must be {} integer", article(effective));
    add_flag(name, metavar, help, fmt::format("{}", value), [&value, effective, expected](std::string_view text) {
      T parsed{};
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
      if (error == std::errc::result_out_of_range && end == text.data() + text.size())
        return fmt::format("{} no larger than {}", expected, std::numeric_limits<T>::max());
      if (error != std::errc{} || end != text.data() + text.size() || !in_range(parsed, effective)) return expected;
      value = parsed;
      return std::string();
    });
  }

  // A floating-point flag; it must be finite.
  void add(std::string_view name, double& value, std::string_view metavar, std::string_view help,
           Range range = Range::any) {
    const std::string expected = fmt::format("must be {} number", article(range));
    add_flag(name, metavar, help, fmt::format("{}", value), [&value, range, expected](std::string_view text) {
      double parsed = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
      if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(parsed) ||
          !in_range(parsed, range))
        return expected;
      value = parsed;
      return std::string();
    });
  }

  // A text or path flag; its value must not be empty.
  void add(std::string_view name, std::string& value, std::string_view metavar, std::string_view help) {
    add_flag(name, metavar, help, value, [&value](std::string_view text) {
      value = text;
      return std::string();
    });
  }
  void add(std::string_view name, std::filesystem::path& value, std::string_view metavar, std::string_view help) {
    add_flag(name, metavar, help, value.string(), [&value](std::string_view text) {
      value = text;
      return std::string();
    });
  }

  // A switch: present or not, no value; it sets `value` to true.
  void add(std::string_view name, bool& value, std::string_view help) {
    flags_.push_back({std::string(name), "", std::string(help), "", [&value](std::string_view) {
                        value = true;
                        return std::string();
                      }});
  }

  // Reads the command line into the bound variables. Returns no exit code when the program
  // should go on, 0 after printing the usage (--help, -h) to stdout, 2 after printing why the
  // command line was refused to stderr.
  std::optional<int> parse(int argc, const char* const* argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string_view argument = argv[i];
      if (argument == "--help" || argument == "-h") {
        print_usage();
        return 0;
      }
      if (!argument.starts_with("--")) return refuse(fmt::format("unexpected argument '{}'", argument));
      const std::size_t equals = argument.find('=');
      const std::string_view name = argument.substr(0, equals);
      const Flag* flag = find(name);
      if (flag == nullptr) return refuse(fmt::format("unknown flag {}", name));
      if (flag->metavar.empty()) {  // a switch
        if (equals != std::string_view::npos)
          return refuse(fmt::format("{} takes no value, got '{}'", name, argument.substr(equals + 1)));
        flag->set({});
        continue;
      }
      std::string_view value;
      if (equals != std::string_view::npos) value = argument.substr(equals + 1);
      else if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) value = argv[++i];
      if (value.empty()) return refuse(fmt::format("{} needs a value ({})", name, flag->metavar));
      if (const std::string expected = flag->set(value); !expected.empty())
        return refuse(fmt::format("{} {}, got {}", name, expected, value));
    }
    return std::nullopt;
  }

  // The usage that --help prints: the summary, then one line per flag with its default.
  std::string usage() const {
    std::vector<std::pair<std::string, std::string>> rows;  // "--count N", "how many images (default: 10)"
    for (const Flag& flag : flags_) {
      std::string spelling = flag.metavar.empty() ? flag.name : fmt::format("{} {}", flag.name, flag.metavar);
      std::string meaning = flag.help;
      if (!flag.metavar.empty())
        meaning += fmt::format(" (default: {})", flag.default_text.empty() ? "none" : flag.default_text);
      rows.emplace_back(std::move(spelling), std::move(meaning));
    }
    rows.emplace_back("-h, --help", "show this help and exit");
    std::size_t width = 0;
    for (const auto& row : rows) width = std::max(width, row.first.size());
    std::string text = fmt::format("usage: {} [flags]\n\n{}\n\nflags:\n", program_, summary_);
    for (const auto& [spelling, meaning] : rows) text += fmt::format("  {:<{}}  {}\n", spelling, width, meaning);
    return text;
  }

 private:
  struct Flag {
    std::string name, metavar, help, default_text;       // metavar empty: a switch
    std::function<std::string(std::string_view)> set;  // stores the value, or says what it must be
  };

  void add_flag(std::string_view name, std::string_view metavar, std::string_view help, std::string default_text,
                std::function<std::string(std::string_view)> set) {
    flags_.push_back({std::string(name), std::string(metavar), std::string(help), std::move(default_text),
                      std::move(set)});
  }

  const Flag* find(std::string_view name) const {
    for (const Flag& flag : flags_)
      if (flag.name == name) return &flag;
    return nullptr;
  }

  static const char* article(Range range) {
    switch (range) {
      case Range::non_negative: return "a non-negative";
      case Range::positive: return "a positive";
      case Range::any: break;
    }
    return "an";
  }

  template <typename T> static bool in_range(T value, Range range) {
    if (range == Range::positive) return value > T{0};
    if constexpr (std::is_signed_v<T>)
      if (range == Range::non_negative) return value >= T{0};
    return true;
  }

  void print_usage() const { fmt::print(stdout, "{}", usage()); }

  int refuse(std::string_view reason) const {
    fmt::print(stderr, "{}: {}\n({} --help lists the flags)\n", program_, reason, program_);
    return 2;
  }

  std::string program_, summary_;
  std::vector<Flag> flags_;
};

}  // namespace examples
