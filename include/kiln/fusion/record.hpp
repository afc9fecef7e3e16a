// Fusion<B>'s recording: an elementwise program's outputs as pending tensors whose trees grow
// from their inputs' (elementwise), a cast of a pending tensor that changes no computation
// type (cast_pending), and a reduction along the last dim as a pending row reduction
// (reduce_rows). Part of kiln/fusion/backend.hpp, which includes it after the class; not a
// header of its own.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace kiln {

template <FusionTarget B>
auto Fusion<B>::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                            std::span<const double> params) -> std::vector<Primitive> {
  const Shape shape = codegen::check_elementwise_call<Fusion>(program, inputs, params);
  fusion::detail::Pending<Tensor> base;
  base.type = program.type();
  base.domain = shape;
  std::vector<codegen::NodePtr> replaced;
  std::unordered_map<const Tensor*, int> leaf_of;
  // The leaf index of t in this program, added if new.
  auto leaf_index = [&](const std::shared_ptr<Tensor>& t) {
    const auto [it, added] = leaf_of.emplace(t.get(), static_cast<int>(base.leaves.size()));
    if (added) base.leaves.push_back(t);
    return it->second;
  };
  auto add_leaf = [&](const std::shared_ptr<Tensor>& t) {
    return codegen::make_input(leaf_index(t), t->dtype == DType::boolean);
  };
  // The index in this program of the parameter `id`, added with value v if new (a program
  // has a few parameters: a scan is cheaper than a table).
  auto param_index = [&](std::uint64_t id, double v) {
    const auto it = std::find(base.param_ids.begin(), base.param_ids.end(), id);
    if (it != base.param_ids.end()) return static_cast<int>(it - base.param_ids.begin());
    base.params.push_back(v);
    base.param_ids.push_back(id);
    return static_cast<int>(base.params.size()) - 1;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::shared_ptr<Tensor>& t = inputs[i].node;
    // The same tensor twice (x * x): its tree once.
    if (auto j = std::find_if(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(i),
                              [&](const Primitive& p) { return p.node == t; });
        j != inputs.begin() + static_cast<std::ptrdiff_t>(i)) {
      replaced.push_back(replaced[static_cast<std::size_t>(j - inputs.begin())]);
      continue;
    }
    std::shared_ptr<const fusion::detail::Pending<Tensor>> grown;
    bool deferred = false;
    {
      const std::lock_guard lock(t->mutex);
      deferred = !t->value && t->deferred;
      if (!t->value && t->pending && fusable(*t->pending, t->dtype, base, inputs.size() - i - 1, params.size()) &&
          rows_fit(*t->pending, shape, base))
        grown = t->pending;
    }
    if (!grown) {
      if (!deferred) (void)value(inputs[i]);  // a deferred op stays a leaf to compute (epilogue_leaf)
      replaced.push_back(add_leaf(t));
      continue;
    }
    // The input's tree, its leaves and parameters renumbered into this program's. Its tree
    // is taken as it is where nothing changes number (the first input of a chain): a
    // chain's recording then costs its own nodes, not a copy of the tree so far.
    bool same_numbers = true;
    std::vector<int> indices, param_indices;
    for (const auto& leaf : grown->leaves) {
      indices.push_back(leaf_index(leaf));
      same_numbers = same_numbers && indices.back() == static_cast<int>(indices.size()) - 1;
    }
    for (std::size_t k = 0; k < grown->params.size(); ++k) {
      param_indices.push_back(param_index(grown->param_ids[k], grown->params[k]));
      same_numbers = same_numbers && param_indices.back() == static_cast<int>(k);
    }
    // The input's own sources come along, renumbered as its tree is; the input becomes one.
    base.sources.reserve(base.sources.size() + grown->sources.size() + 1);
    if (same_numbers) {
      replaced.push_back(grown->root);
      for (const auto& source : grown->sources)
        if (!source.tensor.expired()) base.sources.push_back(source);
    } else {
      std::vector<codegen::NodePtr> leaves;
      for (std::size_t k = 0; k < indices.size(); ++k)
        leaves.push_back(codegen::make_input(indices[k], grown->leaves[k]->dtype == DType::boolean));
      std::unordered_map<const codegen::Node*, codegen::NodePtr> done;
      replaced.push_back(fusion::detail::substitute(grown->root, leaves, param_indices, done));
      for (const auto& source : grown->sources)
        if (!source.tensor.expired())
          base.sources.push_back({source.tensor, fusion::detail::substitute(source.root, leaves, param_indices, done)});
    }
    base.sources.push_back({t, replaced.back()});
    base.nodes += grown->nodes;
    if (grown->reduces) {
      base.reduces = true;
      base.domain = grown->domain;
    }
  }
  std::vector<int> own_params;
  for (const double v : params) own_params.push_back(param_index(fusion::detail::new_param_id(), v));
  std::vector<Primitive> out;
  std::unordered_map<const codegen::Node*, codegen::NodePtr> done;
  const std::span<const codegen::ProgramOutput> outputs = program.outputs();
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const codegen::ProgramOutput& o = outputs[k];
    auto t = std::make_shared<Tensor>();
    t->shape = shape;
    t->dtype = o.dtype;
    t->device = inputs[0].node->device;
    codegen::NodePtr root = fusion::detail::substitute(o.root, replaced, own_params, done);
    auto pending = k + 1 == outputs.size() ? std::make_shared<fusion::detail::Pending<Tensor>>(std::move(base))
                                           : std::make_shared<fusion::detail::Pending<Tensor>>(base);
    pending->root = std::move(root);
    pending->nodes += program.code().size();
    t->pending = std::move(pending);
    ++counters().recorded;
    out.push_back({std::move(t)});
  }
  if (!out.empty()) add_reader(out, *out.back().node->pending);
  return out;
}

