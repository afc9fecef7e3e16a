// Optimizer update rules as scalar formulas, written once: a backend that fuses an
// optimizer step into one pass (Cpu::adam_step) instantiates them, and kiln/optim
// builds the same step from tensor ops for every other backend.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln::ops {

// Adam (Kingma & Ba), and AdamW when the weight decay is decoupled, as torch.optim does them.
struct AdamStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  std::int64_t step = 1;                // 1 for the first update

  // The per-step constants of the formula below.
  struct Constants {
    double lr, beta1, beta2, eps, weight_decay, param_scale, step_size, inv_sqrt_bias2;
    bool l2;
  };
  Constants constants() const {
    const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    return {lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled_weight_decay ? 1.0 - lr * weight_decay : 1.0,
            lr / bias1,
            1.0 / std::sqrt(bias2),
            !decoupled_weight_decay && weight_decay != 0.0};
  }

  // One element: updates the parameter p and the moments m, v from the gradient g.
  template <class T> static void apply(T& p, T& m, T& v, T g, const Constants& c) {
    if (c.l2) g += static_cast<T>(c.weight_decay) * p;
    p *= static_cast<T>(c.param_scale);
    m = static_cast<T>(c.beta1) * m + static_cast<T>(1.0 - c.beta1) * g;
    v = static_cast<T>(c.beta2) * v + static_cast<T>(1.0 - c.beta2) * g * g;
    const T denom = std::sqrt(v) * static_cast<T>(c.inv_sqrt_bias2) + static_cast<T>(c.eps);
    p -= static_cast<T>(c.step_size) * m / denom;
  }
};

}  // namespace kiln::ops
