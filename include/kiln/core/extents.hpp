// Extents: a short list of 64-bit integers held inline up to 8 entries, on the heap beyond.
// It stores a Shape's dims and a strided view's strides, so that copying a tensor handle's
// metadata allocates nothing for any tensor of rank 8 or less.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace kiln {

class Extents {
 public:
  static constexpr std::size_t kInline = 8;

  Extents() = default;
  Extents(std::initializer_list<std::int64_t> values) { assign(values.begin(), values.size()); }
  Extents(std::size_t count, std::int64_t value) { assign(count, value); }
  explicit Extents(std::span<const std::int64_t> values) { assign(values.data(), values.size()); }
  explicit Extents(const std::vector<std::int64_t>& values) { assign(values.data(), values.size()); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  std::int64_t back() const { return data()[size_ - 1]; }
  std::int64_t* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const std::int64_t* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  std::int64_t* begin() { return data(); }
  std::int64_t* end() { return data() + size_; }
  const std::int64_t* begin() const { return data(); }
  const std::int64_t* end() const { return data() + size_; }
  std::span<const std::int64_t> span() const { return {data(), size_}; }
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }

  void assign(std::size_t count, std::int64_t value) {
    resize(count);
    std::fill(begin(), end(), value);
  }
  // Keeps the first min(size, count) values; new ones are `value`.
  void resize(std::size_t count, std::int64_t value = 0) {
    const std::size_t old = size_;
    if (count > kInline && old <= kInline) heap_.assign(inline_.begin(), inline_.begin() + old);
    if (count <= kInline && old > kInline) std::copy(heap_.begin(), heap_.begin() + count, inline_.begin());
    if (count > kInline) heap_.resize(count);
    size_ = count;
    std::int64_t* out = data();
    for (std::size_t i = old; i < count; ++i) out[i] = value;
  }
  void push_back(std::int64_t value) {
    resize(size_ + 1);
    data()[size_ - 1] = value;
  }
  // Removes the value at `at`.
  void erase(std::size_t at) {
    std::int64_t* p = data();
    std::copy(p + at + 1, p + size_, p + at);
    resize(size_ - 1);
  }

  friend bool operator==(const Extents& a, const Extents& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  // Element by element: GCC's overread warning cannot tell the heap branch from the inline
  // one when the source is a short vector, and flags a block copy there.
  void assign(const std::int64_t* values, std::size_t count) {
    resize(count);
    std::int64_t* out = data();
    for (std::size_t i = 0; i < count; ++i) out[i] = values[i];
  }

  std::size_t size_ = 0;
  std::array<std::int64_t, kInline> inline_{};
  std::vector<std::int64_t> heap_;  // used beyond kInline values only
};

// A strided view's strides, in elements.
using Strides = Extents;

}  // namespace kiln
