// The update rules of Kiln's optimizers, each with torch.optim's meaning and defaults
// (Lion, Adan and Muon: their papers' reference formulations). A rule has Options, a
// per-parameter State, the update of one flattened parameter, and `each`, which names its
// state tensors for saving. `update` takes the parameter as `const Vec<B>&`, or as `Vec<B>&&`
// where it may write the new value over the parameter's buffer (Adam's fused step); either
// way the parameter is left whole if the update throws, and Optimizer puts it back. Every
// rule's Options has `maximize` (torch's: ascend the objective), applied by Optimizer before
// the rule sees the gradient. Use them through
// Optimizer (optim/optimizer.hpp): optim::Sgd<B>, optim::Adam<B>, optim::NAdam<B>...
#pragma once

#include "kiln/optim/adam.hpp"
#include "kiln/optim/optimizer.hpp"

#include <optional>

namespace kiln::optim {

template <Backend B> using Vec = Tensor<B, 1>;

// The exponential moving average a rule keeps: state = beta state + (1 - beta) value, from
// zeros before the first step. Returns the new state.
template <Backend B> const Vec<B>& moving_average(std::optional<Vec<B>>& state, const Vec<B>& value, double beta) {
  state = state ? *state * beta + value * (1 - beta) : value * (1 - beta);
  return *state;
}

// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD).
struct SgdRule {
  static constexpr std::string_view name = "sgd";
  struct Options {
    double momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false, maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> momentum_buffer;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) { f("momentum_buffer", s.momentum_buffer); }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
               "sgd: Nesterov momentum needs a momentum > 0 and no dampening (momentum {}, dampening {})", o.momentum,
               o.dampening);
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    if (o.momentum != 0) {
      s.momentum_buffer = s.momentum_buffer ? *s.momentum_buffer * o.momentum + g * (1 - o.dampening) : g;
      g = o.nesterov ? g + *s.momentum_buffer * o.momentum : *s.momentum_buffer;
    }
    return p - g * lr;
  }
};

// Adam, and AdamW with `decoupled_weight_decay` (torch.optim.Adam / AdamW); one fused pass
// where the backend has one (optim::adam_step). `amsgrad` divides by the largest second
// moment seen so far instead of the current one (Reddi et al. 2018; torch's amsgrad).
struct AdamRule {
  static constexpr std::string_view name = "adam";
  struct Options {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool decoupled_weight_decay = false, amsgrad = false, maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_avg_sq, max_exp_avg_sq;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_avg_sq", s.exp_avg_sq);
    f("max_exp_avg_sq", s.max_exp_avg_sq);
  }

  Options options;
  // The parameter and the moments are given up to the fused step, which writes over them.
  template <Backend B> Vec<B> update(double lr, Vec<B>&& p, const Vec<B>& g, State<B>& s) const {
    const Options& o = options;
    if (!s.exp_avg) s.exp_avg = p.zeros_like();
    if (!s.exp_avg_sq) s.exp_avg_sq = p.zeros_like();
    const ops::AdamStep step{lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.decoupled_weight_decay, s.step};
    if (!o.amsgrad) {
      auto r = adam_step(std::move(p), g, std::move(*s.exp_avg), std::move(*s.exp_avg_sq), step);
      s.exp_avg = std::move(r.m);
      s.exp_avg_sq = std::move(r.v);
      return std::move(r.param);
    }
    const auto c = step.constants();
    const Vec<B> grad = c.l2 ? g + p * c.weight_decay : g;
    s.exp_avg = *s.exp_avg * c.beta1 + grad * (1 - c.beta1);
    s.exp_avg_sq = *s.exp_avg_sq * c.beta2 + grad * grad * (1 - c.beta2);
    s.max_exp_avg_sq = s.max_exp_avg_sq ? s.max_exp_avg_sq->maximum(*s.exp_avg_sq) : *s.exp_avg_sq;
    const Vec<B> denom = s.max_exp_avg_sq->sqrt() * c.inv_sqrt_bias2 + c.eps;
    return (c.param_scale == 1.0 ? p : p * c.param_scale) - *s.exp_avg * c.step_size / denom;
  }
};

