// Parameters of the layout ops (slicing, scatter, padding) and their shape rules.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::ops {

// A Python-style range along one dim: start, stop (exclusive) and step; negative
// start/stop count from the end; missing ends mean "from the start" / "to the end".
struct Slice {
  std::optional<std::int64_t> start;
  std::optional<std::int64_t> stop;
  std::int64_t step = 1;

  Slice() = default;                                      // the whole dim
  Slice(std::int64_t index) : start(index), stop(index == -1 ? std::nullopt : std::optional(index + 1)) {}  // one index, dim kept
  Slice(std::optional<std::int64_t> start_, std::optional<std::int64_t> stop_, std::int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};

// A slice resolved against a dim's size: 0 <= start, step >= 1, `size` elements taken.
struct SliceRange {
  std::int64_t start = 0;
  std::int64_t size = 0;
  std::int64_t step = 1;
};

inline SliceRange resolve_slice(std::string_view op, const Slice& s, std::int64_t dim_size, std::size_t dim) {
  KILN_CHECK(s.step >= 1, "{}: slice step must be positive, got {} on dim {} (use flip for reversed order)", op,
             s.step, dim);
  auto clamp = [&](std::int64_t v) {
    if (v < 0) v += dim_size;
    return v < 0 ? std::int64_t{0} : (v > dim_size ? dim_size : v);
  };
  const std::int64_t start = s.start ? clamp(*s.start) : 0;
  const std::int64_t stop = s.stop ? clamp(*s.stop) : dim_size;
  const std::int64_t size = stop > start ? (stop - start + s.step - 1) / s.step : 0;
  return {start, size, s.step};
}

// Resolves one Slice per leading dim (missing trailing dims are taken whole).
inline std::vector<SliceRange> resolve_slices(std::string_view op, const Shape& shape, std::span<const Slice> slices) {
  KILN_CHECK(slices.size() <= shape.rank(), "{}: {} slices given for a tensor of shape {}", op, slices.size(), shape);
  std::vector<SliceRange> ranges(shape.rank());
  for (std::size_t d = 0; d < shape.rank(); ++d)
    ranges[d] = d < slices.size() ? resolve_slice(op, slices[d], shape[d], d) : SliceRange{0, shape[d], 1};
  return ranges;
}

inline Shape sliced_shape(std::span<const SliceRange> ranges) {
  std::vector<std::int64_t> dims;
  for (const auto& r : ranges) dims.push_back(r.size);
  return Shape(std::move(dims));
}

// A dim argument that backends receive already normalized; checked once more where an op
// indexes along it.
inline void check_dim(std::string_view op, std::int64_t dim, const Shape& shape) {
  KILN_CHECK(dim >= 0 && static_cast<std::size_t>(dim) < shape.rank(), "{}: dim {} is out of range for shape {}", op,
             dim, shape);
}

// gather's index: the input's rank, and no larger than the input outside dim.
inline void check_gather_index(const Shape& x, const Shape& index, std::size_t dim) {
  bool fits = index.rank() == x.rank();
  for (std::size_t i = 0; fits && i < x.rank(); ++i) fits = i == dim || index[i] <= x[i];
  KILN_CHECK(fits, "gather: index of shape {} does not fit input of shape {}: same rank, and no larger outside dim {}",
             index, x, dim);
}

inline void check_index_dtype(std::string_view op, DType index) {
  KILN_CHECK(index == DType::i64 || index == DType::i32, "{}: indices must be i64 or i32, got {}", op, index);
}

// Indices (i64 or i32, `bytes` holding them densely) into a dim of size `limit`: each in
// [-limit, limit), negative ones counted from the end, or the error naming the first one
// that is not. Every backend reads host-side indices, or finds the index a kernel flagged,
// with it.
inline std::vector<std::int64_t> read_indices(std::string_view op, DType dtype, std::span<const std::byte> bytes,
                                              std::int64_t limit) {
  check_index_dtype(op, dtype);
  const std::size_t size = dtype == DType::i64 ? 8 : 4;
  std::vector<std::int64_t> out(bytes.size() / size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::int64_t v;
    if (dtype == DType::i64) {
      std::memcpy(&v, bytes.data() + i * 8, 8);
    } else {
      std::int32_t w;
      std::memcpy(&w, bytes.data() + i * 4, 4);
      v = w;
    }
    KILN_CHECK(v >= -limit && v < limit, "{}: index {} is out of range for a dim of size {}", op, v, limit);
    out[i] = v < 0 ? v + limit : v;
  }
  return out;
}

// scatter's operands: src of the input's dtype; index of their rank, no larger than src,
// and no larger than the input outside dim.
inline void check_scatter_operands(std::string_view op, const Shape& x, DType x_dtype, const Shape& index,
                                   DType index_dtype, const Shape& src, DType src_dtype, std::size_t dim) {
  KILN_CHECK(src_dtype == x_dtype, "{}: src is {}, the tensor is {}", op, src_dtype, x_dtype);
  const std::size_t rank = x.rank();
  bool fits = index.rank() == rank && src.rank() == rank;
  for (std::size_t i = 0; fits && i < rank; ++i) fits = index[i] <= src[i] && (i == dim || index[i] <= x[i]);
  KILN_CHECK(fits,
             "{}: index of shape {} does not fit src of shape {} and input of shape {}: same rank, no larger than src, "
             "and no larger than the input outside dim {}",
             op, index, src, x, dim);
  check_index_dtype(op, index_dtype);
}

// The index of index_select / index_add: 1-d (or a single index).
inline void check_index_vector(std::string_view op, const Shape& index) {
  KILN_CHECK(index.rank() <= 1, "{}: the index must be 1-d, got shape {}", op, index);
}

// index_add's values: the input's dtype, and its shape with dim resized to the index count.
inline void check_index_add_values(const Shape& x, DType x_dtype, const Shape& values, DType values_dtype,
                                   std::size_t dim, std::int64_t count) {
  KILN_CHECK(values_dtype == x_dtype, "index_add: values are {}, the tensor is {}", values_dtype, x_dtype);
  std::vector<std::int64_t> expected = x.to_vector();
  expected[dim] = count;
  KILN_CHECK(values == Shape(expected),
             "index_add: values of shape {} do not match: {} indices into dim {} of shape {} need values of shape {}",
             values, count, dim, x, Shape(expected));
}

enum class ScatterMode : std::uint8_t { assign, add };
enum class PadMode : std::uint8_t { constant, reflect, replicate, circular };

}  // namespace kiln::ops
