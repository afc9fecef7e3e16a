// Stable sort along one dim on the CPU: values and i64 indices. NaN sorts last ascending and
// first descending (PyTorch's order); equal values keep their input order in both directions.
#include "internal.hpp"

#include <cmath>
#include <type_traits>
#include <utility>

namespace kiln::cpu {
namespace {

template <class T> struct Keyed {
  T value;
  std::int64_t index;
};

// Stable sort of [first, last) by value; insertion sort for short slices avoids
// std::stable_sort's buffer allocation.
template <class T, class Less> void stable_sort_keyed(Keyed<T>* first, Keyed<T>* last, Less less) {
  if (last - first <= 32) {
    for (Keyed<T>* it = first + 1; it < last; ++it) {
      const Keyed<T> item = *it;
      Keyed<T>* hole = it;
      for (; hole > first && less(item.value, (hole - 1)->value); --hole) *hole = *(hole - 1);
      *hole = item;
    }
    return;
  }
  std::stable_sort(first, last, [&](const Keyed<T>& a, const Keyed<T>& b) { return less(a.value, b.value); });
}

template <class T> void sort_slice(Keyed<T>* first, Keyed<T>* last, bool descending) {
  Keyed<T>* numbers_first = first;
  Keyed<T>* numbers_last = last;
  if constexpr (std::is_floating_point_v<T>) {
    // NaNs first move (stably) to the end, or the front when descending; the rest compare normally.
    const auto is_number = [](const Keyed<T>& k) { return k.value == k.value; };
    const auto is_nan = [&](const Keyed<T>& k) { return !is_number(k); };
    if (descending) numbers_first = std::stable_partition(first, last, is_nan);
    else numbers_last = std::stable_partition(first, last, is_number);
  }
  if (descending) stable_sort_keyed(numbers_first, numbers_last, [](T a, T b) { return a > b; });
  else stable_sort_keyed(numbers_first, numbers_last, [](T a, T b) { return a < b; });
}

// Sorts every [n]-slice of x viewed as [outer, n, inner]; slices with inner > 1 are gathered
// with stride inner into a buffer and scattered back.
template <class T>
void sort_kernel(const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner, bool descending, T* values,
                 std::int64_t* indices) {
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, n));
  parallel_for(outer * inner, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<Keyed<T>> buffer(static_cast<std::size_t>(n));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t base = (item / inner) * n * inner + item % inner;
      for (std::int64_t j = 0; j < n; ++j) buffer[static_cast<std::size_t>(j)] = {x[base + j * inner], j};
      sort_slice(buffer.data(), buffer.data() + n, descending);
      for (std::int64_t j = 0; j < n; ++j) {
        values[base + j * inner] = buffer[static_cast<std::size_t>(j)].value;
        indices[base + j * inner] = buffer[static_cast<std::size_t>(j)].index;
      }
    }
  });
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

std::pair<Cpu::Primitive, Cpu::Primitive> Cpu::sort(const Primitive& x, std::int64_t dim, bool descending) {
  const std::size_t d = normalize_dim("sort", dim, x.shape.rank());
  if (x.dtype == DType::f16 || x.dtype == DType::bf16) {
    // f16/bf16 → f32 is exact, so sorting in f32 and casting back returns the input's values.
    auto [values, indices] = sort(cast(x, DType::f32), dim, descending);
    return {cast(values, x.dtype), std::move(indices)};
  }
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= x.shape[i];
  for (std::size_t i = d + 1; i < x.shape.rank(); ++i) inner *= x.shape[i];
  CpuTensor values = cpu::empty(x.shape, x.dtype);
  CpuTensor indices = cpu::empty(x.shape, DType::i64);
  if (x.numel() == 0) return {values, indices};
  const CpuTensor c = cpu::contiguous(x);
  const DType as = x.dtype == DType::boolean ? DType::u8 : x.dtype;  // bool sorts as its 0/1 bytes
  visit_dtype(as, [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      cpu::sort_kernel<T>(c.data<T>(), outer, x.shape[d], inner, descending, values.data<T>(),
                          indices.data<std::int64_t>());
  });
  return {values, indices};
}

}  // namespace kiln
