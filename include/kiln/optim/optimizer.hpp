// Optimizer<B, Rule>: updates the trainable parameters of a module on Autodiff<B> from
// their gradients, keeping per-parameter state (momentum, moments, step counts) by
// parameter id. The update of one parameter is its Rule's (optim/rules.hpp: SGD, Adam,
// AdamW, RMSProp, AdaGrad, Lion, NAdam, RAdam, Adamax, Adadelta, ASGD, Rprop, Adan, Muon), computed on the inner backend over the parameter
// flattened to 1-d. The state can be saved and restored (state_dict / load_state_dict,
// keyed by parameter path: "layers.0.weight.exp_avg"). Parameter groups (torch.optim's
// param_groups) give the parameters whose path a group selects options of their own and a
// factor on the step's learning rate.
//
//   optim::Adam<Cpu> adam({.weight_decay = 0.01});
//   adam.add_group(optim::paths_ending_with({"bias"}), {.weight_decay = 0});
//   auto grads = loss.backward();
//   adam.step(1e-3, model, grads);
#pragma once

#include "kiln/optim/gradients.hpp"

#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::optim {

// The state every rule keeps besides its tensors: the number of updates so far. A saved
// count beyond `max` (2^53, exact in a double, more updates than any run takes) is refused
// by load_state_dict, so that counting on from it cannot overflow.
struct StepCount {
  static constexpr std::int64_t max = std::int64_t{1} << 53;
  std::int64_t step = 0;
};

// The backend an optimizer computes on, from the backend a model is written for: the inner
// backend of Autodiff<B>, or B itself. optim::Adam<Autodiff<Cpu>> (as a Burn user writes)
// is optim::Adam<Cpu>.
template <Backend B> struct ParameterBackend {
  using type = B;
};
template <AutodiffBackend B> struct ParameterBackend<B> {
  using type = typename B::Inner;
};
template <Backend B> using ParameterBackendOf = typename ParameterBackend<B>::type;

// Which parameters a group takes, by the parameter's path in the module ("layers.0.bias").
using ParamSelector = std::function<bool(std::string_view path)>;

// The parameters whose path ends with one of `suffixes` ("bias", "norm.weight"); a suffix
// matches whole path components only ("bias" takes "fc.bias" and "bias", not "fc.unbias").
inline ParamSelector paths_ending_with(std::initializer_list<std::string_view> suffixes) {
  return [names = std::vector<std::string>(suffixes.begin(), suffixes.end())](std::string_view path) {
    for (const std::string& name : names) {
      if (path.size() < name.size() || path.substr(path.size() - name.size()) != name) continue;
      if (path.size() == name.size() || path[path.size() - name.size() - 1] == '.') return true;
    }
    return false;
  };
}

