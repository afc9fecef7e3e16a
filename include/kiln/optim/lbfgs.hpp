// L-BFGS (torch.optim.LBFGS): a quasi-Newton method that approximates the inverse Hessian
// from the last `history_size` steps and gradient changes, over all of a module's trainable
// parameters as one vector. Each step re-evaluates the loss several times, so it takes a
// closure that computes the loss (a one-element tensor on Autodiff<B>) from the module as it
// is; with LineSearch::strong_wolfe the step length satisfies the strong Wolfe conditions
// (c1 = 1e-4, c2 = 0.9, cubic interpolation, at most 25 evaluations), as torch's does.
//
//   optim::Lbfgs<Cpu> lbfgs({.line_search = optim::LineSearch::strong_wolfe});
//   for (int i = 0; i < 10; ++i)
//     lbfgs.step(model, [&] { return (model.forward(x) - y).square().mean(); });
//
// The history lives in the optimizer; it has no state_dict. It keeps one history for one
// module: step it with a module whose trainable parameters changed and it restarts from the
// gradient.
#pragma once

#include "kiln/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::optim {

enum class LineSearch { none, strong_wolfe };

// torch.optim.LBFGS's options; max_eval 0 means max_iter * 5 / 4, as torch's None.
struct LbfgsOptions {
  double lr = 1;
  int max_iter = 20;
  int max_eval = 0;
  double tolerance_grad = 1e-7, tolerance_change = 1e-9;
  int history_size = 100;
  LineSearch line_search = LineSearch::none;
};

