// Learning-rate schedulers: the rate of optimizer step t (0-based; t is the number of
// scheduler steps taken, as in PyTorch), with torch.optim.lr_scheduler's meaning (torch
// 1.13) where PyTorch has the scheduler. Plain scalar code, no tensors; Scheduler holds
// any of them by value. docs/optimizers.md shows them in a training loop.
#pragma once

#include "kiln/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

namespace kiln::optim {

// A schedule gives lr(step), the rate of optimizer step `step` (>= 0; a negative step is a
// kiln::Error). It may also give lr_after(step, previous): the rate of `step` (>= 1) from
// the rate of step - 1, which Scheduler::step() calls instead of lr(step) where the
// schedule has it (CosineAnnealingLR past t_max, where lr(step) is not O(1)).
template <class S>
concept LrSchedule = std::copy_constructible<S> && requires(const S& s, std::int64_t step) {
  { s.lr(step) } -> std::convertible_to<double>;
};

namespace detail {

inline void check_step(const char* scheduler, std::int64_t step) {
  KILN_CHECK(step >= 0, "{}: step must be >= 0, got {}", scheduler, step);
}

inline void check_rate(const char* scheduler, const char* name, double rate) {
  KILN_CHECK(std::isfinite(rate) && rate >= 0, "{}: {} must be a finite learning rate >= 0, got {}", scheduler, name,
             rate);
}

inline void check_positive(const char* scheduler, const char* name, double value) {
  KILN_CHECK(std::isfinite(value) && value > 0, "{}: {} must be finite and > 0, got {}", scheduler, name, value);
}

inline void check_count(const char* scheduler, const char* name, std::int64_t value) {
  KILN_CHECK(value >= 1, "{}: {} must be >= 1, got {}", scheduler, name, value);
}

// A multiplier of the base rate: PyTorch's factors lie in [0, 1]; `open_at_zero` excludes
// 0 where PyTorch's chained form divides by the factor.
inline void check_factor(const char* scheduler, const char* name, double factor, bool open_at_zero) {
  const bool low_ok = open_at_zero ? factor > 0 : factor >= 0;
  KILN_CHECK(low_ok && factor <= 1, "{}: {} must be in {}0, 1], got {}", scheduler, name, open_at_zero ? "(" : "[",
             factor);
}

}  // namespace detail

// Any schedule, by value (copies share the immutable schedule and keep their own position).
// lr(step) is stateless. For PyTorch's habit of calling scheduler.step() after each
// optimizer.step(), current() is the rate of the next optimizer step and step() advances.
class Scheduler {
 public:
  // Scheduler itself is excluded first: checking LrSchedule<Scheduler> would recurse.
  template <class S>
    requires(!std::same_as<S, Scheduler> && LrSchedule<S>)
  Scheduler(S schedule)  // implicit: any schedule is a Scheduler
      : impl_(std::make_shared<const Model<S>>(std::move(schedule))), current_(impl_->lr(0)) {}

  double lr(std::int64_t step) const { return impl_->lr(step); }
  double lr_after(std::int64_t step, double previous) const { return impl_->lr_after(step, previous); }

  double current() const { return current_; }
  // How many times step() was called (PyTorch's last_epoch).
  std::int64_t steps() const { return steps_; }
  void step() {
    KILN_CHECK(steps_ < std::numeric_limits<std::int64_t>::max(),
               "Scheduler::step: {} steps were taken, the most a step count holds", steps_);
    current_ = impl_->lr_after(steps_ + 1, current_);
    ++steps_;
  }
  // Resumes at `steps` steps taken, e.g. after loading a checkpoint.
  void seek(std::int64_t steps) {
    current_ = impl_->lr(steps);
    steps_ = steps;
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual double lr(std::int64_t step) const = 0;
    virtual double lr_after(std::int64_t step, double previous) const = 0;
  };
  template <class S> struct Model final : Concept {
    explicit Model(S s) : schedule(std::move(s)) {}
    double lr(std::int64_t step) const override { return schedule.lr(step); }
    double lr_after(std::int64_t step, double previous) const override {
      if constexpr (requires { schedule.lr_after(step, previous); })
        return schedule.lr_after(step, previous);
      else
        return schedule.lr(step);
    }
    S schedule;
  };