// RMSProp with momentum and the centered variant (torch.optim.RMSprop).
struct RmsPropRule {
  static constexpr std::string_view name = "rmsprop";
  struct Options {
    double alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
    bool centered = false, maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> square_avg, grad_avg, momentum_buffer;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("square_avg", s.square_avg);
    f("grad_avg", s.grad_avg);
    f("momentum_buffer", s.momentum_buffer);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    moving_average(s.square_avg, g * g, o.alpha);
    Vec<B> avg = *s.square_avg;
    if (o.centered) {
      moving_average(s.grad_avg, g, o.alpha);
      avg = avg - *s.grad_avg * *s.grad_avg;
    }
    avg = avg.sqrt() + o.eps;
    if (o.momentum > 0) {
      s.momentum_buffer = (s.momentum_buffer ? *s.momentum_buffer : p.zeros_like()) * o.momentum + g / avg;
      return p - *s.momentum_buffer * lr;
    }
    return p - g / avg * lr;
  }
};

// AdaGrad with learning-rate decay (torch.optim.Adagrad).
struct AdaGradRule {
  static constexpr std::string_view name = "adagrad";
  struct Options {
    double lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> sum;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) { f("sum", s.sum); }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    const double clr = lr / (1 + static_cast<double>(s.step - 1) * o.lr_decay);
    s.sum = (s.sum ? *s.sum : p.full_like(o.initial_accumulator_value)) + g * g;
    return p - g / (s.sum->sqrt() + o.eps) * clr;
  }
};

// Lion (Chen et al. 2023): the sign of an interpolated momentum, decoupled weight decay.
struct LionRule {
  static constexpr std::string_view name = "lion";
  struct Options {
    double beta1 = 0.9, beta2 = 0.99, weight_decay = 0;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) { f("exp_avg", s.exp_avg); }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, const Vec<B>& g, State<B>& s) const {
    const Options& o = options;
    const Vec<B> m = s.exp_avg ? *s.exp_avg : p.zeros_like();
    const Vec<B> direction = (m * o.beta1 + g * (1 - o.beta1)).sign();
    s.exp_avg = m * o.beta2 + g * (1 - o.beta2);
    const Vec<B> decayed = o.weight_decay != 0 ? p * (1 - lr * o.weight_decay) : p;
    return decayed - direction * lr;
  }
};

// NAdam: Adam with Nesterov momentum and a momentum schedule (torch.optim.NAdam, as torch 2
// computes it), L2 or `decoupled_weight_decay` (torch 2's NAdamW).
struct NAdamRule {
  static constexpr std::string_view name = "nadam";
  struct Options {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3;
    bool decoupled_weight_decay = false, maximize = false;
  };
  // mu_product, the product of the momentum schedule over the steps so far, follows from the
  // step count; it is kept here, not saved, and recomputed after a restore.
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_avg_sq;
    double mu_product = 1;
    std::int64_t mu_product_steps = 0;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_avg_sq", s.exp_avg_sq);
  }

  Options options;
  double mu(std::int64_t step) const {
    return options.beta1 * (1 - 0.5 * std::pow(0.96, static_cast<double>(step) * options.momentum_decay));
  }
  template <Backend B> Vec<B> update(double lr, const Vec<B>& param, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    Vec<B> p = param;
    if (o.weight_decay != 0) {
      if (o.decoupled_weight_decay) p = p * (1 - lr * o.weight_decay);
      else g = g + p * o.weight_decay;
    }
    while (s.mu_product_steps < s.step) s.mu_product *= mu(++s.mu_product_steps);
    const double mu_now = mu(s.step), mu_next = mu(s.step + 1);
    const double bias2 = 1 - std::pow(o.beta2, static_cast<double>(s.step));
    moving_average(s.exp_avg, g, o.beta1);
    moving_average(s.exp_avg_sq, g * g, o.beta2);
    const Vec<B> denom = (*s.exp_avg_sq / bias2).sqrt() + o.eps;
    return p - g / denom * (lr * (1 - mu_now) / (1 - s.mu_product)) -
           *s.exp_avg / denom * (lr * mu_next / (1 - s.mu_product * mu_next));
  }
};

