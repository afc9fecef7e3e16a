// DType: the element types a tensor can hold, with their sizes, names and the
// C++ types that store them (dtype_of<T>, StorageOf<dtype>).
#pragma once

#include "kiln/core/half.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace kiln {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8, boolean };

inline constexpr int dtype_count = 8;

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr bool is_float(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16; }
constexpr bool is_int(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::u8; }
constexpr bool is_bool(DType d) { return d == DType::boolean; }

// The C++ type that stores one element of a dtype.
template <DType D> struct StorageOfT;
template <> struct StorageOfT<DType::f32> { using type = float; };
template <> struct StorageOfT<DType::f64> { using type = double; };
template <> struct StorageOfT<DType::f16> { using type = Half; };
template <> struct StorageOfT<DType::bf16> { using type = BFloat16; };
template <> struct StorageOfT<DType::i32> { using type = std::int32_t; };
template <> struct StorageOfT<DType::i64> { using type = std::int64_t; };
template <> struct StorageOfT<DType::u8> { using type = std::uint8_t; };
template <> struct StorageOfT<DType::boolean> { using type = bool; };
template <DType D> using StorageOf = typename StorageOfT<D>::type;

// The dtype of a C++ element type.
template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::boolean; };
template <class T> inline constexpr DType dtype_of = DTypeOf<std::remove_cv_t<T>>::value;

// Reads any element type as double and writes double into any element type.
template <class T> constexpr double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}
template <class T> constexpr T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else if constexpr (std::is_integral_v<T>) {
    // Casting NaN, or a value outside T's range, to an integer is undefined behaviour: NaN
    // becomes 0 and the rest saturate at T's limits.
    if (v != v) return T(0);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());  // 2^63 for i64: rounded up
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else return static_cast<T>(v);
}

// The dtype's name, for messages (kiln::Error's arguments find it by ADL).
inline std::string_view to_string(DType d) { return dtype_name(d); }

// Calls fn.template operator()<T>() with T the storage type of `dtype`.
template <class Fn> decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    case DType::i32: return fn.template operator()<std::int32_t>();
    case DType::i64: return fn.template operator()<std::int64_t>();
    case DType::u8: return fn.template operator()<std::uint8_t>();
    case DType::boolean: return fn.template operator()<bool>();
  }
  return fn.template operator()<float>();
}

}  // namespace kiln

template <> struct fmt::formatter<kiln::DType> : fmt::formatter<std::string_view> {
  auto format(kiln::DType d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::dtype_name(d), ctx);
  }
};