  std::shared_ptr<const Concept> impl_;
  std::int64_t steps_ = 0;
  double current_;
};

// base_lr * gamma^(step / step_size): the rate falls by gamma every step_size steps.
class StepLR {
 public:
  StepLR(double base_lr, std::int64_t step_size, double gamma = 0.1)
      : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {
    detail::check_rate("StepLR", "base_lr", base_lr);
    detail::check_count("StepLR", "step_size", step_size);
    detail::check_positive("StepLR", "gamma", gamma);
  }
  double lr(std::int64_t step) const {
    detail::check_step("StepLR", step);
    return base_lr_ * std::pow(gamma_, static_cast<double>(step / step_size_));
  }

 private:
  double base_lr_;
  std::int64_t step_size_;
  double gamma_;
};

// base_lr * gamma^(number of milestones <= step). Milestones must not decrease; one that is
// repeated applies gamma once per occurrence, as in PyTorch.
class MultiStepLR {
 public:
  MultiStepLR(double base_lr, std::vector<std::int64_t> milestones, double gamma = 0.1)
      : base_lr_(base_lr), milestones_(std::move(milestones)), gamma_(gamma) {
    detail::check_rate("MultiStepLR", "base_lr", base_lr);
    detail::check_positive("MultiStepLR", "gamma", gamma);
    KILN_CHECK(!milestones_.empty(), "MultiStepLR: milestones is empty; give at least one step to decay at");
    KILN_CHECK(milestones_.front() >= 0, "MultiStepLR: milestones must be >= 0, got {}", milestones_.front());
    for (std::size_t i = 1; i < milestones_.size(); ++i)
      KILN_CHECK(milestones_[i - 1] <= milestones_[i],
                 "MultiStepLR: milestones must be in increasing order, got {} before {} (at index {})",
                 milestones_[i - 1], milestones_[i], i);
  }
  double lr(std::int64_t step) const {
    detail::check_step("MultiStepLR", step);
    const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
    return base_lr_ * std::pow(gamma_, static_cast<double>(passed));
  }

 private:
  double base_lr_;
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

// base_lr * gamma^step.
class ExponentialLR {
 public:
  ExponentialLR(double base_lr, double gamma) : base_lr_(base_lr), gamma_(gamma) {
    detail::check_rate("ExponentialLR", "base_lr", base_lr);
    detail::check_positive("ExponentialLR", "gamma", gamma);
  }
  double lr(std::int64_t step) const {
    detail::check_step("ExponentialLR", step);
    return base_lr_ * std::pow(gamma_, static_cast<double>(step));
  }

 private:
  double base_lr_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) (1 + cos(pi step / t_max)) / 2: half a cosine from base_lr
// down to eta_min at step t_max; past t_max it rises again (period 2 t_max), as in PyTorch.
// PyTorch runs a recursion (each rate from the previous one). Up to t_max it agrees with the
// closed form to ~1e-14; past t_max its rounding grows on each rise (relative 1e-11 at
// t_max 1000, eta_min = base_lr / 2), so there lr(step) replays the recursion from the last
// minimum, where it is exactly eta_min: O(t_max), while Scheduler::step() stays O(1). The
// replay is done for t_max up to max_replayed_t_max (2^20 steps: a replay of at most 2^21
// steps, ~0.1 s); a longer schedule uses the closed form past t_max too, in lr() and in
// step() alike (as PyTorch's step(epoch) does), so that no step takes seconds.
class CosineAnnealingLR {
 public:
  static constexpr std::int64_t max_replayed_t_max = std::int64_t{1} << 20;

