// kiln/onnx/shapes.hpp: static shape inference. One rule per op type (the table below),
// each reading what is known of its node's inputs and returning what follows for the
// outputs; a dim nobody can know before running is -1, a rank nobody can know is nullopt.
// The rules mirror the checks of the kernels in kiln/onnx/ops_*.hpp, so that a shape they
// would reject is an error here too, naming the node as the runtime does. They live in
// shape_rules_*.cpp, one file per group of those kernel files, over the shared pieces of
// shape_rules.hpp; this file holds the table and infer_shapes.
#include "kiln/onnx/shapes.hpp"

#include "shape_rules.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"

namespace kiln::onnx {

bool InferredValue::shape_known() const {
  return dims && std::all_of(dims->begin(), dims->end(), [](std::int64_t d) { return d >= 0; });
}

namespace {

using namespace shape_rules;

// ---------------------------------------------------------------- the table

using Rule = Outs (*)(const Context&);

const std::map<std::string, Rule, std::less<>>& rules() {
  static const std::map<std::string, Rule, std::less<>> table = [] {
    std::map<std::string, Rule, std::less<>> t;
    const auto add = [&](std::initializer_list<std::string_view> ops, Rule rule) {
      for (const std::string_view op : ops) t.emplace(op, rule);
    };
    add({"Abs",         "Neg",       "Exp",      "Log",       "Sqrt",   "Reciprocal", "Sin",     "Cos",
         "Tan",         "Tanh",      "Erf",      "Floor",     "Ceil",   "Round",      "Sigmoid", "Relu",
         "Sign",        "Softplus",  "Asin",     "Acos",      "Atan",   "Sinh",       "Cosh",    "Asinh",
         "Acosh",       "Atanh",     "Softsign", "LeakyRelu", "Elu",    "Selu",       "Celu",    "ThresholdedRelu",
         "HardSigmoid", "HardSwish", "Mish",     "Gelu",      "Shrink", "Clip",       "Pow"},
        unary);
    add({"Add", "Sub", "Mul", "Div", "Mod", "PRelu", "BitShift", "Sum", "Mean", "Max", "Min"}, binary);
    add({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"},
        to_bool);
    add({"Cast", "CastLike"}, cast);
    add({"Where"}, where);
    add({"Identity"}, identity);
    add({"Reshape"}, reshape);
    add({"Flatten"}, flatten);
    add({"Transpose"}, transpose);
    add({"Concat"}, concat);
    add({"Split"}, split);
    add({"Slice"}, slice);
    add({"Squeeze"}, squeeze);
    add({"Unsqueeze"}, unsqueeze);
    add({"Shape"}, shape);
    add({"Size"}, size);
    add({"Constant"}, constant);
    add({"ConstantOfShape"}, constant_of_shape);
    add({"Expand"}, expand);
    add({"Tile"}, tile);
    add({"Pad"}, pad);
    add({"DepthToSpace", "SpaceToDepth"}, depth_to_space);
    add({"MatMul"}, matmul);
    add({"Gemm"}, gemm);
    add({"Conv"}, conv);
    add({"ConvTranspose"}, conv_transpose);
    add({"MaxPool", "AveragePool", "LpPool"}, pool);
    add({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}, global_pool);
    add({"BatchNormalization"}, batch_norm);
    add({"LayerNormalization"}, layer_norm);
    add({"InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization", "LpNormalization", "Softmax",
         "LogSoftmax", "Hardmax", "LRN", "CumSum", "Trilu", "ReverseSequence", "Scatter", "ScatterElements",
         "ScatterND"},
        same_as_input);
    add({"Dropout"}, dropout);
    add({"RNN", "GRU", "LSTM"}, recurrent);
    add({"Resize", "Upsample"}, resize);
    add({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
         "ReduceLogSumExp", "ReduceSumSquare"},
        reduce);
    add({"ArgMax", "ArgMin"}, arg_reduce);
    add({"TopK"}, top_k);
    add({"Gather"}, gather);
    add({"GatherElements"}, gather_elements);
    add({"GatherND"}, gather_nd);
    add({"NonZero"}, non_zero);
    add({"OneHot"}, one_hot);
    add({"EyeLike"}, eye_like);
    add({"Range"}, range);
    add({"Det"}, det);
    add({"Einsum"}, einsum);
    add({"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}, loss);
    add({"HannWindow", "HammingWindow", "BlackmanWindow"}, window_function);
    add({"DFT"}, dft);
    add({"STFT"}, stft);
    add({"GridSample"}, grid_sample);
    add({"RoiAlign"}, roi_align);
    add({"NonMaxSuppression"}, non_max_suppression);
    add({"MaxUnpool"}, max_unpool);
    add({"Unique"}, unique);
    add({"Compress"}, compress);
    add({"CenterCropPad"}, center_crop_pad);
    add({"Col2Im"}, col2im);
    add({"QuantizeLinear"}, quantize_linear);
    add({"DequantizeLinear"}, dequantize_linear);
    add({"DynamicQuantizeLinear"}, dynamic_quantize_linear);
    add({"MatMulInteger"}, matmul_integer);
    add({"ConvInteger"}, conv_integer);
    add({"QLinearMatMul"}, qlinear_matmul);
    add({"QLinearConv"}, qlinear_conv);
    return t;
  }();
  return table;
}

// A graph input's dims: those given, checked against the declaration, or the declared ones.
std::optional<Dims> input_dims_of(const ValueInfo& input, const std::map<std::string, Dims>& given) {
  const auto it = given.find(input.name);
  if (it == given.end()) {
    if (!input.shape) return std::nullopt;
    Dims dims;
    for (const Dim& d : *input.shape) dims.push_back(d.value >= 0 ? d.value : kUnknown);
    return dims;
  }
  if (input.shape) {
    bool fits = it->second.size() == input.shape->size();
    for (std::size_t d = 0; fits && d < it->second.size(); ++d)
      fits = (*input.shape)[d].value < 0 || (*input.shape)[d].value == it->second[d];
    std::string declared;
    for (const Dim& d : *input.shape)
      declared += (declared.empty() ? "" : ", ") + (d.value >= 0      ? std::to_string(d.value)
                                                    : d.param.empty() ? "?"
                                                                      : d.param);
    KILN_CHECK(fits, "onnx: input '{}' is given dims {}, the model declares [{}]", input.name, it->second, declared);
  }
  return it->second;
}

}  // namespace

std::map<std::string, InferredValue> infer_shapes(const Graph& graph, std::int64_t opset,
                                                  const std::map<std::string, std::vector<std::int64_t>>& input_dims) {
  std::map<std::string, InferredValue> values;
  const auto trim = [](InferredValue& v) {
    if (v.value && v.value->numel() > kValueLimit) v.value.reset();
  };
  for (const TensorValue& init : graph.initializers) {
    InferredValue v = from_tensor(init);
    trim(v);
    values.emplace(init.name, std::move(v));  // the first of a name counts, as in Model
  }
  for (const auto& given : input_dims) {
    const std::string& name = given.first;
    KILN_CHECK(
        std::any_of(graph.inputs.begin(), graph.inputs.end(), [&](const ValueInfo& v) { return v.name == name; }),
        "onnx: infer_shapes: dims are given for '{}', which is not a graph input", name);
  }
  for (const ValueInfo& input : graph.inputs) {
    if (values.count(input.name)) continue;  // IR < 4 lists initializers as inputs
    values.emplace(input.name,
                   tensor(input.is_tensor() ? held_dtype_of(input.type) : std::nullopt, input_dims_of(input, input_dims)));
  }
  static const InferredValue nothing;
  std::vector<const InferredValue*> inputs;
  for (const Node& node : graph.nodes) {
    inputs.clear();
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      const auto it = values.find(name);
      inputs.push_back(it != values.end() ? &it->second : &nothing);
    }
    Outs outs;
    const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
    const auto rule = rules().find(node.op_type);
    if (default_domain && rule != rules().end()) {
      try {
        outs = rule->second(Context{node, inputs, opset});
      } catch (const Error& e) {
        throw Error("onnx: " + node.describe() + " (opset " + std::to_string(opset) + "): " + e.what());
      }
    }
    for (std::size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k].empty()) continue;
      InferredValue v = k < outs.size() ? std::move(outs[k]) : InferredValue{};
      trim(v);
      values.insert_or_assign(node.outputs[k], std::move(v));
    }
  }
  return values;
}

}  // namespace kiln::onnx
