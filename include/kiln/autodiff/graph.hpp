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
  using Backward = std::function<void(const P& dy, GradSink<P>& sink)>;

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

// Runs the backward pass from `root` whose gradient is `seed`. `add` sums two gradients
// and `shape_of` reads one's shape (both from the inner backend).
template <class P, class Add, class ShapeOf>
Gradients<P> run_backward(const std::shared_ptr<Node<P>>& root, P seed, Add&& add, ShapeOf&& shape_of) {
  KILN_CHECK(!root->released,
             "backward: the graph of this {} result was already freed by an earlier backward(); recompute the "
             "forward pass to differentiate again",
             root->op);
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
    node->backward(grad, sink);
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      auto& input = node->inputs[i];
      if (!input || !sink.at(i)) continue;
      P& g = *sink.at(i);
      KILN_CHECK(shape_of(g) == input->shape, "backward of {}: the gradient of input {} has shape {}, expected {}",
                 node->op, i, shape_of(g), input->shape);
      auto [slot, fresh] = pending.try_emplace(input->id, g);
      if (fresh) queue.push(input);
      else slot->second = add(slot->second, g);
    }
    // Free the saved tensors and the links now: the graph is used once, as in PyTorch.
    node->backward = nullptr;
    node->inputs.clear();
    node->released = true;
  }
  return result;
}

}  // namespace autodiff
}  // namespace kiln
