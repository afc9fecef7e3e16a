// The update rules of Kiln's optimizers, each with torch.optim's meaning and defaults
// (Lion: the paper's, Chen et al. 2023). A rule has Options, a per-parameter State, the
// update of one flattened parameter, and `each`, which names its state tensors for saving.
// Use them through Optimizer (optim/optimizer.hpp): optim::Sgd<B>, optim::Adam<B>...
#pragma once

#include "kiln/optim/adam.hpp"
#include "kiln/optim/optimizer.hpp"

#include <optional>

namespace kiln::optim {

template <Backend B> using Vec = Tensor<B, 1>;

// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD).
struct SgdRule {
  static constexpr std::string_view name = "sgd";
  struct Options {
    double momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false;
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
// where the backend has one (optim::adam_step).
struct AdamRule {
  static constexpr std::string_view name = "adam";
  struct Options {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool decoupled_weight_decay = false;
  };
  template <Backend B> struct State : StepCount {
    std::optional<Vec<B>> exp_avg, exp_avg_sq;
  };
  template <Backend B, class F> static void each(State<B>& s, F&& f) {
    f("exp_avg", s.exp_avg);
    f("exp_avg_sq", s.exp_avg_sq);
  }

  Options options;
  template <Backend B> Vec<B> update(double lr, const Vec<B>& p, const Vec<B>& g, State<B>& s) const {
    const Options& o = options;
    if (!s.exp_avg) s.exp_avg = p.zeros_like();
    if (!s.exp_avg_sq) s.exp_avg_sq = p.zeros_like();
    auto r = adam_step(p, g, *s.exp_avg, *s.exp_avg_sq,
                       ops::AdamStep{lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.decoupled_weight_decay, s.step});
    s.exp_avg = std::move(r.m);
    s.exp_avg_sq = std::move(r.v);
    return std::move(r.param);
  }
};

// RMSProp with momentum and the centered variant (torch.optim.RMSprop).
struct RmsPropRule {
  static constexpr std::string_view name = "rmsprop";
  struct Options {
    double alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
    bool centered = false;
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
    s.square_avg = (s.square_avg ? *s.square_avg : p.zeros_like()) * o.alpha + g * g * (1 - o.alpha);
    Vec<B> avg = *s.square_avg;
    if (o.centered) {
      s.grad_avg = (s.grad_avg ? *s.grad_avg : p.zeros_like()) * o.alpha + g * (1 - o.alpha);
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

// B is the model's backend or its inner one: optim::Adam<Autodiff<Cpu>> and optim::Adam<Cpu>
// are the same optimizer.
template <Backend B> using Sgd = Optimizer<ParameterBackendOf<B>, SgdRule>;
template <Backend B> using Adam = Optimizer<ParameterBackendOf<B>, AdamRule>;
template <Backend B> using RmsProp = Optimizer<ParameterBackendOf<B>, RmsPropRule>;
template <Backend B> using AdaGrad = Optimizer<ParameterBackendOf<B>, AdaGradRule>;
template <Backend B> using Lion = Optimizer<ParameterBackendOf<B>, LionRule>;

// AdamW's options: torch.optim.AdamW's defaults, weight decay 0.01 among them, also when
// only some fields are given (adamw<B>({.eps = 1e-6}) keeps the decay of 0.01).
struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// AdamW: Adam with decoupled weight decay.
template <Backend B> Adam<B> adamw(const AdamWOptions& o = {}) {
  return Adam<B>({.beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay,
                  .decoupled_weight_decay = true});
}

}  // namespace kiln::optim