template <Backend B> class LbfgsOptimizer {
  static_assert(!AutodiffBackend<B>, "LbfgsOptimizer<B> takes the inner backend; optim::Lbfgs<B> accepts either");
  using Flat = Tensor<B, 1>;

 public:
  using Backend = B;
  LbfgsOptimizer() = default;
  explicit LbfgsOptimizer(const LbfgsOptions& options) : options_(options) {
    KILN_CHECK(options.max_iter >= 1 && options.max_eval >= 0 && options.history_size >= 1 && options.lr > 0,
               "lbfgs: needs max_iter >= 1, max_eval >= 0, history_size >= 1 and lr > 0 (got {}, {}, {}, {})",
               options.max_iter, options.max_eval, options.history_size, options.lr);
  }
  const LbfgsOptions& options() const { return options_; }
  // Evaluations of the loss over all steps so far.
  std::int64_t evaluations() const { return evaluations_; }

  // Up to max_iter iterations on `module`'s trainable parameters; `loss()` returns the loss
  // of the module as it is then (a one-element tensor on Autodiff<B>). Returns the loss
  // before the step, as torch's step(closure).
  template <nn::Module M, class Closure> double step(M& module, Closure&& loss) {
    Problem<M, Closure> problem(module, loss);
    if (!history_ || history_->size != problem.size) history_.emplace(problem.size);
    History& h = *history_;
    const LbfgsOptions& o = options_;
    const int max_eval = o.max_eval > 0 ? o.max_eval : o.max_iter * 5 / 4;

    auto [start_loss, grad] = problem.evaluate();
    const double first_loss = start_loss;
    double current = start_loss;
    int evals = 1;
    ++evaluations_;
    if (max_abs(grad) <= o.tolerance_grad) return first_loss;

    for (int iteration = 1; iteration <= o.max_iter; ++iteration) {
      ++h.iterations;
      if (h.iterations == 1) {
        h.direction = -grad;
        h.pairs.clear();
        h.gamma = 1;
      } else {
        // The newest step s and gradient change y join the history when y.s is positive (the
        // curvature condition); the two-loop recursion then gives the new direction.
        const Flat y = grad - *h.previous_grad;
        const Flat s = *h.direction * h.length;
        const double ys = dot(y, s);
        if (ys > 1e-10) {
          if (static_cast<int>(h.pairs.size()) == o.history_size) h.pairs.pop_front();
          h.pairs.push_back({s, y, 1 / ys});
          h.gamma = ys / dot(y, y);
        }
        Flat q = -grad;
        std::vector<double> alpha(h.pairs.size());
        for (std::size_t i = h.pairs.size(); i-- > 0;) {
          alpha[i] = dot(h.pairs[i].s, q) * h.pairs[i].rho;
          q = q - h.pairs[i].y * alpha[i];
        }
        Flat r = q * h.gamma;
        for (std::size_t i = 0; i < h.pairs.size(); ++i) {
          const double beta = dot(h.pairs[i].y, r) * h.pairs[i].rho;
          r = r + h.pairs[i].s * (alpha[i] - beta);
        }
        h.direction = r;
      }
      h.previous_grad = grad;
      const double previous_loss = current;
      h.length = h.iterations == 1 ? std::min(1.0, 1.0 / grad.abs().sum().item()) * o.lr : o.lr;
      const double slope = dot(grad, *h.direction);
      if (slope > -o.tolerance_change) break;

      int search_evals = 0;
      if (o.line_search == LineSearch::strong_wolfe) {
        const Flat start = problem.parameters();
        const auto found = strong_wolfe(problem, start, *h.direction, h.length, current, grad, slope);
        h.length = found.length;
        current = found.loss;
        grad = found.grad;
        search_evals = found.evaluations;
        problem.set(start + *h.direction * h.length);
      } else {
        problem.set(problem.parameters() + *h.direction * h.length);
        if (iteration != o.max_iter) {
          std::tie(current, grad) = problem.evaluate();
          search_evals = 1;
        }
      }
      evals += search_evals;
      evaluations_ += search_evals;
      if (iteration == o.max_iter || evals >= max_eval) break;
      if (max_abs(grad) <= o.tolerance_grad) break;
      if (max_abs(*h.direction) * std::abs(h.length) <= o.tolerance_change) break;
      if (std::abs(current - previous_loss) < o.tolerance_change) break;
    }
    return first_loss;
  }

 private:
  struct Pair {
    Flat s, y;
    double rho;
  };
  struct History {
    explicit History(std::int64_t n) : size(n) {}
    std::int64_t size;
    std::int64_t iterations = 0;
    std::optional<Flat> direction, previous_grad;
    double length = 0, gamma = 1;
    std::deque<Pair> pairs;
  };

  static double dot(const Flat& a, const Flat& b) { return (a * b).sum().item(); }
  static double max_abs(const Flat& a) { return a.abs().max().item(); }

  // The module's trainable parameters as one vector, in for_each_param's order; the loss and
  // its gradient at the parameters as they are.
  template <nn::Module M, class Closure> struct Problem {
    Problem(M& m, Closure& l) : module(m), loss(l) {
      nn::for_each_param(module, [&](const std::string& path, const auto& p) {
        if (!p.trainable()) return;
        if (dtype) {
          KILN_CHECK(p->dtype() == *dtype, "lbfgs: every parameter must have one dtype: {} is {}, the first one {}",
                     path, p->dtype(), *dtype);
        }
        dtype = p->dtype();
        size += p->numel();
      });
      KILN_CHECK(size > 0, "lbfgs: the module has no trainable parameters");
    }
    M& module;
    Closure& loss;
    std::optional<DType> dtype;
    std::int64_t size = 0;

    Flat parameters() const {
      std::vector<Flat> parts;
      nn::for_each_param(module, [&](const std::string&, const auto& p) {
        if (p.trainable()) parts.push_back(Flat(B::reshape(p->inner().primitive(), Shape{p->numel()})));
      });
      return Flat::cat(parts, 0);
    }
    void set(const Flat& flat) {
      std::int64_t offset = 0;
      nn::for_each_param(module, [&](const std::string&, auto& p) {
        if (!p.trainable()) return;
        using T = std::remove_cvref_t<decltype(p.val())>;
        const Shape shape = p->shape();
        const Flat part = flat.narrow(0, offset, shape.numel());
        offset += shape.numel();
        p.replace(T::from_inner(typename T::InnerTensor(B::reshape(part.primitive(), shape))));
      });
    }
    // The loss, and its gradient as one vector (zeros for a parameter it does not reach).
    std::pair<double, Flat> evaluate() {
      auto value = loss();
      KILN_CHECK(value.numel() == 1, "lbfgs: the closure must return the loss as one element, got shape {}",
                 value.shape());
      const double result = value.inner().item();
      auto grads = value.backward();
      const auto by_param = GradientsParams<B>::from(module, grads);
      std::vector<Flat> parts;
      nn::for_each_param(module, [&](const std::string&, const auto& p) {
        if (!p.trainable()) return;
        const auto g = by_param.get(p.id());
        parts.push_back(g ? Flat(B::reshape(*g, Shape{p->numel()}))
                          : Flat(provided::full<B>(Shape{p->numel()}, 0.0, p->dtype(), p->device())));
      });
      return {result, Flat::cat(parts, 0)};
    }
  };

  struct Found {
    double loss;
    Flat grad;
    double length;
    int evaluations;
  };
  struct Point {
    double t, loss;
    Flat grad;
    double slope;
  };

  // The minimizer of the cubic through (t1, f1) and (t2, f2) with slopes g1 and g2, clamped
  // to [lo, hi]; their midpoint where the cubic has no minimum.
  static double cubic_minimum(const Point& a, const Point& b, double lo, double hi) {
    const double d1 = a.slope + b.slope - 3 * (a.loss - b.loss) / (a.t - b.t);
    const double d2_square = d1 * d1 - a.slope * b.slope;
    if (d2_square < 0) return (lo + hi) / 2;
    const double d2 = std::sqrt(d2_square);
    const double t = a.t <= b.t ? b.t - (b.t - a.t) * ((b.slope + d2 - d1) / (b.slope - a.slope + 2 * d2))
                                : a.t - (a.t - b.t) * ((a.slope + d2 - d1) / (a.slope - b.slope + 2 * d2));
    return std::min(std::max(t, lo), hi);
  }
  static double cubic_minimum(const Point& a, const Point& b) {
    return cubic_minimum(a, b, std::min(a.t, b.t), std::max(a.t, b.t));
  }

  // A step length along d from x satisfying the strong Wolfe conditions: bracketing by
  // extrapolation, then zooming into the bracket (Nocedal and Wright, algorithms 3.5 and 3.6).
  template <class P>
  Found strong_wolfe(P& problem, const Flat& x, const Flat& d, double t, double f, const Flat& g, double slope) const {
    constexpr double c1 = 1e-4, c2 = 0.9;
    constexpr int max_searches = 25;
    const double tolerance = options_.tolerance_change;
    const double d_norm = max_abs(d);
    auto at = [&](double length) {
      problem.set(x + d * length);
      auto [loss, grad] = problem.evaluate();
      const double s = dot(grad, d);
      return Point{length, loss, std::move(grad), s};
    };
    Point now = at(t);
    int evaluations = 1, searches = 0;
    Point before{0, f, g, slope};
    std::vector<Point> bracket;
    bool done = false;
    while (searches < max_searches) {
      if (now.loss > f + c1 * now.t * slope || (searches > 1 && now.loss >= before.loss)) {
        bracket = {before, now};
        break;
      }
      if (std::abs(now.slope) <= -c2 * slope) {
        bracket = {now};
        done = true;
        break;
      }
      if (now.slope >= 0) {
        bracket = {before, now};
        break;
      }
      const double next = cubic_minimum(before, now, now.t + 0.01 * (now.t - before.t), now.t * 10);
      before = now;
      now = at(next);
      ++evaluations;
      ++searches;
    }
    if (searches == max_searches) bracket = {Point{0, f, g, slope}, now};

    // Zoom: shrink the bracket around a point of sufficient decrease and small slope.
    bool little_progress = false;
    std::size_t low = 0, high = 1;
    if (bracket.size() == 2 && bracket[0].loss > bracket[1].loss) std::swap(low, high);
    while (!done && searches < max_searches) {
      const double lo = std::min(bracket[0].t, bracket[1].t), hi = std::max(bracket[0].t, bracket[1].t);
      if ((hi - lo) * d_norm < tolerance) break;
      double next = cubic_minimum(bracket[0], bracket[1]);
      // Away from the bracket's ends: a point too close to one is moved inside by a tenth,
      // the second time in a row or when it lies outside.
      const double margin = 0.1 * (hi - lo);
      if (std::min(hi - next, next - lo) < margin) {
        if (little_progress || next >= hi || next <= lo) {
          next = std::abs(next - hi) < std::abs(next - lo) ? hi - margin : lo + margin;
          little_progress = false;
        } else {
          little_progress = true;
        }
      } else {
        little_progress = false;
      }
      Point p = at(next);
      ++evaluations;
      ++searches;
      if (p.loss > f + c1 * p.t * slope || p.loss >= bracket[low].loss) {
        bracket[high] = std::move(p);
        if (bracket[0].loss <= bracket[1].loss) {
          low = 0;
          high = 1;
        } else {
          low = 1;
          high = 0;
        }
      } else {
        if (std::abs(p.slope) <= -c2 * slope) {
          done = true;
        } else if (p.slope * (bracket[high].t - bracket[low].t) >= 0) {
          bracket[high] = bracket[low];
        }
        bracket[low] = std::move(p);
      }
    }
    const Point& best = bracket[bracket.size() == 1 ? 0 : low];
    return {best.loss, best.grad, best.t, evaluations};
  }

  LbfgsOptions options_;
  std::optional<History> history_;
  std::int64_t evaluations_ = 0;
};

// B is the model's backend or its inner one, as for the other optimizers.
template <Backend B> using Lbfgs = LbfgsOptimizer<ParameterBackendOf<B>>;

}  // namespace kiln::optim
