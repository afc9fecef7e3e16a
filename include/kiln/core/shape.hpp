// Shape: the runtime extents of a tensor, with NumPy broadcasting and dim
// normalization (negative dims count from the end, as in PyTorch).
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/core/extents.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {
// Throws the kiln::Error for a shape whose element count does not fit in 64 bits.
[[noreturn]] inline void shape_overflow(std::string_view op, const std::string& shape) {
  throw Error(std::string(op) + ": shape " + shape + " holds more than 2^63 - 1 elements");
}
}  // namespace detail

// The dims are held inline up to rank 8 (a copy allocates nothing), on the heap beyond.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(const std::vector<std::int64_t>& dims) : dims_(dims) {}
  explicit Shape(std::span<const std::int64_t> dims) : dims_(dims) {}
  explicit Shape(const Extents& dims) : dims_(dims) {}

  std::size_t rank() const { return dims_.size(); }
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  std::span<const std::int64_t> dims() const { return dims_.span(); }
  std::vector<std::int64_t> to_vector() const { return dims_.to_vector(); }
  const std::int64_t* begin() const { return dims_.begin(); }
  const std::int64_t* end() const { return dims_.end(); }

  // The number of elements. A shape whose dims multiply past 2^63 - 1 is an error (a
  // shape with a zero dim holds 0 elements, whatever the others are).
  std::int64_t numel() const {
    std::int64_t n = 1;
    bool overflow = false;
    for (auto d : dims()) {
      if (d == 0) return 0;
      overflow |= __builtin_mul_overflow(n, d, &n);
    }
    if (overflow) detail::shape_overflow("numel", str());
    return n;
  }

  // Row-major strides, in elements. An empty shape's strides count only its trailing dims
  // up to the last zero one, as PyTorch's do, and are 0 where that product would overflow:
  // no element is ever addressed through them.
  Strides contiguous_strides() const {
    const bool empty = numel() == 0;
    Strides strides(rank(), 0);
    std::int64_t s = 1;
    for (std::size_t i = rank(); i-- > 0;) {
      strides[i] = s;
      if (__builtin_mul_overflow(s, (*this)[i], &s)) {
        if (!empty) detail::shape_overflow("contiguous_strides", str());
        s = 0;
      }
    }
    return strides;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

  // "[2, 3]": built by hand, not by fmt, so that error messages cost no fmt templates.
  std::string str() const {
    std::string out = "[";
    for (std::size_t i = 0; i < rank(); ++i) out += (i ? ", " : "") + std::to_string((*this)[i]);
    return out + "]";
  }

 private:
  Extents dims_;
};

// Normalizes a possibly negative dim into [0, rank); `op` names the caller in the error.
inline std::size_t normalize_dim(std::string_view op, std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  KILN_CHECK(dim >= -r && dim < r, "{}: dim {} is out of range for a tensor of rank {} (expected {}..{})", op, dim,
             rank, -r, r - 1);
  return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

// The NumPy broadcast of two shapes; throws naming `op` and both shapes when they do not broadcast.
inline Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const std::int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    KILN_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} do not broadcast (dim {}: {} vs {})", op,
               a.str(), b.str(), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

}  // namespace kiln

template <> struct fmt::formatter<kiln::Shape> : fmt::formatter<std::string_view> {
  auto format(const kiln::Shape& s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(s.str(), ctx);
  }
};