  CosineAnnealingLR(double base_lr, std::int64_t t_max, double eta_min = 0.0)
      : base_lr_(base_lr), t_max_(t_max), eta_min_(eta_min) {
    detail::check_rate("CosineAnnealingLR", "base_lr", base_lr);
    detail::check_count("CosineAnnealingLR", "t_max", t_max);
    detail::check_rate("CosineAnnealingLR", "eta_min", eta_min);
  }
  double lr(std::int64_t step) const {
    detail::check_step("CosineAnnealingLR", step);
    if (step <= t_max_ || !replays()) return closed_form(step);
    // Minima are at t_max, 3 t_max, 5 t_max...; the loop stops at `step` without
    // incrementing past it (step may be INT64_MAX).
    double rate = eta_min_;
    for (std::int64_t t = step - (step - t_max_) % (2 * t_max_); t < step;) rate = recursion(++t, rate);
    return rate;
  }
  double lr_after(std::int64_t step, double previous) const {
    detail::check_step("CosineAnnealingLR", step);
    return step <= t_max_ || !replays() ? closed_form(step) : recursion(step, previous);
  }

 private:
  // With t_max <= 2^20, 2 t_max cannot overflow; `step` > t_max >= 1 in the recursion.
  bool replays() const { return t_max_ <= max_replayed_t_max; }
  // Both are written as torch/optim/lr_scheduler.py writes them, to round alike.
  double closed_form(std::int64_t step) const {
    return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(pi * static_cast<double>(step) / t_max())) / 2;
  }
  double recursion(std::int64_t step, double previous) const {
    if ((step - 1 - t_max_) % (2 * t_max_) == 0)  // the step after a minimum
      return previous + (base_lr_ - eta_min_) * (1 - std::cos(pi / t_max())) / 2;
    return (1 + std::cos(pi * static_cast<double>(step) / t_max())) /
               (1 + std::cos(pi * static_cast<double>(step - 1) / t_max())) * (previous - eta_min_) +
           eta_min_;
  }
  double t_max() const { return static_cast<double>(t_max_); }
  static constexpr double pi = std::numbers::pi;

  double base_lr_;
  std::int64_t t_max_;
  double eta_min_;
};

// base_lr times a factor that moves linearly from start_factor (step 0) to end_factor
// (step total_iters), then stays: with end_factor 1, a linear warmup.
class LinearLR {
 public:
  LinearLR(double base_lr, double start_factor = 1.0 / 3, double end_factor = 1.0, std::int64_t total_iters = 5)
      : base_lr_(base_lr), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
    detail::check_rate("LinearLR", "base_lr", base_lr);
    detail::check_factor("LinearLR", "start_factor", start_factor, true);
    detail::check_factor("LinearLR", "end_factor", end_factor, false);
    detail::check_count("LinearLR", "total_iters", total_iters);
  }
  double lr(std::int64_t step) const {
    detail::check_step("LinearLR", step);
    return base_lr_ * (start_factor_ + (end_factor_ - start_factor_) *
                                           static_cast<double>(std::min(total_iters_, step)) /
                                           static_cast<double>(total_iters_));
  }

 private:
  double base_lr_;
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

// base_lr * factor for the first total_iters steps, then base_lr.
class ConstantLR {
 public:
  ConstantLR(double base_lr, double factor = 1.0 / 3, std::int64_t total_iters = 5)
      : base_lr_(base_lr), factor_(factor), total_iters_(total_iters) {
    detail::check_rate("ConstantLR", "base_lr", base_lr);
    detail::check_factor("ConstantLR", "factor", factor, true);
    detail::check_count("ConstantLR", "total_iters", total_iters);
  }
  double lr(std::int64_t step) const {
    detail::check_step("ConstantLR", step);
    return step < total_iters_ ? base_lr_ * factor_ : base_lr_;
  }

