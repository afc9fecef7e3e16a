// ONNX's control flow: If, Loop, Scan and SequenceMap, whose bodies are subgraphs (graph
// attributes) that the node's GraphRunner made ready to run (kiln/onnx/model.hpp). A body
// reads its formal inputs and, by name, the values around it; Args::run_subgraph runs it.
// The loops run on the host's control: one body run per iteration, the loop-carried values
// passed from one to the next, the scan outputs stacked at the end.
#pragma once

#include "kiln/onnx/ops_sequence.hpp"
#include "kiln/onnx/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace kiln::onnx {

namespace control_detail {

template <class B> using Outs = std::vector<Value<B>>;
using sequence_detail::host_bool;
using sequence_detail::host_scalar;

// A bool scalar input's value (If's condition, Loop's).
template <class B> bool truth(const Value<B>& v, std::string_view what) {
  const TensorData& d = v.data();
  KILN_CHECK(d.dtype() == DType::boolean && d.numel() == 1, "{} must be one bool, got {} {}", what, d.shape(), d.dtype());
  return d.to_vec<double>()[0] != 0.0;
}

// A subgraph's outputs, checked to be as many as the node expects.
template <class B> void expect_outputs(const Outs<B>& outs, std::size_t count, std::string_view what) {
  KILN_CHECK(outs.size() == count, "{} returns {} values, expected {}", what, outs.size(), count);
}

// Scan outputs of a loop: the values of each iteration stacked along `axis` (reversed first
// where `reverse`).
template <class B> Value<B> stacked(std::vector<Value<B>> parts, std::int64_t axis, bool reverse) {
  if (reverse) std::reverse(parts.begin(), parts.end());
  return sequence_detail::join<B>(parts, axis, true, "the scan outputs");
}

template <class B> Outs<B> if_op(const Args<B>& a) {
  const bool branch = truth(a.value(0), "the condition");
  Outs<B> outs = a.run_subgraph(branch ? "then_branch" : "else_branch", {});
  return outs;
}

// Loop(M, cond, v...): while the iteration count is below M (when given) and cond (when given)
// holds, body(i, cond, v...) gives (cond, v..., scan values...).
template <class B> Outs<B> loop_op(const Args<B>& a) {
  const std::int64_t trip = a.has(0) ? a.ints(0).at(0) : std::numeric_limits<std::int64_t>::max();
  bool keep = a.has(1) ? truth(a.value(1), "the condition") : true;
  std::vector<Value<B>> carried;
  for (std::size_t i = 2; i < a.size(); ++i) carried.push_back(a.value(i));
  const std::size_t scans = a.node.outputs.size() > carried.size() ? a.node.outputs.size() - carried.size() : 0;
  std::vector<std::vector<Value<B>>> scanned(scans);
  const std::size_t carried_count = carried.size();
  for (std::int64_t i = 0; i < trip && keep; ++i) {
    std::vector<Value<B>> inputs{host_scalar<B>(i, a.device), host_bool<B>(keep, a.device)};
    inputs.insert(inputs.end(), carried.begin(), carried.end());
    Outs<B> outs = a.run_subgraph("body", std::move(inputs));
    expect_outputs(outs, 1 + carried.size() + scans, "the body");
    keep = truth(outs[0], "the body's condition output");
    for (std::size_t k = 0; k < carried.size(); ++k) carried[k] = std::move(outs[1 + k]);
    for (std::size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(outs[1 + carried.size() + k]));
  }
  Outs<B> out = std::move(carried);
  for (std::size_t k = 0; k < scans; ++k) {
    if (!scanned[k].empty()) {
      out.push_back(stacked<B>(std::move(scanned[k]), 0, false));
      continue;
    }
    // No iteration ran: an empty tensor [0] of the body output's declared element type.
    const std::vector<ValueInfo>& declared = a.subgraph("body").runner->outputs();
    const std::size_t at = 1 + carried_count + k;
    const ElementType type = at < declared.size() ? declared[at].type : ElementType::undefined;
    const std::optional<DType> held = held_dtype_of(type);
    KILN_CHECK(held.has_value(), "the loop ran no iteration, and the body declares no element type for scan output {}",
               k);
    Value<B> empty = Value<B>::host(TensorData(std::vector<std::byte>{}, Shape{0}, *held), a.device);
    out.push_back(dtype_of(type) ? empty : Value<B>::typed(std::move(empty), type));
  }
  return out;
}

// Scan over the state values and the scan inputs (opset 9 on): body(state..., slices...) gives
// (state..., scan values...), one run per index along the scan inputs' axes.
template <class B> Outs<B> scan_unbatched(const Args<B>& a, std::vector<Value<B>> state, std::vector<Value<B>> inputs) {
  const std::size_t m = inputs.size();
  const auto in_axes = a.node.attr_ints("scan_input_axes", std::vector<std::int64_t>(m, 0));
  const auto in_dirs = a.node.attr_ints("scan_input_directions", std::vector<std::int64_t>(m, 0));
  KILN_CHECK(in_axes.size() == m && in_dirs.size() == m, "scan_input_axes {} and scan_input_directions {} need {} entries",
             in_axes, in_dirs, m);
  KILN_CHECK(m > 0, "num_scan_inputs must be at least 1");
  std::vector<std::size_t> dims(m);
  std::int64_t length = -1;
  for (std::size_t j = 0; j < m; ++j) {
    const Shape s = inputs[j].shape();
    dims[j] = detail::axis(in_axes[j], s.rank(), "scan_input_axes entry");
    KILN_CHECK(length < 0 || s[dims[j]] == length, "scan input {} has {} elements along dim {}, scan input 0 {}", j,
               s[dims[j]], dims[j], length);
    length = s[dims[j]];
  }
  const std::size_t outputs = a.node.outputs.size();
  KILN_CHECK(outputs >= state.size(), "Scan has {} outputs for {} state values", outputs, state.size());
  const std::size_t k_scans = outputs - state.size();
  const auto out_axes = a.node.attr_ints("scan_output_axes", std::vector<std::int64_t>(k_scans, 0));
  const auto out_dirs = a.node.attr_ints("scan_output_directions", std::vector<std::int64_t>(k_scans, 0));
  KILN_CHECK(out_axes.size() == k_scans && out_dirs.size() == k_scans,
             "scan_output_axes {} and scan_output_directions {} need {} entries", out_axes, out_dirs, k_scans);
  std::vector<std::vector<Value<B>>> scanned(k_scans);
  for (std::int64_t i = 0; i < length; ++i) {
    std::vector<Value<B>> body_inputs = state;
    for (std::size_t j = 0; j < m; ++j)
      body_inputs.push_back(sequence_detail::take(inputs[j], dims[j], in_dirs[j] != 0 ? length - 1 - i : i));
    Outs<B> outs = a.run_subgraph("body", std::move(body_inputs));
    expect_outputs(outs, outputs, "the body");
    for (std::size_t k = 0; k < state.size(); ++k) state[k] = std::move(outs[k]);
    for (std::size_t k = 0; k < k_scans; ++k) scanned[k].push_back(std::move(outs[state.size() + k]));
  }
  Outs<B> out = std::move(state);
  for (std::size_t k = 0; k < k_scans; ++k) {
    KILN_CHECK(!scanned[k].empty(), "the scan inputs are empty, so the scan outputs' shapes are unknown");
    const std::int64_t rank = static_cast<std::int64_t>(scanned[k][0].rank()) + 1;
    KILN_CHECK(out_axes[k] >= -rank && out_axes[k] < rank, "scan_output_axes entry {} is out of range for rank {}",
               out_axes[k], rank);
    out.push_back(stacked<B>(std::move(scanned[k]), out_axes[k], out_dirs[k] != 0));
  }
  return out;
}

template <class B> Outs<B> scan_op(const Args<B>& a) {
  const auto m = static_cast<std::size_t>(a.node.attr_int("num_scan_inputs", 0));
  if (a.opset >= 9) {
    KILN_CHECK(m >= 1 && m <= a.size(), "num_scan_inputs {} for {} inputs", m, a.size());
    const std::size_t n = a.size() - m;
    std::vector<Value<B>> state, inputs;
    for (std::size_t i = 0; i < n; ++i) state.push_back(a.value(i));
    for (std::size_t i = n; i < a.size(); ++i) inputs.push_back(a.value(i));
    return scan_unbatched(a, std::move(state), std::move(inputs));
  }
  // Opset 8: input 0 is the optional sequence_lens, every value has a batch dim first, and the
  // scan runs along dim 1; one scan per batch entry, its results stacked along the batch dim.
  KILN_CHECK(m >= 1 && m + 1 <= a.size(), "num_scan_inputs {} for {} inputs", m, a.size());
  KILN_CHECK(!a.node.find("directions") || a.node.attr_ints("directions") == std::vector<std::int64_t>(m, 0),
             "opset 8's reverse directions are not run");
  const std::size_t n = a.size() - 1 - m;
  const std::int64_t batch = a.shape(1).rank() > 0 ? a.shape(1)[0] : 0;
  if (a.has(0)) {
    const std::int64_t full = a.shape(1 + n)[1];
    for (const std::int64_t len : a.ints(0))
      if (len != full) unsupported("Scan with sequence_lens shorter than the inputs ({} of {})", len, full);
  }
  std::vector<std::vector<Value<B>>> per_output(a.node.outputs.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<Value<B>> state, inputs;
    for (std::size_t i = 1; i < 1 + n; ++i) state.push_back(sequence_detail::take(a.value(i), 0, b));
    for (std::size_t i = 1 + n; i < a.size(); ++i) inputs.push_back(sequence_detail::take(a.value(i), 0, b));
    Outs<B> outs = scan_unbatched(a, std::move(state), std::move(inputs));
    for (std::size_t k = 0; k < outs.size() && k < per_output.size(); ++k) per_output[k].push_back(std::move(outs[k]));
  }
  KILN_CHECK(batch > 0, "the batch is empty, so the outputs' shapes are unknown");
  Outs<B> out;
  for (auto& parts : per_output) out.push_back(stacked<B>(std::move(parts), 0, false));
  return out;
}

// SequenceMap(sequence, more...): body(element i of each sequence input, the tensor inputs
// whole) for each index of the first sequence; each body output gathered into a sequence.
template <class B> Outs<B> sequence_map(const Args<B>& a) {
  const std::size_t length = a.value(0).elements().size();
  for (std::size_t j = 1; j < a.size(); ++j)
    if (a.value(j).kind() == Value<B>::Kind::sequence)
      KILN_CHECK(a.value(j).elements().size() == length, "sequence input {} has {} elements, input 0 {}", j,
                 a.value(j).elements().size(), length);
  std::vector<std::vector<Value<B>>> gathered(a.node.outputs.size());
  for (std::size_t i = 0; i < length; ++i) {
    std::vector<Value<B>> inputs;
    for (std::size_t j = 0; j < a.size(); ++j)
      inputs.push_back(a.value(j).kind() == Value<B>::Kind::sequence ? a.value(j).elements()[i] : a.value(j));
    Outs<B> outs = a.run_subgraph("body", std::move(inputs));
    expect_outputs(outs, gathered.size(), "the body");
    for (std::size_t k = 0; k < outs.size(); ++k) gathered[k].push_back(std::move(outs[k]));
  }
  Outs<B> out;
  for (auto& elements : gathered) {
    // An empty result takes the type of the first input's elements.
    const ElementType type = elements.empty() ? a.value(0).type() : elements[0].type();
    out.push_back(Value<B>::sequence(std::move(elements), type));
  }
  return out;
}

}  // namespace control_detail

// The op types add_control_ops registers (checked when a table is built). Generated modules
// (kiln-onnx2cpp) hold no subgraphs, so only onnx::Model runs them.
inline constexpr std::string_view kControlOps[] = {"If", "Loop", "Scan", "SequenceMap"};
inline constexpr OpGroup kControlGroup{"control", kControlOps};

template <class B> void add_control_ops(OpTable<B>& t) {
  t["If"] = {control_detail::if_op<B>, 1};
  t["Loop"] = {control_detail::loop_op<B>, 1};
  t["Scan"] = {control_detail::scan_op<B>, 8};
  t["SequenceMap"] = {control_detail::sequence_map<B>, 17};
}

}  // namespace kiln::onnx
