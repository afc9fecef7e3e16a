// Tensor kinds (Float, Int, Bool): a compile-time tag on Tensor<B, Rank, Kind> that
// decides which ops exist, and the default dtype of each kind.
#pragma once

#include "kiln/core/dtype.hpp"

#include <concepts>
#include <cstdint>
#include <initializer_list>

namespace kiln {

struct Float {
  static constexpr DType default_dtype = DType::f32;
  using Element = double;  // what from({...}) and item() use
  static constexpr bool admits(DType d) { return is_float(d); }
  static constexpr const char* name = "Float";
};
struct Int {
  static constexpr DType default_dtype = DType::i64;
  using Element = std::int64_t;
  static constexpr bool admits(DType d) { return is_int(d); }
  static constexpr const char* name = "Int";
};
struct Bool {
  static constexpr DType default_dtype = DType::boolean;
  using Element = bool;
  static constexpr bool admits(DType d) { return is_bool(d); }
  static constexpr const char* name = "Bool";
};

template <class K> concept TensorKind = std::same_as<K, Float> || std::same_as<K, Int> || std::same_as<K, Bool>;
template <class K> concept Numeric = std::same_as<K, Float> || std::same_as<K, Int>;

// Nested initializer lists of depth D: NestedList<double, 2> is {{1, 2}, {3, 4}}.
template <class T, std::size_t D> struct NestedListT {
  using type = std::initializer_list<typename NestedListT<T, D - 1>::type>;
};
template <class T> struct NestedListT<T, 1> { using type = std::initializer_list<T>; };
template <class T, std::size_t D> using NestedList = typename NestedListT<T, D>::type;

}  // namespace kiln
