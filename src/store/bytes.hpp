// Small helpers shared by the store parsers: little-endian integers from raw bytes,
// checked arithmetic for sizes read from files (which may be hostile), and the check of
// the float_dtype options.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace kiln::store::detail {

// The little-endian integer at `p` (the caller has checked that sizeof(T) bytes exist).
template <class T> T load_le(const std::byte* p) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U value = 0;
  for (std::size_t i = sizeof(T); i-- > 0;) value = static_cast<U>((value << 8) | static_cast<U>(p[i]));
  return static_cast<T>(value);
}

inline std::string_view as_chars(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// a * b and a + b, or nullopt when the result does not fit.
template <class T> std::optional<T> checked_mul(T a, T b) {
  T result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}
template <class T> std::optional<T> checked_add(T a, T b) {
  T result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// What a weights reader asks of a path that is not a regular file (src/common/mapped_file.hpp).
inline constexpr std::string_view kWeightsFileAdvice =
    "weights are read from regular files only (they are mapped into memory), so copy the data into a file first";

// The float_dtype of a save or load option must name a floating-point dtype.
inline void check_float_dtype(std::string_view what, std::optional<DType> float_dtype) {
  KILN_CHECK(!float_dtype || is_float(*float_dtype),
             "{}: float_dtype must be a floating-point dtype (f16, bf16, f32 or f64), not {}", what, *float_dtype);
}

}  // namespace kiln::store::detail
