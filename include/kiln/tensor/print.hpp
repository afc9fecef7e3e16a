// Printing tensors the way PyTorch does: nested brackets, aligned columns, large
// tensors summarized with "..." (3 items at each end of a dim), then shape, dtype and
// device. `fmt::format("{}", t)`, `fmt::print` and `std::cout << t` all work.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

namespace detail {

struct PrintOptions {
  std::int64_t threshold = 1000;  // summarize above this many elements
  std::int64_t edge_items = 3;
  int precision = 4;
};

inline std::string format_tensor_data(const TensorData& data, const std::string& device,
                                      const PrintOptions& options = {}) {
  const Shape& shape = data.shape();
  const std::vector<double> values = data.to_vec<double>();
  const bool summarize = data.numel() > options.threshold;
  const bool floating = is_float(data.dtype());
  const bool boolean = is_bool(data.dtype());
  auto element = [&](double v) -> std::string {
    if (boolean) return v != 0.0 ? "true" : "false";
    if (!floating) return fmt::format("{}", static_cast<std::int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{:.{}f}", v, options.precision);
  };
  // Which indices of a dim are shown (-1 marks the "..." gap).
  auto shown = [&](std::int64_t size) {
    std::vector<std::int64_t> idx;
    if (summarize && size > 2 * options.edge_items) {
      for (std::int64_t i = 0; i < options.edge_items; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (std::int64_t i = size - options.edge_items; i < size; ++i) idx.push_back(i);
    } else {
      for (std::int64_t i = 0; i < size; ++i) idx.push_back(i);
    }
    return idx;
  };
  // Column width: the widest element shown.
  std::size_t width = 1;
  const auto strides = shape.contiguous_strides();
  std::vector<std::string> cache(values.size());
  std::function<void(std::size_t, std::int64_t)> measure = [&](std::size_t d, std::int64_t base) {
    if (d == shape.rank()) {
      cache[static_cast<std::size_t>(base)] = element(values[static_cast<std::size_t>(base)]);
      width = std::max(width, cache[static_cast<std::size_t>(base)].size());
      return;
    }
    for (auto i : shown(shape[d]))
      if (i >= 0) measure(d + 1, base + i * strides[d]);
  };
  if (data.numel() > 0) measure(0, 0);

  const std::string prefix = "tensor(";
  std::string out = prefix;
  std::function<void(std::size_t, std::int64_t, std::size_t)> render = [&](std::size_t d, std::int64_t base,
                                                                            std::size_t indent) {
    out += '[';
    const auto idx = shown(shape[d]);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        out += ',';
        if (d + 1 == shape.rank()) {
          out += ' ';
        } else {
          out += std::string(shape.rank() - d - 1, '\n');
          out += std::string(indent + 1, ' ');
        }
      }
      if (idx[k] < 0) {
        out += "...";
        continue;
      }
      const std::int64_t at = base + idx[k] * strides[d];
      if (d + 1 == shape.rank()) {
        const std::string& s = cache[static_cast<std::size_t>(at)];
        out += std::string(width - s.size(), ' ') + s;
      } else {
        render(d + 1, at, indent + 1);
      }
    }
    out += ']';
  };
  if (shape.rank() == 0) out += element(values.empty() ? 0.0 : values[0]);
  else render(0, 0, prefix.size());
  out += fmt::format(", shape={}, dtype={}, device={})", shape, data.dtype(), device);
  return out;
}

template <class Device> std::string device_name(const Device& device) {
  if constexpr (requires { device.str(); }) return device.str();
  else return "?";
}

}  // namespace detail

template <class B, std::size_t D, class K> std::string to_string(const Tensor<B, D, K>& t) {
  return detail::format_tensor_data(t.into_data(), detail::device_name(t.device()));
}

template <class B, std::size_t D, class K> std::ostream& operator<<(std::ostream& os, const Tensor<B, D, K>& t) {
  return os << to_string(t);
}

}  // namespace kiln

template <class B, std::size_t D, class K> struct fmt::formatter<kiln::Tensor<B, D, K>> : fmt::formatter<std::string_view> {
  auto format(const kiln::Tensor<B, D, K>& t, fmt::format_context& ctx) const {
    const std::string s = kiln::to_string(t);
    return fmt::formatter<std::string_view>::format(s, ctx);
  }
};