// RAdam: Adam whose adaptive step is rectified by the variance of its second moment,
// plain momentum while that variance is undefined (torch.optim.RAdam), L2 or
// `decoupled_weight_decay` (torch 2's).
struct RAdamRule {
  static constexpr std::string_view name = "radam";
  struct Options {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool decoupled_weight_decay = false, maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_avg_sq;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_avg_sq", s.exp_avg_sq);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& param, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    Vec<B> p = param;
    if (o.weight_decay != 0) {
      if (o.decoupled_weight_decay) p = p * (1 - lr * o.weight_decay);
      else g = g + p * o.weight_decay;
    }
    const double t = static_cast<double>(s.step);
    const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
    moving_average(s.exp_avg, g, o.beta1);
    moving_average(s.exp_avg_sq, g * g, o.beta2);
    const double rho_inf = 2 / (1 - o.beta2) - 1;
    const double rho = rho_inf - 2 * t * std::pow(o.beta2, t) / bias2;
    if (rho <= 5) return p - *s.exp_avg * (lr / bias1);
    const double rect =
        std::sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho));
    return p - *s.exp_avg / (s.exp_avg_sq->sqrt() + o.eps) * (lr * rect * std::sqrt(bias2) / bias1);
  }
};

// Adamax: Adam with the infinity norm in place of the second moment (torch.optim.Adamax).
struct AdamaxRule {
  static constexpr std::string_view name = "adamax";
  struct Options {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_inf;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_inf", s.exp_inf);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    moving_average(s.exp_avg, g, o.beta1);
    s.exp_inf = (s.exp_inf ? *s.exp_inf : p.zeros_like()).mul(o.beta2).maximum(g.abs() + o.eps);
    return p - *s.exp_avg / *s.exp_inf * (lr / (1 - std::pow(o.beta1, static_cast<double>(s.step))));
  }
};

// Adadelta (torch.optim.Adadelta): steps scaled by the running RMS of past updates over the
// running RMS of gradients; lr (torch's default 1.0) multiplies the result.
struct AdadeltaRule {
  static constexpr std::string_view name = "adadelta";
  struct Options {
    double rho = 0.9, eps = 1e-6, weight_decay = 0;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> square_avg, acc_delta;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("square_avg", s.square_avg);
    f("acc_delta", s.acc_delta);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    moving_average(s.square_avg, g * g, o.rho);
    const Vec<B> acc = s.acc_delta ? *s.acc_delta : p.zeros_like();
    const Vec<B> delta = (acc + o.eps).sqrt() / (*s.square_avg + o.eps).sqrt() * g;
    s.acc_delta = acc * o.rho + delta * delta * (1 - o.rho);
    return p - delta * lr;
  }
};

// Averaged SGD (torch.optim.ASGD): SGD with a decaying rate eta and, from step t0 on, a
// running average of the iterates, kept in the state as "ax" (the averaged parameters to
// evaluate with). eta at step t is lr / (1 + lambd lr (t - 1))^alpha with the rate of step t
// (torch computes it from the previous step's rate; the same under a constant rate).
struct AsgdRule {
  static constexpr std::string_view name = "asgd";
  struct Options {
    double lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> ax;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) { f("ax", s.ax); }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, Vec<B> g, State<B>& s) const {
    const Options& o = options;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    const double t = static_cast<double>(s.step);
    const double eta = lr / std::pow(1 + o.lambd * lr * (t - 1), o.alpha);
    const double mu = s.step == 1 ? 1.0 : 1 / std::max(1.0, t - 1 - o.t0);
    const Vec<B> updated = p * (1 - o.lambd * eta) - g * eta;
    s.ax = mu == 1.0 || !s.ax ? updated : *s.ax + (updated - *s.ax) * mu;
    return updated;
  }
};