 private:
  double base_lr_;
  double factor_;
  std::int64_t total_iters_;
};

enum class Anneal { cos, linear };

struct OneCycleOptions {
  double pct_start = 0.3;  // the part of the cycle spent rising to max_lr, in (0, 1)
  Anneal anneal = Anneal::cos;
  double div_factor = 25.0;        // the first rate is max_lr / div_factor
  double final_div_factor = 1e4;   // the last is that / final_div_factor
  bool three_phase = false;        // rise, fall back to the first rate, then anneal to the last
};

// The 1cycle policy (Smith & Topor): from max_lr / div_factor up to max_lr over pct_start of
// total_steps, then down to the minimum (PyTorch's OneCycleLR without momentum cycling).
// Steps 0 to total_steps have a rate, as in PyTorch; a later step is a kiln::Error.
class OneCycleLR {
 public:
  OneCycleLR(double max_lr, std::int64_t total_steps, OneCycleOptions options = {})
      : total_steps_(total_steps), anneal_(options.anneal) {
    detail::check_rate("OneCycleLR", "max_lr", max_lr);
    KILN_CHECK(total_steps > 0, "OneCycleLR: total_steps must be > 0, got {}", total_steps);
    KILN_CHECK(options.pct_start > 0 && options.pct_start < 1, "OneCycleLR: pct_start must be in (0, 1), got {}",
               options.pct_start);
    detail::check_positive("OneCycleLR", "div_factor", options.div_factor);
    detail::check_positive("OneCycleLR", "final_div_factor", options.final_div_factor);
    const double initial_lr = max_lr / options.div_factor;
    const double min_lr = initial_lr / options.final_div_factor;
    const double total = static_cast<double>(total_steps);
    // Phase ends as PyTorch computes them (fractional steps).
    if (options.three_phase)
      phases_ = {{options.pct_start * total - 1, initial_lr, max_lr},
                 {2 * options.pct_start * total - 2, max_lr, initial_lr},
                 {total - 1, initial_lr, min_lr}};
    else
      phases_ = {{options.pct_start * total - 1, initial_lr, max_lr}, {total - 1, max_lr, min_lr}};
    double start = 0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      // PyTorch divides by the phase's length.
      KILN_CHECK(phases_[i].end_step != start,
                 "OneCycleLR: pct_start {} and total_steps {} leave phase {} of {} without steps (it ends at step {}, "
                 "where it starts); change pct_start",
                 options.pct_start, total_steps, i + 1, phases_.size(), start);
      start = phases_[i].end_step;
    }
  }
  double lr(std::int64_t step) const {
    detail::check_step("OneCycleLR", step);
    KILN_CHECK(step <= total_steps_, "OneCycleLR: step {} is past total_steps {}; the cycle has rates for steps 0 to {}",
               step, total_steps_, total_steps_);
    const double t = static_cast<double>(step);
    double start = 0;
    for (std::size_t i = 0;; ++i) {
      const Phase& phase = phases_[i];
      if (t <= phase.end_step || i + 1 == phases_.size()) {
        const double pct = (t - start) / (phase.end_step - start);
        if (anneal_ == Anneal::linear) return (phase.end_lr - phase.start_lr) * pct + phase.start_lr;
        return phase.end_lr + (phase.start_lr - phase.end_lr) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
      }
      start = phase.end_step;
    }
  }

 private:
  struct Phase {
    double end_step, start_lr, end_lr;
  };
  std::int64_t total_steps_;
  Anneal anneal_;
  std::vector<Phase> phases_;
};

// The Transformer's schedule (Vaswani et al., "Attention is all you need"; not in PyTorch):
// factor * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5) with s = step + 1: linear
// warmup for warmup_steps steps, then decay as 1 / sqrt(s).
class NoamLR {
 public:
  NoamLR(std::int64_t d_model, std::int64_t warmup_steps, double factor = 1.0)
      : d_model_(d_model), warmup_steps_(warmup_steps), factor_(factor) {
    detail::check_count("NoamLR", "d_model", d_model);
    detail::check_count("NoamLR", "warmup_steps", warmup_steps);
    detail::check_positive("NoamLR", "factor", factor);
  }
  double lr(std::int64_t step) const {
    detail::check_step("NoamLR", step);
    const double s = static_cast<double>(step) + 1;  // step + 1 in int64 overflows at INT64_MAX
    return factor_ * (std::pow(static_cast<double>(d_model_), -0.5) *
                      std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup_steps_), -1.5)));
  }

 private:
  std::int64_t d_model_, warmup_steps_;
  double factor_;
};

