// Printing tensors the way PyTorch does: the same number formats (integral floats as
// "1.", fixed with 4 decimals, or scientific when magnitudes span more than 1e3), aligned
// columns, rows wrapped at 80 characters, tensors above 1000 elements summarized with
// "..." (3 items at each end of every dim), then shape, dtype and device. Bools print as
// true/false. `fmt::format("{}", t)`, `fmt::print` and `std::cout << t` all work.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

namespace detail {

struct PrintOptions {
  std::int64_t threshold = 1000;  // summarize above this many elements
  std::int64_t edge_items = 3;
  int precision = 4;
  std::size_t line_width = 80;
};

// Picks one number format for all shown elements, as PyTorch's formatter does: only the
// non-zero finite values decide between integral ("3."), fixed ("3.1416") and scientific
// ("3.1416e+00"); every element is right-aligned to the widest one.
class ElementFormat {
 public:
  ElementFormat(const std::vector<double>& shown, DType dtype, const PrintOptions& options)
      : floating_(is_float(dtype)), boolean_(is_bool(dtype)), precision_(options.precision) {
    if (!floating_) {
      for (double v : shown) width_ = std::max(width_, plain(v).size());
      return;
    }
    double min = INFINITY, max = 0.0;
    bool any = false;
    for (double v : shown) {
      if (!std::isfinite(v) || v == 0.0) continue;
      any = true;
      min = std::min(min, std::abs(v));
      max = std::max(max, std::abs(v));
      if (v != std::ceil(v)) integral_ = false;
    }
    if (!any) return;
    scientific_ = max / min > 1000.0 || max > 1e8 || (!integral_ && min < 1e-4);
    for (double v : shown) {
      if (!std::isfinite(v) || v == 0.0) continue;
      if (scientific_) width_ = std::max(width_, fmt::format("{:.{}e}", v, precision_).size());
      else if (integral_) width_ = std::max(width_, fmt::format("{:.0f}", v).size() + 1);  // + "."
      else width_ = std::max(width_, fmt::format("{:.{}f}", v, precision_).size());
    }
  }

  std::size_t width() const { return width_; }

  // The element, right-aligned to width().
  std::string operator()(double v) const {
    std::string s = floating_ ? number(v) : plain(v);
    if (s.size() < width_) s.insert(0, width_ - s.size(), ' ');
    return s;
  }

 private:
  std::string plain(double v) const {
    if (boolean_) return v != 0.0 ? "true" : "false";
    return fmt::format("{}", static_cast<std::int64_t>(v));
  }
  std::string number(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (scientific_) return fmt::format("{:.{}e}", v, precision_);
    if (integral_) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.{}f}", v, precision_);
  }

  bool floating_, boolean_;
  int precision_;
  bool integral_ = true, scientific_ = false;
  std::size_t width_ = 1;
};

class TensorPrinter {
 public:
  TensorPrinter(const TensorData& data, const PrintOptions& options)
      : shape_(data.shape()),
        dtype_(data.dtype()),
        strides_(shape_.contiguous_strides()),
        values_(data.to_vec<double>()),
        options_(options),
        summarize_(data.numel() > options.threshold) {}

  // The bracketed elements; `indent` is the column where the first '[' stands.
  std::string render(std::size_t indent) const {
    if (values_.empty()) return "[]";
    std::vector<double> shown;
    collect(0, 0, shown);
    const ElementFormat format(shown, dtype_, options_);
    if (shape_.rank() == 0) return format(values_[0]);
    std::string out;
    render_dim(0, 0, indent, format, out);
    return out;
  }

 private:
  // The indices of a dim that are shown; -1 marks the "..." gap.
  std::vector<std::int64_t> shown_indices(std::int64_t size) const {
    std::vector<std::int64_t> idx;
    const std::int64_t edge = options_.edge_items;
    if (summarize_ && size > 2 * edge) {
      for (std::int64_t i = 0; i < edge; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (std::int64_t i = size - edge; i < size; ++i) idx.push_back(i);
    } else {
      for (std::int64_t i = 0; i < size; ++i) idx.push_back(i);
    }
    return idx;
  }

  void collect(std::size_t d, std::int64_t base, std::vector<double>& shown) const {
    if (d == shape_.rank()) {
      shown.push_back(values_[static_cast<std::size_t>(base)]);
      return;
    }
    for (auto i : shown_indices(shape_[d]))
      if (i >= 0) collect(d + 1, base + i * strides_[d], shown);
  }

  void render_dim(std::size_t d, std::int64_t base, std::size_t indent, const ElementFormat& format,
                  std::string& out) const {
    const auto idx = shown_indices(shape_[d]);
    out += '[';
    if (d + 1 == shape_.rank()) {
      // A row: ", "-separated, wrapped so that no line passes the line width.
      const std::size_t per_line =
          std::max<std::size_t>(1, (options_.line_width - std::min(indent, options_.line_width)) / (format.width() + 2));
      for (std::size_t k = 0; k < idx.size(); ++k) {
        if (k > 0) {
          out += ',';
          if (k % per_line == 0) out += '\n' + std::string(indent + 1, ' ');
          else out += ' ';
        }
        out += idx[k] < 0 ? " ..." : format(values_[static_cast<std::size_t>(base + idx[k] * strides_[d])]);
      }
    } else {
      // Sub-tensors: one per line, separated by rank - d - 1 newlines.
      for (std::size_t k = 0; k < idx.size(); ++k) {
        if (k > 0) out += ',' + std::string(shape_.rank() - d - 1, '\n') + std::string(indent + 1, ' ');
        if (idx[k] < 0) out += "...";
        else render_dim(d + 1, base + idx[k] * strides_[d], indent + 1, format, out);
      }
    }
    out += ']';
  }

  Shape shape_;
  DType dtype_;
  Strides strides_;
  std::vector<double> values_;
  PrintOptions options_;
  bool summarize_;
};

inline std::string format_tensor_data(const TensorData& data, const std::string& device,
                                      const PrintOptions& options = {}) {
  const std::string prefix = "tensor(";
  return fmt::format("{}{}, shape={}, dtype={}, device={})", prefix,
                     TensorPrinter(data, options).render(prefix.size()), data.shape(),
                     data.dtype(), device);
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
