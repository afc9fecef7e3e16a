// The graph behind Autodiff<B>: a node per op result that needs a gradient, linked to the
// nodes of its tracked inputs, with the op's backward rule as a closure over the tensors it
// saved. backward() walks the nodes from the root in reverse creation order (a node is
// always created after its inputs, so that order is topological), hands each its summed
// output gradient and frees its closure once it has run.
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln {

namespace autodiff {

inline bool& grad_mode() {
  thread_local bool enabled = true;
  return enabled;
}

// Nodes alive in this process (every inner backend together): tests watch it for leaks.
inline std::atomic<std::int64_t>& live_node_count() {
  static std::atomic<std::int64_t> count{0};
  return count;
}

inline std::uint64_t next_node_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// What a backward rule writes into: the gradient of each tracked input, by input position.
template <class P> class GradSink {
 public:
  explicit GradSink(std::vector<bool> needed) : needed_(std::move(needed)), grads_(needed_.size()) {}
  // Whether input i needs a gradient (inputs that do not require grad get none computed).
  bool needs(std::size_t i) const { return needed_[i]; }
  void put(std::size_t i, P grad) {
    if (needed_[i]) grads_[i] = std::move(grad);
  }
  std::optional<P>& at(std::size_t i) { return grads_[i]; }

 private:
  std::vector<bool> needed_;
  std::vector<std::optional<P>> grads_;
};

template <class P> struct Node {
  // dy is given up to the rule (an rvalue): a rule may pass it on as one (provided::unary,
  // unary_backward), so that the backend writes the input's gradient over it where nothing
  // else holds it. A rule taking `const P&` binds to it as well.
  using Backward = std::function<void(P&& dy, GradSink<P>& sink)>;

  std::uint64_t id = next_node_id();
  std::string_view op;                          // names the op in errors
  Shape shape;                                  // of the op's result (the shape its gradient must have)
  std::vector<std::shared_ptr<Node>> inputs;    // one per op input; null where the input is not tracked
  Backward backward;                            // empty for leaves
  bool released = false;                        // set once backward() has run (and freed) this node

  Node(std::string_view op_, Shape shape_) : op(op_), shape(std::move(shape_)) { ++live_node_count(); }
  ~Node() { --live_node_count(); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool is_leaf() const { return !released && !backward; }
};

}  // namespace autodiff

// Disables graph recording on this thread while it lives (torch::NoGradGuard): results are
// plain values that need no gradient, for inference and optimizer updates.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(autodiff::grad_mode()) { autodiff::grad_mode() = false; }
  ~NoGradGuard() { autodiff::grad_mode() = previous_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

inline bool is_grad_enabled() { return autodiff::grad_mode(); }

// The gradients of one backward pass: one inner-backend tensor per leaf that requires grad
// and was reached. Tensor::grad(grads) reads one.
template <class P> class Gradients {
 public:
  std::optional<P> get(std::uint64_t leaf) const {
    const auto it = grads_.find(leaf);
    if (it == grads_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<P> remove(std::uint64_t leaf) {
    const auto it = grads_.find(leaf);
    if (it == grads_.end()) return std::nullopt;
    P grad = std::move(it->second);
    grads_.erase(it);
    return grad;
  }
  void set(std::uint64_t leaf, P grad) { grads_.insert_or_assign(leaf, std::move(grad)); }
  std::size_t size() const { return grads_.size(); }
  bool empty() const { return grads_.empty(); }

 private:
  std::unordered_map<std::uint64_t, P> grads_;
};

namespace autodiff {

// Watches a backward pass on this thread while a BackwardObserverScope holds it: told each
// leaf's gradient as soon as it is final (every node that uses the leaf has run its rule),
// long before backward() returns. kiln::dist's DataParallel starts its gradient all-reduces
// from leaf_ready, so that they run while the rest of the backward pass does (as the hooks
// of PyTorch's DDP).
template <class P> class BackwardObserver {
 public:
  virtual ~BackwardObserver() = default;
  virtual void leaf_ready(std::uint64_t leaf, const P& grad) = 0;
};

template <class P> BackwardObserver<P>*& backward_observer() {
  thread_local BackwardObserver<P>* observer = nullptr;
  return observer;
}

// Installs `observer` for the backward passes run on this thread while it lives.
template <class P> class BackwardObserverScope {
 public:
  explicit BackwardObserverScope(BackwardObserver<P>& observer) : previous_(backward_observer<P>()) {
    backward_observer<P>() = &observer;
  }
  ~BackwardObserverScope() { backward_observer<P>() = previous_; }
  BackwardObserverScope(const BackwardObserverScope&) = delete;
  BackwardObserverScope& operator=(const BackwardObserverScope&) = delete;

 private:
  BackwardObserver<P>* previous_;
};

// The number of uses of each node (by id) among the nodes reachable from `root`: a node's
// gradient is final once that many of its users have run their rules.
template <class P> std::unordered_map<std::uint64_t, std::int64_t> count_uses(const std::shared_ptr<Node<P>>& root) {
  std::unordered_map<std::uint64_t, std::int64_t> uses;
  std::vector<const Node<P>*> stack{root.get()};
  uses.emplace(root->id, 0);
  while (!stack.empty()) {
    const Node<P>* node = stack.back();
    stack.pop_back();
    for (const auto& input : node->inputs) {
      if (!input) continue;
      auto [slot, fresh] = uses.try_emplace(input->id, 0);
      ++slot->second;
      if (fresh) stack.push_back(input.get());
    }
  }
  return uses;
}

// Runs the backward pass from `root` whose gradient is `seed`. `add` sums two gradients
// (given up, as rvalues) and `shape_of` reads one's shape (both from the inner backend).
template <class P, class Add, class ShapeOf>
Gradients<P> run_backward(const std::shared_ptr<Node<P>>& root, P seed, Add&& add, ShapeOf&& shape_of) {
  KILN_CHECK(!root->released,
             "backward: the graph of this {} result was already freed by an earlier backward(); recompute the "
             "forward pass to differentiate again",
             root->op);
  BackwardObserver<P>* const observer = backward_observer<P>();
  std::unordered_map<std::uint64_t, std::int64_t> uses;
  if (observer) uses = count_uses(root);
  Gradients<P> result;
  std::unordered_map<std::uint64_t, P> pending;
  const auto later_first = [](const std::shared_ptr<Node<P>>& a, const std::shared_ptr<Node<P>>& b) {
    return a->id < b->id;
  };
  std::priority_queue<std::shared_ptr<Node<P>>, std::vector<std::shared_ptr<Node<P>>>, decltype(later_first)> queue(
      later_first);
  pending.emplace(root->id, std::move(seed));
  queue.push(root);
  while (!queue.empty()) {
    const std::shared_ptr<Node<P>> node = queue.top();
    queue.pop();
    auto it = pending.find(node->id);
    P grad = std::move(it->second);
    pending.erase(it);
    if (node->is_leaf()) {
      result.set(node->id, std::move(grad));
      continue;
    }
    KILN_CHECK(!node->released,
               "backward: the graph through a {} result was already freed by an earlier backward(); recompute the "
               "forward pass to differentiate again",
               node->op);
    std::vector<bool> needed(node->inputs.size());
    for (std::size_t i = 0; i < needed.size(); ++i) needed[i] = node->inputs[i] != nullptr;
    GradSink<P> sink(std::move(needed));
    node->backward(std::move(grad), sink);
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      auto& input = node->inputs[i];
      if (!input) continue;
      if (sink.at(i)) {
        P& g = *sink.at(i);
        KILN_CHECK(shape_of(g) == input->shape, "backward of {}: the gradient of input {} has shape {}, expected {}",
                   node->op, i, shape_of(g), input->shape);
        // Both gradients are given up to `add`, which may write the sum over one of them.
        auto [slot, fresh] = pending.try_emplace(input->id, std::move(g));
        if (fresh) queue.push(input);
        else slot->second = add(std::move(slot->second), std::move(g));
      }
      if (observer && --uses[input->id] == 0 && input->is_leaf()) {
        const auto ready = pending.find(input->id);
        if (ready != pending.end()) observer->leaf_ready(input->id, ready->second);
      }
    }
    // Free the saved tensors and the links now: the graph is used once, as in PyTorch.
    node->backward = nullptr;
    node->inputs.clear();
    node->released = true;
  }
  if (observer && root->is_leaf()) observer->leaf_ready(root->id, *result.get(root->id));
  return result;
}

}  // namespace autodiff
}  // namespace kiln