// schedulers[i] from milestones[i - 1] on, counting its steps from 0 there, as PyTorch's
// SequentialLR. Each keeps its own base rate (in PyTorch they share the optimizer's).
// Milestones are steps >= 1, increasing, one fewer than the schedulers.
class SequentialLR {
 public:
  SequentialLR(std::vector<Scheduler> schedulers, std::vector<std::int64_t> milestones)
      : schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
    KILN_CHECK(!schedulers_.empty(), "SequentialLR: schedulers is empty; give at least one");
    KILN_CHECK(milestones_.size() + 1 == schedulers_.size(),
               "SequentialLR: {} schedulers need {} milestones (where each after the first starts), got {}",
               schedulers_.size(), schedulers_.size() - 1, milestones_.size());
    for (std::size_t i = 0; i < milestones_.size(); ++i) {
      KILN_CHECK(milestones_[i] >= 1, "SequentialLR: milestones must be >= 1, got {} (at index {})", milestones_[i], i);
      KILN_CHECK(i == 0 || milestones_[i - 1] < milestones_[i],
                 "SequentialLR: milestones must be strictly increasing, got {} before {} (at index {})",
                 milestones_[i == 0 ? 0 : i - 1], milestones_[i], i);
    }
  }
  double lr(std::int64_t step) const {
    detail::check_step("SequentialLR", step);
    const auto [index, local] = locate(step);
    return schedulers_[index].lr(local);
  }
  double lr_after(std::int64_t step, double previous) const {
    detail::check_step("SequentialLR", step);
    const auto [index, local] = locate(step);
    // At its milestone a scheduler starts afresh (PyTorch calls its step(0) there).
    if (local == 0) return schedulers_[index].lr(0);
    return schedulers_[index].lr_after(local, previous);
  }

 private:
  // The scheduler in charge of `step`, and its own step count.
  std::pair<std::size_t, std::int64_t> locate(std::int64_t step) const {
    const auto index = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), step) -
                                                milestones_.begin());
    return {index, index == 0 ? step : step - milestones_[index - 1]};
  }

  std::vector<Scheduler> schedulers_;
  std::vector<std::int64_t> milestones_;
};

// Linear warmup from base_lr * start_factor to base_lr over warmup_steps steps, then a
// cosine down to eta_min at step total_steps: PyTorch's
// SequentialLR([LinearLR(start_factor, 1, warmup_steps), CosineAnnealingLR(total_steps -
// warmup_steps, eta_min)], [warmup_steps]).
inline SequentialLR warmup_cosine(double base_lr, std::int64_t warmup_steps, std::int64_t total_steps,
                                  double eta_min = 0.0, double start_factor = 1.0 / 3) {
  KILN_CHECK(warmup_steps >= 1, "warmup_cosine: warmup_steps must be >= 1, got {} (without warmup use CosineAnnealingLR)",
             warmup_steps);
  KILN_CHECK(total_steps > warmup_steps, "warmup_cosine: total_steps ({}) must be greater than warmup_steps ({})",
             total_steps, warmup_steps);
  return SequentialLR({LinearLR(base_lr, start_factor, 1.0, warmup_steps),
                       CosineAnnealingLR(base_lr, total_steps - warmup_steps, eta_min)},
                      {warmup_steps});
}

