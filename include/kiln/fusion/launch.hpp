// Fusion<B>'s launches: materialising a pending tensor (value), the plan of what one launch
// computes (launch_plan: the tree, its leaves, the intermediates written beside it), matmul
// and conv epilogues (epilogue_leaf, run_epilogue), and the counters and log of each launch
// (note_launch). Part of kiln/fusion/backend.hpp, which includes it after the class; not a
// header of its own.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

namespace kiln {

template <FusionTarget B>
typename Fusion<B>::InnerPrimitive Fusion<B>::value(const Primitive& p) {
  KILN_CHECK(p.node != nullptr, "{}: an empty tensor handle", name);
  Tensor& t = *p.node;
  const std::lock_guard lock(t.mutex);
  if (t.value) return *t.value;
  if (t.view) {
    set_value(t, t.view());
    return *t.value;
  }
  if (t.deferred) {
    set_value(t, t.deferred->compute());
    return *t.value;
  }
  const fusion::detail::Pending<Tensor>& pending = *t.pending;
  const LaunchPlan plan = launch_plan(t, pending);
  // Leaves that are deferred ops not computed yet: one may be computed with this program as
  // its epilogue (run_epilogue), the others are computed first.
  const std::optional<std::size_t> epilogue = epilogue_leaf(t, pending, plan);
  for (std::size_t k = 0; k < plan.leaves.size(); ++k)
    if (k != epilogue && !plan.leaves[k]->done) (void)value(Primitive{plan.leaves[k]});
  if (epilogue && run_epilogue(t, pending, plan, *epilogue)) return *t.value;
  if (epilogue) (void)value(Primitive{plan.leaves[*epilogue]});
  std::vector<DType> dtypes;
  std::vector<InnerPrimitive> inputs;
  for (const auto& leaf : plan.leaves) {
    dtypes.push_back(leaf->dtype);
    inputs.push_back(*leaf->value);  // leaves are materialised before they become leaves
  }
  const auto per_row = [&](const Tensor& o) { return plan.reduces && o.shape != pending.domain; };
  std::vector<codegen::ProgramOutput> outputs{{plan.root, t.dtype, per_row(t)}};
  for (const auto& [tensor, root] : plan.extra) outputs.push_back({root, tensor->dtype, per_row(*tensor)});
  const codegen::Program program(pending.type, std::move(dtypes), static_cast<int>(pending.params.size()),
                                 std::move(outputs));
  std::vector<Shape> output_shapes{t.shape};
  for (const auto& e : plan.extra) output_shapes.push_back(e.first->shape);
  note_launch(program, plan.leaves, output_shapes, false);
  counters().reused += plan.reused;
  std::vector<InnerPrimitive> results;
  if constexpr (RowPrograms<B>) {
    if (plan.reduces) results = B::row_program(program, inputs, pending.params, pending.domain);
  }
  if (results.empty()) results = B::elementwise(program, inputs, pending.params);
  // The intermediates written beside t: each keeps the value computed here, unless another
  // thread materialised it meanwhile (the same values).
  for (std::size_t k = 0; k < plan.extra.size(); ++k) {
    Tensor& o = *plan.extra[k].first;
    const std::lock_guard other(o.mutex);
    if (!o.value) set_value(o, std::move(results[k + 1]));
  }
  set_value(t, std::move(results[0]));  // the tree and the leaves it held go
  return *t.value;
}

template <FusionTarget B>
void Fusion<B>::note_launch(const codegen::Program& program, std::span<const std::shared_ptr<Tensor>> leaves,
                        std::span<const Shape> output_shapes, bool epilogue) {
  static fusion::detail::SeenPrograms seen;
  const bool compiled = seen.first(program.id());
  ++counters().launched;
  ++(compiled ? counters().compiled : counters().cached);
  counters().written += output_shapes.size();
  if (epilogue) ++counters().epilogues;
  if (!fusion::detail::log_enabled()) return;
  std::vector<Shape> shapes;
  for (const auto& leaf : leaves) shapes.push_back(leaf->shape);
  std::vector<std::string> runs;
  if (epilogue) {
    runs.push_back("epilogue of a matmul or conv (in0 is its result)");
  } else if constexpr (requires { B::program_steps(program); }) {
    if (codegen::is_float(program.type())) runs = B::program_steps(program);
  }
  fusion::detail::log_launch(name, program, compiled, shapes, output_shapes, runs);
}

template <FusionTarget B>
std::optional<std::size_t> Fusion<B>::epilogue_leaf(const Tensor& t, const fusion::detail::Pending<Tensor>& pending,
                                                const LaunchPlan& plan) {
  if (plan.reduces || !plan.extra.empty()) return std::nullopt;
  for (std::size_t k = 0; k < plan.leaves.size(); ++k) {
    const std::shared_ptr<Tensor>& leaf = plan.leaves[k];
    if (leaf->done || leaf->retained || leaf->shape != t.shape) continue;
    std::vector<const Tensor*> inside{&t};
    bool blocked = false;
    for (const auto& source : pending.sources) {
      const std::shared_ptr<Tensor> s = source.tensor.lock();
      if (!s || s->done) continue;
      inside.push_back(s.get());
      blocked = blocked || s->retained;  // (a retained source may not hold the leaf: a false no is safe)
    }
    if (blocked) continue;
    const std::lock_guard lock(leaf->mutex);
    if (leaf->value || !leaf->deferred) continue;
    const bool read_outside = std::any_of(leaf->readers.begin(), leaf->readers.end(), [&](const auto& r) {
      const std::shared_ptr<Tensor> reader = r.lock();
      return reader && !reader->done && std::find(inside.begin(), inside.end(), reader.get()) == inside.end();
    });
    if (!read_outside) return k;
  }
  return std::nullopt;
}

template <FusionTarget B>
bool Fusion<B>::run_epilogue(Tensor& t, const fusion::detail::Pending<Tensor>& pending, const LaunchPlan& plan,
                         std::size_t k) {
  {
    std::vector<int> index(plan.leaves.size(), 0);
    std::vector<DType> dtypes{plan.leaves[k]->dtype};
    std::vector<std::shared_ptr<Tensor>> leaves{plan.leaves[k]};
    std::vector<InnerPrimitive> inputs;
    for (std::size_t j = 0; j < plan.leaves.size(); ++j) {
      if (j == k) continue;
      index[j] = static_cast<int>(leaves.size());
      leaves.push_back(plan.leaves[j]);
      dtypes.push_back(plan.leaves[j]->dtype);
      inputs.push_back(*plan.leaves[j]->value);
    }
    const codegen::Program program(pending.type, std::move(dtypes), static_cast<int>(pending.params.size()),
                                   {{fusion::detail::renumber_inputs(plan.root, index), t.dtype, false}});
    // Only this launch holds the deferred op.
    std::vector<InnerPrimitive> results = plan.leaves[k]->deferred->with_epilogue(program, inputs, pending.params);
    if (results.empty()) return false;
    note_launch(program, leaves, std::span(&t.shape, 1), true);
    counters().reused += plan.reused;
    set_value(t, std::move(results[0]));
    return true;
  }
}

template <FusionTarget B>
typename Fusion<B>::LaunchPlan Fusion<B>::launch_plan(const Tensor& t, const fusion::detail::Pending<Tensor>& pending) {
  LaunchPlan plan{pending.root, pending.leaves, pending.reduces, {}, 0};
  if (pending.sources.empty()) return plan;
  // The live sources, once each (`inside`: computed by this launch, with t; a source's root
  // is a node of t's tree): materialised ones worth reading become leaves, pending ones are
  // candidates for an extra output. Scans, not sets: a launch has a few sources.
  std::vector<const Tensor*> inside{&t};
  std::unordered_map<const codegen::Node*, codegen::NodePtr> leaf_of;
  std::vector<std::pair<std::shared_ptr<Tensor>, codegen::NodePtr>> candidates;
  for (const auto& source : pending.sources) {
    std::shared_ptr<Tensor> s = source.tensor.lock();
    if (!s || std::find(inside.begin(), inside.end(), s.get()) != inside.end()) continue;
    inside.push_back(s.get());
    if (!s->done) {
      candidates.emplace_back(std::move(s), source.root);
      continue;
    }
    if (plan.leaves.size() >= kMaxLeaves || leaf_of.contains(source.root.get()) ||
        !fusion::detail::worth_storing(*source.root))
      continue;
    leaf_of.emplace(source.root.get(),
                    codegen::make_input(static_cast<int>(plan.leaves.size()), s->dtype == DType::boolean));
    plan.leaves.push_back(std::move(s));
  }
  const auto reuse = [&](const codegen::NodePtr& root) {
    return leaf_of.empty() ? root : fusion::detail::replace_nodes(root, leaf_of);
  };
  const auto used_by = [&](std::span<const codegen::NodePtr> roots) {
    return codegen::inputs_read(roots, plan.leaves.size());
  };
  // The shape the leaves `used` broadcast to: an elementwise program's.
  const auto shape_of = [&](const std::vector<bool>& used) {
    std::optional<Shape> shape;
    for (std::size_t k = 0; k < used.size(); ++k)
      if (used[k]) shape = shape ? broadcast_shapes(name, *shape, plan.leaves[k]->shape) : plan.leaves[k]->shape;
    return shape;
  };
  plan.root = reuse(pending.root);
  if (!leaf_of.empty() && pending.reduces && !fusion::detail::has_row_reduction(plan.root)) {
    // Every reduction became a leaf: an elementwise program over the leaves it still reads,
    // where they broadcast to t's shape; else t is computed as recorded.
    if (shape_of(used_by(std::span(&plan.root, 1))) == t.shape) {
      plan.reduces = false;
    } else {
      leaf_of.clear();
      plan.root = pending.root;
      plan.leaves.resize(pending.leaves.size());
    }
  }
  const Shape domain = plan.reduces ? pending.domain : t.shape;
  const std::optional<Shape> row_shape =
      plan.reduces ? std::optional(ops::keep_dim(domain, domain.rank() - 1)) : std::nullopt;
  for (auto& [s, root] : candidates) {
    if (plan.extra.size() + 1 >= kMaxOutputs) break;
    if (s->shape != domain && s->shape != row_shape) continue;
    bool read_outside = false;
    {
      const std::lock_guard lock(s->mutex);
      if (s->value) continue;
      if (s->shape != domain && !s->pending->reduces) continue;  // one value per row, not a reduction
      // (Reading other tensors' atomics and control blocks only: no lock but s's.)
      read_outside = std::any_of(s->readers.begin(), s->readers.end(), [&](const std::weak_ptr<Tensor>& r) {
        const std::shared_ptr<Tensor> reader = r.lock();
        return reader && !reader->done && std::find(inside.begin(), inside.end(), reader.get()) == inside.end();
      });
    }
    if (read_outside && fusion::detail::worth_storing(*root)) plan.extra.emplace_back(s, reuse(root));
  }
  if (leaf_of.empty()) return plan;
  // Leaves that no output reads any more (a reused subtree was their only reader) go, where
  // the rest still give an elementwise program its shape (a program that reads no leaf,
  // a gradient that is a constant, keeps them).
  std::vector<codegen::NodePtr> roots{plan.root};
  for (const auto& e : plan.extra) roots.push_back(e.second);
  const std::vector<bool> used = used_by(roots);
  for (std::size_t k = pending.leaves.size(); k < used.size(); ++k) plan.reused += used[k] ? 1 : 0;
  if (plan.reused == 0 || std::find(used.begin(), used.end(), false) == used.end()) return plan;
  if (!plan.reduces && shape_of(used) != t.shape) return plan;
  std::vector<int> index(plan.leaves.size(), -1);
  std::vector<std::shared_ptr<Tensor>> kept;
  for (std::size_t k = 0; k < plan.leaves.size(); ++k) {
    if (!used[k]) continue;
    index[k] = static_cast<int>(kept.size());
    kept.push_back(plan.leaves[k]);
  }
  plan.root = fusion::detail::renumber_inputs(plan.root, index);
  for (auto& e : plan.extra) e.second = fusion::detail::renumber_inputs(e.second, index);
  plan.leaves = std::move(kept);
  return plan;
}

}  // namespace kiln
