// kiln::Error, the one exception type Kiln throws for bad input, and KILN_CHECK,
// which builds its message with fmt only when the check fails.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kiln

// KILN_CHECK(cond, "op: expected {}, got {}", a, b): throws kiln::Error when cond is false.
#define KILN_CHECK(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) [[unlikely]]                                   \
      throw ::kiln::Error(::fmt::format(__VA_ARGS__));          \
  } while (0)

#define KILN_FAIL(...) throw ::kiln::Error(::fmt::format(__VA_ARGS__))
