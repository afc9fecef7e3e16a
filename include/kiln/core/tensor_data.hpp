// TensorData: a tensor's elements on the host (row-major bytes + shape + dtype),
// the currency of host transfer, fixtures and serialization.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

namespace kiln {

class TensorData {
 public:
  TensorData() = default;
  TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype)
      : bytes_(std::move(bytes)), shape_(std::move(shape)), dtype_(dtype) {
    KILN_CHECK(bytes_.size() == static_cast<std::size_t>(shape_.numel()) * dtype_size(dtype_),
               "TensorData: {} bytes do not hold a {} tensor of shape {} ({} bytes expected)", bytes_.size(), dtype_,
               shape_, shape_.numel() * static_cast<std::int64_t>(dtype_size(dtype_)));
  }

  template <class T> static TensorData from(std::span<const T> values, Shape shape) {
    KILN_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(),
               "TensorData::from: {} values do not fill shape {} ({} elements)", values.size(), shape, shape.numel());
    std::vector<std::byte> bytes(values.size_bytes());
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), values.size_bytes());
    return TensorData(std::move(bytes), std::move(shape), dtype_of<T>);
  }
  template <class T> static TensorData from(const std::vector<T>& values, Shape shape) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<std::uint8_t> raw(values.begin(), values.end());
      TensorData data = from<std::uint8_t>(std::span<const std::uint8_t>(raw), std::move(shape));
      data.dtype_ = DType::boolean;
      return data;
    } else {
      return from<T>(std::span<const T>(values), std::move(shape));
    }
  }

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return shape_.numel(); }
  std::span<const std::byte> bytes() const { return bytes_; }
  std::span<std::byte> bytes() { return bytes_; }

  // The elements as their storage type; T must match the dtype exactly.
  template <class T> std::span<const T> as() const {
    KILN_CHECK(dtype_of<T> == dtype_, "TensorData::as: data is {}, not {}", dtype_, dtype_of<T>);
    return {reinterpret_cast<const T*>(bytes_.data()), static_cast<std::size_t>(numel())};
  }
  template <class T> std::span<T> as_mut() {
    KILN_CHECK(dtype_of<T> == dtype_, "TensorData::as_mut: data is {}, not {}", dtype_, dtype_of<T>);
    return {reinterpret_cast<T*>(bytes_.data()), static_cast<std::size_t>(numel())};
  }

  // The elements converted to T, whatever the dtype.
  template <class T> std::vector<T> to_vec() const {
    std::vector<T> out(static_cast<std::size_t>(numel()));
    visit_dtype(dtype_, [&]<class S>() {
      const S* src = reinterpret_cast<const S*>(bytes_.data());
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = from_double<T>(to_double(src[i]));
    });
    return out;
  }

  // A copy with every element converted to `dtype` (floats to ints truncate toward zero).
  TensorData convert(DType dtype) const {
    if (dtype == dtype_) return *this;
    std::vector<std::byte> bytes(static_cast<std::size_t>(numel()) * dtype_size(dtype));
    visit_dtype(dtype_, [&]<class S>() {
      visit_dtype(dtype, [&]<class D>() {
        const S* src = reinterpret_cast<const S*>(bytes_.data());
        D* dst = reinterpret_cast<D*>(bytes.data());
        for (std::int64_t i = 0; i < numel(); ++i) dst[i] = from_double<D>(to_double(src[i]));
      });
    });
    return TensorData(std::move(bytes), shape_, dtype);
  }

  TensorData reshaped(Shape shape) const {
    KILN_CHECK(shape.numel() == numel(), "TensorData::reshaped: cannot view {} elements as {}", numel(), shape);
    return TensorData(bytes_, std::move(shape), dtype_);
  }

 private:
  std::vector<std::byte> bytes_;
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace kiln
