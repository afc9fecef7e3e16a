// Static shape inference over an ONNX graph: each value's dtype and dims, worked out from the
// graph inputs' dims and the nodes' attributes before anything runs, together with the
// contents of small tensors (initializers, Constant, Shape and the integer arithmetic on
// them), so that a Reshape or Expand whose target is computed from Shape resolves. Compiled
// once in libkiln_onnx (src/onnx/shapes.cpp and the rules of src/onnx/shape_rules_*.cpp),
// with no backend. See docs/onnx.md.
//
//   const auto values = kiln::onnx::infer_shapes(file.graph, file.opset(), {{"x", {8, 3, 224, 224}}});
//   values.at("logits").dims;  // [8, 1000]
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/onnx/graph.hpp"

namespace kiln::onnx {

// What is known of one value of the graph before it runs.
struct InferredValue {
  // nullopt: unknown, or an element type Kiln does not hold (int8, string...).
  std::optional<DType> dtype;
  // nullopt: the rank is unknown; an entry -1: that dim is unknown.
  std::optional<std::vector<std::int64_t>> dims;
  // The contents, for small tensors known before running (at most 4096 elements).
  std::optional<TensorData> value;

  // Whether the rank and every dim are known.
  bool shape_known() const;
};

// Every value of `graph` by name: initializers, graph inputs and each node's outputs. Inputs
// named in `input_dims` take those dims, the others their declared dims (symbolic or missing
// dims as -1). Op types without a rule, and nodes of other domains, give outputs of unknown
// rank; dims that contradict each other (Add of [2, 3] and [4, 3], a Reshape of 6 elements
// into [4, -1]) are a kiln::Error naming the node and the shapes.
std::map<std::string, InferredValue> infer_shapes(
    const Graph& graph, std::int64_t opset, const std::map<std::string, std::vector<std::int64_t>>& input_dims = {});

}  // namespace kiln::onnx