// base_lr (1 - min(step, total_iters) / total_iters)^power: a polynomial decay to 0 at
// total_iters (torch's PolynomialLR).
class PolynomialLR {
 public:
  PolynomialLR(double base_lr, std::int64_t total_iters = 5, double power = 1.0)
      : base_lr_(base_lr), total_iters_(total_iters), power_(power) {
    detail::check_rate("PolynomialLR", "base_lr", base_lr);
    detail::check_count("PolynomialLR", "total_iters", total_iters);
    detail::check_positive("PolynomialLR", "power", power);
  }
  double lr(std::int64_t step) const {
    detail::check_step("PolynomialLR", step);
    const double t = static_cast<double>(std::min(step, total_iters_));
    return base_lr_ * std::pow(1.0 - t / static_cast<double>(total_iters_), power_);
  }

 private:
  double base_lr_;
  std::int64_t total_iters_;
  double power_;
};

// Cosine annealing from base_lr to eta_min over t_0 steps, restarting at base_lr after each
// period, the period multiplied by t_mult at each restart (SGDR; torch's
// CosineAnnealingWarmRestarts).
class CosineAnnealingWarmRestarts {
 public:
  CosineAnnealingWarmRestarts(double base_lr, std::int64_t t_0, std::int64_t t_mult = 1, double eta_min = 0.0)
      : base_lr_(base_lr), t_0_(t_0), t_mult_(t_mult), eta_min_(eta_min) {
    detail::check_rate("CosineAnnealingWarmRestarts", "base_lr", base_lr);
    detail::check_count("CosineAnnealingWarmRestarts", "t_0", t_0);
    detail::check_count("CosineAnnealingWarmRestarts", "t_mult", t_mult);
    detail::check_rate("CosineAnnealingWarmRestarts", "eta_min", eta_min);
  }
  double lr(std::int64_t step) const {
    detail::check_step("CosineAnnealingWarmRestarts", step);
    // The position in the current period and its length: O(1) with t_mult 1, else one
    // subtraction per period (O(log step)).
    std::int64_t t = step, period = t_0_;
    if (t_mult_ == 1) {
      t %= t_0_;
    } else {
      while (t >= period) {
        t -= period;
        if (period > std::numeric_limits<std::int64_t>::max() / t_mult_) break;  // t < period * t_mult
        period *= t_mult_;
      }
    }
    return eta_min_ + (base_lr_ - eta_min_) *
                          (1 + std::cos(std::numbers::pi * static_cast<double>(t) / static_cast<double>(period))) / 2;
  }

 private:
  double base_lr_;
  std::int64_t t_0_, t_mult_;
  double eta_min_;
};

// The cyclical rate of torch's CyclicLR (without momentum cycling): up from base_lr to
// max_lr over step_size_up steps, down over step_size_down (0: as many as up), the height of
// each cycle scaled by the mode: `triangular` keeps it, `triangular2` halves it every cycle,
// `exp_range` multiplies it by gamma^step.
enum class CyclicMode { triangular, triangular2, exp_range };
class CyclicLR {
 public:
  CyclicLR(double base_lr, double max_lr, std::int64_t step_size_up = 2000, std::int64_t step_size_down = 0,
           CyclicMode mode = CyclicMode::triangular, double gamma = 1.0)
      : base_lr_(base_lr), max_lr_(max_lr), mode_(mode), gamma_(gamma) {
    detail::check_rate("CyclicLR", "base_lr", base_lr);
    detail::check_rate("CyclicLR", "max_lr", max_lr);
    detail::check_count("CyclicLR", "step_size_up", step_size_up);
    KILN_CHECK(step_size_down >= 0, "CyclicLR: step_size_down must be >= 0 (0: step_size_up), got {}", step_size_down);
    detail::check_positive("CyclicLR", "gamma", gamma);
    const std::int64_t down = step_size_down == 0 ? step_size_up : step_size_down;
    total_size_ = static_cast<double>(step_size_up) + static_cast<double>(down);
    step_ratio_ = static_cast<double>(step_size_up) / total_size_;
  }
  // As torch/optim/lr_scheduler.py computes it, to round alike.
  double lr(std::int64_t step) const {
    detail::check_step("CyclicLR", step);
    const double t = static_cast<double>(step);
    const double cycle = std::floor(1 + t / total_size_);
    const double x = 1.0 + t / total_size_ - cycle;
    const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
    const double base_height = (max_lr_ - base_lr_) * scale_factor;
    switch (mode_) {
      case CyclicMode::triangular: return base_lr_ + base_height * 1.0;
      case CyclicMode::triangular2: return base_lr_ + base_height * (1 / std::pow(2.0, cycle - 1));
      case CyclicMode::exp_range: return base_lr_ + base_height * std::pow(gamma_, t);
    }
    return base_lr_;
  }

