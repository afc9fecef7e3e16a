// Pooling layers with torch.nn's meaning: MaxPool1d / 2d / 3d, AvgPool1d / 2d / 3d (the
// stride defaults to the kernel size, as in PyTorch), AdaptiveAvgPool1d / 2d and
// AdaptiveMaxPool1d / 2d. Stateless modules over kiln::functional's pooling; batched (NCL /
// NCHW / NCDHW) or unbatched inputs.
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/tensor/pool.hpp"

#include <array>
#include <optional>
#include <vector>

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

namespace detail {
// The max over adaptive bins of the last `spatial` dims: output cell i of a dim of size n takes
// [floor(i n / out), ceil((i + 1) n / out)), as torch's adaptive pooling.
template <class B, std::size_t D>
Tensor<B, D> adaptive_max_pool(const Tensor<B, D>& x, std::int64_t dim, const std::int64_t* sizes, std::size_t spatial,
                               const char* name) {
  if (spatial == 0) return x;
  const std::int64_t n = x.dim(dim), out = sizes[0];
  KILN_CHECK(out > 0 && n > 0, "{}: output size {} for an input of shape {} (dim {} of size {})", name, out, x.shape(), dim,
             n);
  std::vector<Tensor<B, D>> cells;
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * n / out, end = ((i + 1) * n + out - 1) / out;
    cells.push_back(adaptive_max_pool(x.narrow(dim, start, end - start), dim + 1, sizes + 1, spatial - 1, name).max_dim(dim));
  }
  return Tensor<B, D>::cat(cells, dim);
}
}  // namespace detail

// The max over adaptive bins (torch.nn.AdaptiveMaxPool2d; return_indices is not offered).
template <class B> struct AdaptiveMaxPool2d {
  std::array<std::int64_t, 2> output_size{1, 1};
  KILN_MODULE(output_size)
  AdaptiveMaxPool2d() = default;
  explicit AdaptiveMaxPool2d(std::array<std::int64_t, 2> size) : output_size(size) {}
  // [N, C, H, W] or [C, H, W] → [..., h, w].
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D == 3 || D == 4, "nn::AdaptiveMaxPool2d: the input is [N, C, H, W] or [C, H, W]");
    return detail::adaptive_max_pool(x, D - 2, output_size.data(), 2, "nn::AdaptiveMaxPool2d");
  }
};

template <class B> struct AdaptiveMaxPool1d {
  std::int64_t output_size = 1;
  KILN_MODULE(output_size)
  AdaptiveMaxPool1d() = default;
  explicit AdaptiveMaxPool1d(std::int64_t size) : output_size(size) {}
  // [N, C, L] or [C, L] → [..., output_size].
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D == 2 || D == 3, "nn::AdaptiveMaxPool1d: the input is [N, C, L] or [C, L]");
    return detail::adaptive_max_pool(x, D - 1, &output_size, 1, "nn::AdaptiveMaxPool1d");
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
