// Initializers, with PyTorch's meaning (torch.nn.init): constant, uniform, normal,
// Xavier/Glorot and Kaiming/He with fan modes and nonlinearity gains. The fans of a
// weight [out, in, k...] are in * prod(k) and out * prod(k), as PyTorch computes them.
// Draws come from Kiln's seeded stream (kiln::manual_seed), the same on every backend.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::nn {

enum class FanMode { fan_in, fan_out };

// torch.nn.init.calculate_gain: "linear", "conv*", "sigmoid" → 1; "tanh" → 5/3;
// "relu" → sqrt(2); "leaky_relu" → sqrt(2 / (1 + slope^2)); "selu" → 3/4.
inline double gain(std::string_view nonlinearity, double negative_slope = 0.01) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity.starts_with("conv")) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + negative_slope * negative_slope));
  if (nonlinearity == "selu") return 0.75;
  KILN_FAIL("nn::gain: unknown nonlinearity \"{}\"", nonlinearity);
}

// (fan_in, fan_out) of a weight shape: [out, in, receptive...]; a 1-d shape has both = size.
inline std::pair<double, double> fans(const Shape& shape) {
  KILN_CHECK(shape.rank() >= 1, "nn::fans: a weight needs at least one dim, got {}", shape);
  if (shape.rank() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  double receptive = 1;
  for (std::size_t d = 2; d < shape.rank(); ++d) receptive *= static_cast<double>(shape[d]);
  return {static_cast<double>(shape[1]) * receptive, static_cast<double>(shape[0]) * receptive};
}

// How to fill a fresh parameter. Make one with the factories below.
struct Init {
  enum class Kind { constant, uniform, normal, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, orthogonal };
  Kind kind = Kind::constant;
  double a = 0, b = 0;  // constant: value; uniform: low, high; normal: mean, std; xavier: gain;
                        // kaiming: negative slope (leaky_relu's a)
  FanMode mode = FanMode::fan_in;
  std::string_view nonlinearity = "leaky_relu";

  static Init constant(double value) { return {Kind::constant, value}; }
  static Init zeros() { return constant(0); }
  static Init ones() { return constant(1); }
  static Init uniform(double low, double high) { return {Kind::uniform, low, high}; }
  static Init normal(double mean, double std) { return {Kind::normal, mean, std}; }
  static Init xavier_uniform(double gain = 1.0) { return {Kind::xavier_uniform, gain}; }
  static Init xavier_normal(double gain = 1.0) { return {Kind::xavier_normal, gain}; }
  static Init kaiming_uniform(double a = 0, FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu") {
    return {Kind::kaiming_uniform, a, 0, mode, nonlinearity};
  }
  static Init kaiming_normal(double a = 0, FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu") {
    return {Kind::kaiming_normal, a, 0, mode, nonlinearity};
  }
  // A (semi-)orthogonal matrix of shape [dims[0], prod(dims[1:])] times gain, as
  // torch.nn.init.orthogonal_: the Q of a QR decomposition of a normal matrix, its columns'
  // signs set by R's diagonal.
  static Init orthogonal(double gain = 1.0) { return {Kind::orthogonal, gain}; }

  // A tensor of `dims` filled this way. Defined out of line, below, so that it can be compiled
  // once per backend (kiln/nn/instances.hpp).
  template <class B, std::size_t D>
  Tensor<B, D> make(const typename Tensor<B, D>::Dims& dims, const typename B::Device& device = {}) const;

 private:
  template <class B, std::size_t D>
  Tensor<B, D> orthogonal_matrix(const typename Tensor<B, D>::Dims& dims, const Shape& shape,
                                 const typename B::Device& device) const {
    KILN_CHECK(D >= 2, "nn::Init::orthogonal: needs a weight of at least 2 dims, got {}", shape);
    const std::int64_t rows = shape[0], cols = shape.numel() / std::max<std::int64_t>(rows, 1);
    // QR of the tall one of A and A^T (m >= n) by modified Gram-Schmidt, in double on the host.
    const std::int64_t m = std::max(rows, cols), n = std::min(rows, cols);
    std::vector<double> q = Tensor<B, 2>::random({m, n}, Distribution::normal(0, 1), device, DType::f64).template to_vec<double>();
    auto at = [&](std::int64_t i, std::int64_t j) -> double& { return q[static_cast<std::size_t>(i * n + j)]; };
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::int64_t i = 0; i < m; ++i) dot += at(i, k) * at(i, j);
        for (std::int64_t i = 0; i < m; ++i) at(i, j) -= dot * at(i, k);
      }
      double norm = 0;
      for (std::int64_t i = 0; i < m; ++i) norm += at(i, j) * at(i, j);
      norm = std::sqrt(norm);
      KILN_CHECK(norm > 0, "nn::Init::orthogonal: a degenerate draw");
      // R's diagonal is the norm (positive), so Q's columns keep their signs.
      for (std::int64_t i = 0; i < m; ++i) at(i, j) /= norm;
    }
    const double g = a;  // the gain
    std::vector<double> w(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        w[static_cast<std::size_t>(r * cols + c)] = (rows >= cols ? at(r, c) : at(c, r)) * g;
    return Tensor<B, D>::from_data(TensorData::from(w, shape).convert(DType::f32), device);
  }
};

template <class B, std::size_t D>
Tensor<B, D> Init::make(const typename Tensor<B, D>::Dims& dims, const typename B::Device& device) const {
  using T = Tensor<B, D>;
  const Shape shape(std::vector<std::int64_t>(dims.begin(), dims.end()));
  const auto [fan_in, fan_out] = fans(shape);
  switch (kind) {
    case Kind::constant: return T::full(dims, a, device);
    case Kind::uniform: return T::random(dims, Distribution::uniform(a, b), device);
    case Kind::normal: return T::random(dims, Distribution::normal(a, b), device);
    case Kind::xavier_uniform: {
      const double bound = a * std::sqrt(6.0 / (fan_in + fan_out));
      return T::random(dims, Distribution::uniform(-bound, bound), device);
    }
    case Kind::xavier_normal: return T::random(dims, Distribution::normal(0, a * std::sqrt(2.0 / (fan_in + fan_out))), device);
    case Kind::kaiming_uniform:
    case Kind::kaiming_normal: {
      const double std = gain(nonlinearity, a) / std::sqrt(mode == FanMode::fan_in ? fan_in : fan_out);
      if (kind == Kind::kaiming_normal) return T::random(dims, Distribution::normal(0, std), device);
      return T::random(dims, Distribution::uniform(-std::sqrt(3.0) * std, std::sqrt(3.0) * std), device);
    }
    case Kind::orthogonal: return orthogonal_matrix<B, D>(dims, shape, device);
  }
  KILN_FAIL("nn::Init: unknown kind");
}

}  // namespace kiln::nn