 private:
  double base_lr_, max_lr_;
  CyclicMode mode_;
  double gamma_;
  double total_size_ = 0, step_ratio_ = 0;
};

// The rate of step t is that of step t - 1 times factor(t): base_lr * factor(1) * ... *
// factor(t) (torch's MultiplicativeLR; LambdaLR is any type with lr(step), see LrSchedule).
// lr(step) takes O(step) calls; Scheduler::step() takes one.
class MultiplicativeLR {
 public:
  MultiplicativeLR(double base_lr, std::function<double(std::int64_t)> factor)
      : base_lr_(base_lr), factor_(std::move(factor)) {
    detail::check_rate("MultiplicativeLR", "base_lr", base_lr);
    KILN_CHECK(static_cast<bool>(factor_), "MultiplicativeLR: the factor function is empty");
  }
  double lr(std::int64_t step) const {
    detail::check_step("MultiplicativeLR", step);
    double rate = base_lr_;
    for (std::int64_t t = 1; t <= step; ++t) rate *= factor_(t);
    return rate;
  }
  double lr_after(std::int64_t step, double previous) const {
    detail::check_step("MultiplicativeLR", step);
    return previous * factor_(step);
  }

 private:
  double base_lr_;
  std::function<double(std::int64_t)> factor_;
};

// base_lr * factor(step) (torch's LambdaLR): the rate as any function of the step count.
class LambdaLR {
 public:
  LambdaLR(double base_lr, std::function<double(std::int64_t)> factor) : base_lr_(base_lr), factor_(std::move(factor)) {
    detail::check_rate("LambdaLR", "base_lr", base_lr);
    KILN_CHECK(static_cast<bool>(factor_), "LambdaLR: the factor function is empty");
  }
  double lr(std::int64_t step) const {
    detail::check_step("LambdaLR", step);
    return base_lr_ * factor_(step);
  }

 private:
  double base_lr_;
  std::function<double(std::int64_t)> factor_;
};

// Schedules applied together (torch's ChainedScheduler): each was built with the same
// base_lr, and the rate is base_lr times the product of their factors lr_i(step) / base_lr.
// That is torch's rate for the schedules whose torch step multiplies the current rate
// (StepLR, MultiStepLR, ExponentialLR, ConstantLR, LinearLR, PolynomialLR,
// MultiplicativeLR); for the others torch's chained rate depends on their order.
class ChainedScheduler {
 public:
  ChainedScheduler(double base_lr, std::vector<Scheduler> schedulers)
      : base_lr_(base_lr), schedulers_(std::move(schedulers)) {
    detail::check_positive("ChainedScheduler", "base_lr", base_lr);
    KILN_CHECK(!schedulers_.empty(), "ChainedScheduler: schedulers is empty; give at least one");
  }
  double lr(std::int64_t step) const {
    detail::check_step("ChainedScheduler", step);
    double rate = base_lr_;
    for (const Scheduler& s : schedulers_) rate *= s.lr(step) / base_lr_;
    return rate;
  }

 private:
  double base_lr_;
  std::vector<Scheduler> schedulers_;
};