// Rprop (torch.optim.Rprop): a step size per element, grown by etaplus while the gradient
// keeps its sign and shrunk by etaminus when it flips (that element then skips the step),
// clamped to step_sizes. The step sizes start at the first step's lr; later rates are unused.
struct RpropRule {
  static constexpr std::string_view name = "rprop";
  struct Options {
    double etaminus = 0.5, etaplus = 1.2, step_size_min = 1e-6, step_size_max = 50;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> prev, step_size;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("prev", s.prev);
    f("step_size", s.step_size);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, const Vec<B>& g, State<B>& s) const {
    const Options& o = options;
    const Vec<B> agreement = g * (s.prev ? *s.prev : p.zeros_like());
    const auto flipped = agreement.lt(0.0);
    const Vec<B> factor = p.ones_like().mask_fill(agreement.gt(0.0), o.etaplus).mask_fill(flipped, o.etaminus);
    s.step_size = ((s.step_size ? *s.step_size : p.full_like(lr)) * factor).clamp(o.step_size_min, o.step_size_max);
    s.prev = g.mask_fill(flipped, 0.0);
    return p - s.prev->sign() * *s.step_size;
  }
};

// Adan (Xie et al. 2022, the authors' reference formulation): Nesterov momentum estimated
// from gradient differences, three moments with betas (0.98, 0.92, 0.99), and a proximal
// weight decay (p / (1 + lr wd)), or the decoupled one with `no_prox`.
struct AdanRule {
  static constexpr std::string_view name = "adan";
  struct Options {
    double beta1 = 0.98, beta2 = 0.92, beta3 = 0.99, eps = 1e-8, weight_decay = 0;
    bool no_prox = false, maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_avg_diff, exp_avg_sq, prev_grad;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_avg_diff", s.exp_avg_diff);
    f("exp_avg_sq", s.exp_avg_sq);
    f("prev_grad", s.prev_grad);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, const Vec<B>& g, State<B>& s) const {
    const Options& o = options;
    const double t = static_cast<double>(s.step);
    const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t),
                 bias3 = 1 - std::pow(o.beta3, t);
    const Vec<B> diff = s.prev_grad ? g - *s.prev_grad : p.zeros_like();
    const Vec<B> nesterov = g + diff * o.beta2;
    moving_average(s.exp_avg, g, o.beta1);
    moving_average(s.exp_avg_diff, diff, o.beta2);
    moving_average(s.exp_avg_sq, nesterov * nesterov, o.beta3);
    s.prev_grad = g;
    const Vec<B> denom = s.exp_avg_sq->sqrt() / std::sqrt(bias3) + o.eps;
    const Vec<B> step = (*s.exp_avg / bias1 + *s.exp_avg_diff * (o.beta2 / bias2)) / denom * lr;
    if (o.no_prox) return p * (1 - lr * o.weight_decay) - step;
    return (p - step) / (1 + lr * o.weight_decay);
  }
};

// Muon (Jordan et al. 2024, the reference formulation): SGD momentum (Nesterov by default)
// whose update of a matrix is orthogonalized by `ns_steps` quintic Newton-Schulz iterations
// and scaled by sqrt(max(1, rows / cols)), with decoupled weight decay. A parameter of more
// than 2 dims is a matrix of its first dim by the rest (a conv kernel). Parameters of fewer
// than 2 dims (biases, norm gains) take the reference's auxiliary AdamW update instead
// (adam_beta1, adam_beta2, adam_eps), at adam_lr_scale times the rate: the default 0.015 is
// the reference's 3e-4 beside Muon's 0.02. The iteration runs in the parameter's dtype (the
// reference uses bf16 for speed).
struct MuonRule {
  static constexpr std::string_view name = "muon";
  struct Options {
    double momentum = 0.95, weight_decay = 0;
    bool nesterov = true;
    int ns_steps = 5;
    double adam_beta1 = 0.9, adam_beta2 = 0.95, adam_eps = 1e-10, adam_lr_scale = 0.015;
    bool maximize = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> momentum_buffer, exp_avg, exp_avg_sq;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("momentum_buffer", s.momentum_buffer);
    f("exp_avg", s.exp_avg);
    f("exp_avg_sq", s.exp_avg_sq);
  }