template <Backend B, class Rule> class Optimizer {
  static_assert(!AutodiffBackend<B>,
                "Optimizer<B, Rule> takes the inner backend of the model's Autodiff<B> (Optimizer<Cpu, Rule> for a "
                "model on Autodiff<Cpu>); the aliases optim::Adam<B>, optim::Sgd<B>... accept either");

 public:
  using Options = typename Rule::Options;
  using State = typename Rule::template State<B>;
  using Backend = B;  // where the gradients and the state are (GradientsParams<Backend>)

  Optimizer() = default;
  explicit Optimizer(const Options& options) : rule_{options} {}
  // The options of the parameters no group takes.
  const Options& options() const { return rule_.options; }

  // A parameter group: the parameters `select` takes are updated with `options` and a
  // learning rate of `lr_scale` times the step's (torch.optim's group lr is the base rate
  // times that factor; a scheduler's rate then scales every group alike). A parameter goes
  // to the first group, in the order they were added, that takes it; the others keep the
  // optimizer's options and the step's rate. Its state (moments, step count) stays its own
  // whichever group it is in, and state_dict / load_state_dict are unchanged.
  Optimizer& add_group(ParamSelector select, const Options& options, double lr_scale = 1.0) {
    KILN_CHECK(static_cast<bool>(select), "{}: add_group needs a selector of parameter paths", Rule::name);
    KILN_CHECK(std::isfinite(lr_scale) && lr_scale >= 0, "{}: a group's lr_scale must be finite and >= 0, got {}",
               Rule::name, lr_scale);
    groups_.push_back({std::move(select), Rule{options}, lr_scale});
    return *this;
  }
  std::size_t group_count() const { return groups_.size(); }

  // One update, with learning rate lr, of every trainable parameter of `module` that has a
  // gradient in `grads`; the others are left as they are.
  template <nn::Module M> void step(double lr, M& module, const GradientsParams<B>& grads) {
    nn::for_each_param(module, [&](const std::string& path, auto& p) {
      if (!p.trainable()) return;
      const auto g = grads.get(p.id());
      if (!g) return;
      using T = std::remove_cvref_t<decltype(p.val())>;
      static_assert(std::is_same_v<typename T::InnerBackend, B>,
                    "Optimizer<B>: the module's parameters must be tensors of Autodiff<B>");
      const Shape shape = p->shape();
      KILN_CHECK(B::shape(*g) == shape, "{}: the gradient of {} has shape {}, the parameter {}", Rule::name, path,
                 B::shape(*g), shape);
      const Shape flat{shape.numel()};
      State& state = state_[p.id()];
      ++state.step;
      const Rule* rule = &rule_;
      double rate = lr;
      for (const Group& group : groups_) {
        if (!group.select(path)) continue;
        rule = &group.rule;
        rate = lr * group.lr_scale;
        break;
      }
      // torch's maximize: every rule ascends by seeing the negated gradient.
      Tensor<B, 1> grad(B::reshape(*g, flat));
      if (rule->options.maximize) grad = -grad;
      // The parameter is taken out of the module, so that a rule that writes over it (Adam's
      // fused step) finds its buffer held by nothing else; a rule that throws leaves it whole
      // (optim/rules.hpp), and it is put back.
      Tensor<B, 1> param(B::reshape(p.take().into_inner().primitive(), flat));
      const auto put = [&](const Tensor<B, 1>& value) {
        p.replace(T::from_inner(typename T::InnerTensor(B::reshape(value.primitive(), shape))));
      };
      // A rule that works on the parameter's shape (Muon's matrices) is given it.
      const Tensor<B, 1> updated = [&] {
        try {
          if constexpr (requires { rule->update(rate, std::move(param), grad, state, shape); }) {
            return rule->update(rate, std::move(param), grad, state, shape);
          } else {
            return rule->update(rate, std::move(param), grad, state);
          }
        } catch (...) {
          put(param);
          throw;
        }
      }();
      put(updated);
    });
  }
  // The same from a backward pass's gradients (they are taken out of `grads`).
  template <nn::Module M> void step(double lr, M& module, Gradients<typename B::Primitive>& grads) {
    step(lr, module, GradientsParams<B>::from(module, grads));
  }

  // The state of `module`'s parameters: "<path>.<name>" for each state tensor (shaped like
  // the parameter) and "<path>.step" (i64 [1]).
  template <nn::Module M> std::vector<std::pair<std::string, TensorData>> state_dict(const M& module) const {
    std::vector<std::pair<std::string, TensorData>> out;
    nn::for_each_param(module, [&](const std::string& path, const auto& p) {
      const auto it = state_.find(p.id());
      if (it == state_.end()) return;
      State& s = const_cast<State&>(it->second);
      Rule::each(s, [&](std::string_view name, std::optional<Tensor<B, 1>>& t) {
        if (t) out.emplace_back(path + "." + std::string(name), t->into_data().reshaped(p->shape()));
      });
      out.emplace_back(path + ".step", TensorData::from(std::vector<std::int64_t>{s.step}, Shape{1}));
    });
    return out;
  }
  // Restores what state_dict saved, for `module`'s parameters (matched by path). A state
  // tensor whose shape differs from its parameter's is an error naming both.
  template <nn::Module M> void load_state_dict(const M& module, const std::map<std::string, TensorData>& saved) {
    nn::for_each_param(module, [&](const std::string& path, const auto& p) {
      const auto step = saved.find(path + ".step");
      if (step == saved.end()) return;
      KILN_CHECK(step->second.numel() == 1 && !is_float(step->second.dtype()),
                 "{}: saved state {}.step must be one integer, got {} {}", Rule::name, path, step->second.shape(),
                 step->second.dtype());
      State s;
      s.step = step->second.dtype() == DType::i64 ? step->second.template as<std::int64_t>()[0]
                                                  : step->second.template to_vec<std::int64_t>()[0];
      KILN_CHECK(s.step >= 0 && s.step <= StepCount::max,
                 "{}: saved state {}.step is {}, outside [0, {}] (2^53, more updates than any run takes); the saved "
                 "state is damaged",
                 Rule::name, path, s.step, StepCount::max);
      Rule::each(s, [&](std::string_view name, std::optional<Tensor<B, 1>>& t) {
        const auto it = saved.find(path + "." + std::string(name));
        if (it == saved.end()) return;
        KILN_CHECK(it->second.shape() == p->shape(), "{}: saved state {}.{} has shape {}, the parameter {}",
                   Rule::name, path, name, it->second.shape(), p->shape());
        t = Tensor<B, 1>::from_data(it->second.reshaped(Shape{p->numel()}).convert(p->dtype()), p->device());
      });
      state_[p.id()] = std::move(s);
    });
  }

 private:
  struct Group {
    ParamSelector select;
    Rule rule;
    double lr_scale = 1.0;
  };
  Rule rule_;
  std::vector<Group> groups_;
  std::unordered_map<nn::ParamId, State> state_;
};

}  // namespace kiln::optim