template <FusionTarget B>
auto Fusion<B>::cast_pending(const Primitive& p, DType dtype) -> std::optional<Primitive> {
  KILN_CHECK(p.node != nullptr, "{}: an empty tensor handle", name);
  std::shared_ptr<const fusion::detail::Pending<Tensor>> source;
  const DType from = p.node->dtype;
  {
    const std::lock_guard lock(p.node->mutex);
    if (p.node->value || !p.node->pending) return std::nullopt;
    source = p.node->pending;
  }
  if (source->reduces || dtype == from) return std::nullopt;
  const bool half = dtype == DType::f16 || dtype == DType::bf16;
  const bool to_half = half && from == DType::f32 && source->type == codegen::ScalarType::f32;
  const bool from_mask = from == DType::boolean && !half && dtype != DType::boolean &&
                         source->type != codegen::ScalarType::boolean &&
                         codegen::scalar_type_of(dtype) == source->type && source->nodes + 3 <= kMaxNodes;
  if (!to_half && !from_mask) return std::nullopt;
  auto pending = std::make_shared<fusion::detail::Pending<Tensor>>(*source);
  if (from_mask) {
    pending->root = codegen::make_node(codegen::Kind::select,
                                       {source->root, codegen::make_constant(1.0), codegen::make_constant(0.0)});
    pending->nodes += 3;
  }
  pending->sources.push_back({p.node, source->root});
  auto t = std::make_shared<Tensor>();
  t->shape = p.node->shape;
  t->dtype = dtype;
  t->device = p.node->device;
  t->pending = std::move(pending);
  ++counters().recorded;
  Primitive out{std::move(t)};
  add_reader(std::span(&out, 1), *out.node->pending);
  return out;
}

template <FusionTarget B>
auto Fusion<B>::reduce_rows(const Primitive& x, ops::ReduceOp op, std::int64_t dim) -> std::optional<Primitive> {
  KILN_CHECK(x.node != nullptr, "{}: an empty tensor handle", name);
  const Shape shape = x.node->shape;
  const auto rank = static_cast<std::int64_t>(shape.rank());
  if (op != ops::ReduceOp::sum && op != ops::ReduceOp::mean && op != ops::ReduceOp::max && op != ops::ReduceOp::min)
    return std::nullopt;
  if (rank == 0 || (dim != rank - 1 && dim != -1) || shape[shape.rank() - 1] < 2 || shape.numel() == 0)
    return std::nullopt;
  const DType dtype = x.node->dtype;
  if (dtype != DType::f32 && dtype != DType::f64) return std::nullopt;
  fusion::detail::Pending<Tensor> p;
  {
    const std::lock_guard lock(x.node->mutex);
    if (x.node->value) {
      p.root = codegen::make_input(0);
      p.leaves.push_back(x.node);
      p.type = codegen::scalar_type_of(dtype);
    } else if (x.node->pending && (!x.node->pending->reduces || x.node->pending->domain == shape)) {
      p = *x.node->pending;
      if (p.leaves.size() > kMaxLeaves || p.params.size() + 1 > kMaxParams || p.nodes + 3 > kMaxNodes) p = {};
      else p.sources.push_back({x.node, p.root});
    }
  }
  if (!p.root) {  // a pending x that cannot grow: materialised, then read as a leaf
    (void)value(x);
    p = {};
    p.root = codegen::make_input(0);
    p.leaves.push_back(x.node);
    p.type = codegen::scalar_type_of(dtype);
  }
  const codegen::Kind kind = op == ops::ReduceOp::max   ? codegen::Kind::row_max
                             : op == ops::ReduceOp::min ? codegen::Kind::row_min
                                                        : codegen::Kind::row_sum;
  p.root = codegen::make_node(kind, {p.root});
  if (op == ops::ReduceOp::mean) {
    p.root = codegen::make_node(codegen::Kind::mul, {p.root, codegen::make_param(static_cast<int>(p.params.size()))});
    p.params.push_back(1.0 / static_cast<double>(shape[shape.rank() - 1]));
    p.param_ids.push_back(fusion::detail::new_param_id());
  }
  p.nodes += 3;
  p.domain = shape;
  p.reduces = true;
  auto t = std::make_shared<Tensor>();
  t->shape = ops::keep_dim(shape, shape.rank() - 1);
  t->dtype = dtype;
  t->device = x.node->device;
  t->pending = std::make_shared<const fusion::detail::Pending<Tensor>>(std::move(p));
  ++counters().recorded;
  Primitive out{std::move(t)};
  add_reader(std::span(&out, 1), *out.node->pending);
  return out;
}

}  // namespace kiln