  Options options;
  template <Backend B>
  Vec<B> update(double lr, const Vec<B>& p, const Vec<B>& g, State<B>& s, const Shape& shape) const {
    const Options& o = options;
    KILN_CHECK(o.ns_steps >= 0, "muon: ns_steps must be >= 0, got {}", o.ns_steps);
    if (shape.rank() < 2) {
      const double t = static_cast<double>(s.step), rate = lr * o.adam_lr_scale;
      moving_average(s.exp_avg, g, o.adam_beta1);
      moving_average(s.exp_avg_sq, g * g, o.adam_beta2);
      const Vec<B> denom = (*s.exp_avg_sq / (1 - std::pow(o.adam_beta2, t))).sqrt() + o.adam_eps;
      return p * (1 - rate * o.weight_decay) - *s.exp_avg / (1 - std::pow(o.adam_beta1, t)) / denom * rate;
    }
    moving_average(s.momentum_buffer, g, o.momentum);
    const Vec<B> direction = o.nesterov ? g * (1 - o.momentum) + *s.momentum_buffer * o.momentum : *s.momentum_buffer;
    const std::int64_t rows = shape[0], cols = shape.numel() / rows;
    const bool tall = rows > cols;
    Tensor<B, 2> x = direction.template reshape<2>({rows, cols});
    if (tall) x = x.transpose();
    x = x / (x.norm().item() + 1e-7);
    constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
    for (int i = 0; i < o.ns_steps; ++i) {
      const Tensor<B, 2> gram = x.matmul(x.transpose());
      x = x * a + (gram * b + gram.matmul(gram) * c).matmul(x);
    }
    if (tall) x = x.transpose();
    const double scale = std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
    return p * (1 - lr * o.weight_decay) - x.template reshape<1>({-1}) * (lr * scale);
  }
};

// B is the model's backend or its inner one: optim::Adam<Autodiff<Cpu>> and optim::Adam<Cpu>
// are the same optimizer.
template <Backend B> using Sgd = Optimizer<ParameterBackendOf<B>, SgdRule>;
template <Backend B> using Adam = Optimizer<ParameterBackendOf<B>, AdamRule>;
template <Backend B> using RmsProp = Optimizer<ParameterBackendOf<B>, RmsPropRule>;
template <Backend B> using AdaGrad = Optimizer<ParameterBackendOf<B>, AdaGradRule>;
template <Backend B> using Lion = Optimizer<ParameterBackendOf<B>, LionRule>;
template <Backend B> using NAdam = Optimizer<ParameterBackendOf<B>, NAdamRule>;
template <Backend B> using RAdam = Optimizer<ParameterBackendOf<B>, RAdamRule>;
template <Backend B> using Adamax = Optimizer<ParameterBackendOf<B>, AdamaxRule>;
template <Backend B> using Adadelta = Optimizer<ParameterBackendOf<B>, AdadeltaRule>;
template <Backend B> using Asgd = Optimizer<ParameterBackendOf<B>, AsgdRule>;
template <Backend B> using Rprop = Optimizer<ParameterBackendOf<B>, RpropRule>;
template <Backend B> using Adan = Optimizer<ParameterBackendOf<B>, AdanRule>;
template <Backend B> using Muon = Optimizer<ParameterBackendOf<B>, MuonRule>;

// AdamW's options: torch.optim.AdamW's defaults, weight decay 0.01 among them, also when
// only some fields are given (adamw<B>({.eps = 1e-6}) keeps the decay of 0.01).
struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  bool amsgrad = false, maximize = false;
};

// AdamW: Adam with decoupled weight decay.
template <Backend B> Adam<B> adamw(const AdamWOptions& o = {}) {
  return Adam<B>({.beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay,
                  .decoupled_weight_decay = true, .amsgrad = o.amsgrad, .maximize = o.maximize});
}

}  // namespace kiln::optim
