// Initializers, with PyTorch's meaning (torch.nn.init): constant, uniform, normal,
// Xavier/Glorot and Kaiming/He with fan modes and nonlinearity gains. The fans of a
// weight [out, in, k...] are in * prod(k) and out * prod(k), as PyTorch computes them.
// Draws come from Kiln's seeded stream (kiln::manual_seed), the same on every backend.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <cmath>
#include <string_view>
#include <utility>

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
  enum class Kind { constant, uniform, normal, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal };
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

  // A tensor of `dims` filled this way.
  template <class B, std::size_t D>
  Tensor<B, D> make(const typename Tensor<B, D>::Dims& dims, const typename B::Device& device = {}) const {
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
    }
    KILN_FAIL("nn::Init: unknown kind");
  }
};

}  // namespace kiln::nn
