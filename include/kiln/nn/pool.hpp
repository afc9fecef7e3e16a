// Pooling layers with torch.nn's meaning: MaxPool1d / 2d / 3d, AvgPool1d / 2d / 3d (the
// stride defaults to the kernel size, as in PyTorch) and AdaptiveAvgPool1d / 2d. Stateless
// modules over kiln::functional's pooling; batched (NCL / NCHW / NCDHW) or unbatched inputs.
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/tensor/pool.hpp"

#include <array>
#include <optional>

namespace kiln::nn {

struct Pool2dOptions {
  std::optional<std::array<std::int64_t, 2>> stride;  // default: the kernel size
  std::array<std::int64_t, 2> padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool2d
};
struct Pool1dOptions {
  std::optional<std::int64_t> stride;  // default: the kernel size
  std::int64_t padding = 0, dilation = 1;
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool1d
};

namespace detail {
inline ops::Pool2dOptions pool_options(std::array<std::int64_t, 2> kernel, const Pool2dOptions& o) {
  return {kernel, o.stride.value_or(kernel), o.padding, o.dilation, o.ceil_mode, o.count_include_pad};
}
inline ops::Pool1dOptions pool_options(std::int64_t kernel, const Pool1dOptions& o) {
  return {kernel, o.stride.value_or(kernel), o.padding, o.dilation, o.ceil_mode, o.count_include_pad};
}
}  // namespace detail

template <class B> struct MaxPool2d {
  ops::Pool2dOptions pool;
  KILN_MODULE(pool)
  MaxPool2d() = default;
  explicit MaxPool2d(std::array<std::int64_t, 2> kernel, const Pool2dOptions& o = {})
      : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::max_pool2d(x, pool); }
};

template <class B> struct AvgPool2d {
  ops::Pool2dOptions pool;
  KILN_MODULE(pool)
  AvgPool2d() = default;
  explicit AvgPool2d(std::array<std::int64_t, 2> kernel, const Pool2dOptions& o = {})
      : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::avg_pool2d(x, pool); }
};

template <class B> struct MaxPool1d {
  ops::Pool1dOptions pool;
  KILN_MODULE(pool)
  MaxPool1d() = default;
  explicit MaxPool1d(std::int64_t kernel, const Pool1dOptions& o = {}) : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::max_pool1d(x, pool); }
};

template <class B> struct AvgPool1d {
  ops::Pool1dOptions pool;
  KILN_MODULE(pool)
  AvgPool1d() = default;
  explicit AvgPool1d(std::int64_t kernel, const Pool1dOptions& o = {}) : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::avg_pool1d(x, pool); }
};

template <class B> struct AdaptiveAvgPool2d {
  std::array<std::int64_t, 2> output_size{1, 1};
  KILN_MODULE(output_size)
  AdaptiveAvgPool2d() = default;
  explicit AdaptiveAvgPool2d(std::array<std::int64_t, 2> size) : output_size(size) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return functional::adaptive_avg_pool2d(x, output_size);
  }
};

template <class B> struct AdaptiveAvgPool1d {
  std::int64_t output_size = 1;
  KILN_MODULE(output_size)
  AdaptiveAvgPool1d() = default;
  explicit AdaptiveAvgPool1d(std::int64_t size) : output_size(size) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return functional::adaptive_avg_pool1d(x, output_size);
  }
};

struct Pool3dOptions {
  std::optional<std::array<std::int64_t, 3>> stride;  // default: the kernel size
  std::array<std::int64_t, 3> padding{0, 0, 0}, dilation{1, 1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool3d
};

namespace detail {
inline ops::Pool3dOptions pool_options(std::array<std::int64_t, 3> kernel, const Pool3dOptions& o) {
  return {kernel, o.stride.value_or(kernel), o.padding, o.dilation, o.ceil_mode, o.count_include_pad};
}
}  // namespace detail

template <class B> struct MaxPool3d {
  ops::Pool3dOptions pool;
  KILN_MODULE(pool)
  MaxPool3d() = default;
  explicit MaxPool3d(std::array<std::int64_t, 3> kernel, const Pool3dOptions& o = {})
      : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::max_pool3d(x, pool); }
};

template <class B> struct AvgPool3d {
  ops::Pool3dOptions pool;
  KILN_MODULE(pool)
  AvgPool3d() = default;
  explicit AvgPool3d(std::array<std::int64_t, 3> kernel, const Pool3dOptions& o = {})
      : pool(detail::pool_options(kernel, o)) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return functional::avg_pool3d(x, pool); }
};

}  // namespace kiln::nn
