// Positional encodings for transformers: SinusoidalPositionalEncoding (the fixed sin / cos
// table of "Attention Is All You Need", added to [N, L, E] inputs) and RotaryEncoding (RoPE,
// which rotates query and key vectors by an angle proportional to their position). Neither
// has parameters or buffers, so neither appears in a state dict: the tables are computed on
// the host in double for the positions a call needs, then converted to the input's dtype,
// which keeps them exact on backends whose sin / cos are single precision.
#pragma once

#include "kiln/nn/module.hpp"

#include <cmath>
#include <vector>

namespace kiln::nn {

namespace detail {
// A [rows, cols] tensor of f(row, col), computed in double and stored as `dtype`.
template <class B, class F>
Tensor<B, 2> host_table(std::int64_t rows, std::int64_t cols, DType dtype, const typename B::Device& device, F&& f) {
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) values[static_cast<std::size_t>(r * cols + c)] = f(r, c);
  return Tensor<B, 2>::from_data(TensorData::from(values, Shape{rows, cols}).convert(dtype), device);
}
}  // namespace detail

// x [N, L, E] → x + PE[offset : offset + L], with
//   PE[p, 2i] = sin(p / base^(2i / E)),  PE[p, 2i + 1] = cos(p / base^(2i / E))
// (base 10000 in the paper; an odd E ends with a sine column). `offset` is the position of
// x's first element, for incremental decoding. Positions past max_len are an error, as
// with the precomputed table of PyTorch's tutorial (whose dropout is left to the caller).
template <class B> struct SinusoidalPositionalEncoding {
  std::int64_t d_model = 0;
  std::int64_t max_len = 5000;
  double base = 10000.0;
  KILN_MODULE(d_model, max_len, base)

  SinusoidalPositionalEncoding() = default;
  explicit SinusoidalPositionalEncoding(std::int64_t d_model_, std::int64_t max_len_ = 5000, double base_ = 10000.0)
      : d_model(d_model_), max_len(max_len_), base(base_) {
    KILN_CHECK(d_model > 0 && max_len > 0 && base > 0,
               "nn::SinusoidalPositionalEncoding: d_model {}, max_len {} and base {} must be positive", d_model,
               max_len, base);
  }

  // The rows [offset, offset + length) of the table, [length, d_model].
  Tensor<B, 2> table(std::int64_t length, std::int64_t offset = 0, DType dtype = DType::f32,
                     const typename B::Device& device = {}) const {
    KILN_CHECK(length >= 0 && offset >= 0 && offset + length <= max_len,
               "nn::SinusoidalPositionalEncoding: positions [{}, {}) are outside the table of max_len {}", offset,
               offset + length, max_len);
    const double d = static_cast<double>(d_model);
    return detail::host_table<B>(length, d_model, dtype, device, [&](std::int64_t row, std::int64_t col) {
      const double angle = static_cast<double>(offset + row) * std::pow(base, -static_cast<double>(col - col % 2) / d);
      return col % 2 == 0 ? std::sin(angle) : std::cos(angle);
    });
  }

  Tensor<B, 3> forward(const Tensor<B, 3>& x, std::int64_t offset = 0) const {
    KILN_CHECK(x.dim(2) == d_model, "nn::SinusoidalPositionalEncoding: input {} must be [N, L, {}]", x.shape(),
               d_model);
    return x + table(x.dim(1), offset, x.dtype(), x.device()).template unsqueeze<3>();
  }
};

// Rotary position embedding (RoPE, Su et al. 2021) of query or key vectors x [..., L, head_dim]
// (typically [N, heads, L, head_dim]), the element at sequence index l having position
// p = offset + l. Pairing convention: rotate-half, as GPT-NeoX and Hugging Face's Llama:
// feature i is paired with feature i + head_dim / 2 (not with its neighbour 2i + 1 as in
// the RoFormer paper and Meta's original Llama code), and the pair is rotated by
// p * base^(-2i / head_dim):
//   y[i]         = x[i] cos - x[i + h/2] sin
//   y[i + h/2]   = x[i + h/2] cos + x[i] sin
// Weights trained with the interleaved convention work once the rows of their q and k
// projections are permuted (what Hugging Face's Llama conversion script does). Apply it
// to q and k, not v, with the same offset: then q_m . k_n depends only on m - n.
template <class B> struct RotaryEncoding {
  std::int64_t head_dim = 0;
  double base = 10000.0;  // theta
  KILN_MODULE(head_dim, base)

  RotaryEncoding() = default;
  explicit RotaryEncoding(std::int64_t head_dim_, double base_ = 10000.0) : head_dim(head_dim_), base(base_) {
    KILN_CHECK(head_dim > 0 && head_dim % 2 == 0 && base > 0,
               "nn::RotaryEncoding: head_dim {} must be positive and even, base {} positive", head_dim, base);
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x, std::int64_t offset = 0) const {
    static_assert(D >= 2, "nn::RotaryEncoding: the input is [..., L, head_dim]");
    KILN_CHECK(x.dim(-1) == head_dim && offset >= 0,
               "nn::RotaryEncoding: input {} must be [..., L, {}], offset {} not negative", x.shape(), head_dim, offset);
    const std::int64_t length = x.dim(-2), half = head_dim / 2;
    // angle(l, c): column c and c + half share the frequency of pair c mod half.
    auto angle = [&](std::int64_t row, std::int64_t col) {
      return static_cast<double>(offset + row) *
             std::pow(base, -2.0 * static_cast<double>(col % half) / static_cast<double>(head_dim));
    };
    auto cos = detail::host_table<B>(length, head_dim, x.dtype(), x.device(),
                                     [&](std::int64_t r, std::int64_t c) { return std::cos(angle(r, c)); });
    auto sin = detail::host_table<B>(length, head_dim, x.dtype(), x.device(),
                                     [&](std::int64_t r, std::int64_t c) { return std::sin(angle(r, c)); });
    constexpr std::int64_t last = static_cast<std::int64_t>(D) - 1;
    const Tensor<B, D> rotated = Tensor<B, D>::cat({x.narrow(last, half, half).neg(), x.narrow(last, 0, half)}, last);
    return x * cos.template unsqueeze<D>() + rotated * sin.template unsqueeze<D>();
  }
};

}  // namespace kiln::nn