struct PlateauOptions {
  enum class Mode { min, max };                // whether the metric should fall (a loss) or rise (an accuracy)
  enum class Threshold { relative, absolute };  // how `threshold` measures a real improvement
  Mode mode = Mode::min;
  double factor = 0.1;          // the rate is multiplied by this at each cut; in [0, 1)
  std::int64_t patience = 10;   // steps without improvement tolerated before a cut
  double threshold = 1e-4;      // relative: better than best * (1 -/+ threshold); absolute: best -/+ threshold
  Threshold threshold_mode = Threshold::relative;
  std::int64_t cooldown = 0;    // steps after a cut during which bad steps are not counted
  double min_lr = 0;            // the rate never goes below this
  double eps = 1e-8;            // a cut smaller than this is skipped
};

// ReduceLROnPlateau (torch.optim.lr_scheduler's, torch 1.13): the rate is cut by `factor`
// when a metric (a validation loss, an accuracy) has not improved for more than `patience`
// steps. Unlike the schedules above it depends on what it is shown, so it is not a
// Scheduler: call step(metric) once per evaluation and pass current() to the optimizer. A
// NaN metric is never an improvement. state() and restore() carry it across a checkpoint.
class ReduceLROnPlateau {
 public:
  struct State {
    double lr = 0, best = 0;
    std::int64_t bad_steps = 0, cooldown_left = 0, steps = 0;
  };

  explicit ReduceLROnPlateau(double lr, PlateauOptions options = {}) : options_(options) {
    detail::check_rate("ReduceLROnPlateau", "lr", lr);
    KILN_CHECK(options.factor >= 0 && options.factor < 1, "ReduceLROnPlateau: factor must be in [0, 1), got {}",
               options.factor);
    KILN_CHECK(options.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got {}", options.patience);
    KILN_CHECK(options.cooldown >= 0, "ReduceLROnPlateau: cooldown must be >= 0, got {}", options.cooldown);
    KILN_CHECK(std::isfinite(options.threshold) && options.threshold >= 0,
               "ReduceLROnPlateau: threshold must be finite and >= 0, got {}", options.threshold);
    detail::check_rate("ReduceLROnPlateau", "min_lr", options.min_lr);
    KILN_CHECK(std::isfinite(options.eps) && options.eps >= 0, "ReduceLROnPlateau: eps must be finite and >= 0, got {}",
               options.eps);
    state_.lr = lr;
    state_.best = worst();
  }

  double current() const { return state_.lr; }
  const PlateauOptions& options() const { return options_; }
  State state() const { return state_; }
  void restore(const State& state) {
    detail::check_rate("ReduceLROnPlateau::restore", "lr", state.lr);
    KILN_CHECK(state.bad_steps >= 0 && state.cooldown_left >= 0 && state.steps >= 0,
               "ReduceLROnPlateau::restore: counts must be >= 0, got bad_steps {}, cooldown_left {}, steps {}",
               state.bad_steps, state.cooldown_left, state.steps);
    state_ = state;
  }

  // Takes one value of the metric and returns the rate from now on.
  double step(double metric) {
    State& s = state_;
    ++s.steps;
    if (improves(metric)) {
      s.best = metric;
      s.bad_steps = 0;
    } else {
      ++s.bad_steps;
    }
    if (s.cooldown_left > 0) {
      --s.cooldown_left;
      s.bad_steps = 0;
    }
    if (s.bad_steps > options_.patience) {
      const double cut = std::max(s.lr * options_.factor, options_.min_lr);
      if (s.lr - cut > options_.eps) s.lr = cut;
      s.cooldown_left = options_.cooldown;
      s.bad_steps = 0;
    }
    return s.lr;
  }

 private:
  bool maximize() const { return options_.mode == PlateauOptions::Mode::max; }
  double worst() const {
    return maximize() ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  bool improves(double metric) const {
    const double best = state_.best, t = options_.threshold;
    if (options_.threshold_mode == PlateauOptions::Threshold::relative)
      return maximize() ? metric > best * (1 + t) : metric < best * (1 - t);
    return maximize() ? metric > best + t : metric < best - t;
  }

  PlateauOptions options_;
  State state_;
};

}  // namespace kiln::optim
