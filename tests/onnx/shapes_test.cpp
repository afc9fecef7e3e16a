// Static shape inference (kiln/onnx/shapes.hpp) against what running gives: every ONNX node
// test that Kiln runs, with its inputs' dims, must infer each graph output's shape and dtype
// as the run produces them wherever it infers them at all, and infer most of them. Then
// hand-written graphs for the propagation of shape arithmetic and for contradictions, and
// the models PyTorch exported (tests/golden/onnx).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <kiln/dispatch/backend.hpp>
#include <kiln/onnx/model.hpp>
#include <kiln/onnx/shapes.hpp>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

using Dims = std::vector<std::int64_t>;

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  const auto number = [&](const fs::path& p) { return std::stoi(p.stem().string().substr(prefix.size())); };
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) { return number(a) < number(b); });
  return files;
}

std::string text(const std::optional<Dims>& dims) {
  if (!dims) return "(rank unknown)";
  std::string out = "[";
  for (std::size_t i = 0; i < dims->size(); ++i) out += (i ? ", " : "") + std::to_string((*dims)[i]);
  return out + "]";
}

// How many graph outputs were inferred in full, and which were not.
struct Tally {
  int outputs = 0, inferred = 0;
  std::vector<std::string> missed;

  double fraction() const { return outputs ? static_cast<double>(inferred) / outputs : 0.0; }
};

// Each output's inferred dtype and dims (those known) against what the run gave.
void compare(const std::string& name, const std::map<std::string, onnx::InferredValue>& values,
             const std::vector<onnx::ValueInfo>& outputs, const std::vector<Dispatch::Primitive>& results,
             Tally& tally) {
  for (std::size_t k = 0; k < results.size(); ++k) {
    ++tally.outputs;
    const onnx::InferredValue& v = values.at(outputs[k].name);
    const Shape actual = Dispatch::shape(results[k]);
    if (v.dtype) EXPECT_EQ(*v.dtype, Dispatch::dtype(results[k])) << name << " output " << k;
    if (v.dims) EXPECT_EQ(v.dims->size(), actual.rank()) << name << " output " << k << ": inferred " << text(v.dims);
    if (v.dims && v.dims->size() == actual.rank())
      for (std::size_t d = 0; d < actual.rank(); ++d)
        if ((*v.dims)[d] >= 0)
          EXPECT_EQ((*v.dims)[d], actual[d])
              << name << " output " << k << ": inferred " << text(v.dims) << ", ran " << actual.str();
    if (v.shape_known() && v.dtype)
      ++tally.inferred;
    else
      tally.missed.push_back(name + " output " + std::to_string(k) + " " + text(v.dims));
  }
}

// The graph with its small inputs (rank 0 or 1, at most 16 elements: the shapes, axes,
// sizes, scales and K that ONNX's node tests feed as inputs) made initializers, as a
// model's constants would be.
onnx::Graph small_inputs_constant(const onnx::Graph& graph, const std::vector<onnx::ValueInfo>& inputs,
                                  const std::vector<TensorData>& data, std::map<std::string, Dims>& dims) {
  onnx::Graph g = graph;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (data[i].shape().rank() > 1 || data[i].numel() > 16) continue;
    onnx::TensorValue t;
    t.name = inputs[i].name;
    t.type = onnx::element_type_of(data[i].dtype());
    t.dims = data[i].shape().to_vector();
    t.data = data[i];
    g.initializers.push_back(std::move(t));
    dims.erase(inputs[i].name);
    std::erase_if(g.inputs, [&](const onnx::ValueInfo& v) { return v.name == inputs[i].name; });
  }
  return g;
}

TEST(OnnxShapes, NodeTestsInferWhatRunningGives) {
  if (!fs::is_directory(kNodeTests)) GTEST_SKIP() << "no ONNX node tests at " << kNodeTests << " (libonnx-testdata)";
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(kNodeTests))
    if (e.is_directory()) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  int runnable = 0;
  Tally from_dims, from_constants;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    std::optional<onnx::Model<Dispatch>> model;
    std::vector<TensorData> inputs;
    try {
      model.emplace(onnx::load_model(dir / "model.onnx"));
      // Graphs of tensors only, fed what they declare (not the BFLOAT16 tests' UINT16 bits).
      bool tensors = true;
      for (const auto* list : {&model->inputs(), &model->outputs()})
        for (const onnx::ValueInfo& v : *list) tensors = tensors && v.is_tensor() && v.type != onnx::ElementType::string;
      if (!tensors) continue;
      const std::vector<fs::path> files = numbered_files(dir / "test_data_set_0", "input_");
      for (std::size_t i = 0; i < files.size(); ++i) {
        onnx::TensorValue v = onnx::load_tensor(files[i]);
        if (!v.data || (i < model->inputs().size() && v.type != model->inputs()[i].type))
          throw onnx::Unsupported("an input of an element type Kiln does not hold, or not the declared one");
        inputs.push_back(*v.data);
      }
    } catch (const onnx::Unsupported&) {
      continue;
    }
    if (inputs.size() != model->inputs().size()) continue;  // omitted optional inputs: the runner skips these too
    std::map<std::string, Dims> dims;
    for (std::size_t i = 0; i < inputs.size(); ++i) dims[model->inputs()[i].name] = inputs[i].shape().to_vector();
    std::vector<Dispatch::Primitive> results;
    try {
      results = model->run(std::span<const TensorData>(inputs));
    } catch (const onnx::Unsupported&) {
      continue;
    }
    ++runnable;
    try {
      compare(name, model->infer_shapes(dims), model->outputs(), results, from_dims);
      const onnx::Graph g = small_inputs_constant(model->file().graph, model->inputs(), inputs, dims);
      compare(name + " (small inputs constant)", onnx::infer_shapes(g, model->opset(), dims), model->outputs(), results,
              from_constants);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": inference failed on a graph that runs: " << e.what();
    }
  }
  std::cout << "shape inference over " << runnable << " runnable node tests: " << from_dims.inferred << " of "
            << from_dims.outputs << " graph outputs (" << from_dims.fraction() * 100
            << "%) fully inferred from the inputs' dims; " << from_constants.inferred << " of "
            << from_constants.outputs << " (" << from_constants.fraction() * 100
            << "%) with the small inputs' contents known\n";
  for (const std::string& m : from_constants.missed) std::cout << "  not inferred: " << m << "\n";
  EXPECT_GE(from_dims.fraction(), 0.85);
  EXPECT_GE(from_constants.fraction(), 0.95);
}

// A hand-built graph: each node given by op type, inputs, outputs and attributes.
onnx::Node node(std::string op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                std::vector<onnx::Attribute> attributes = {}) {
  onnx::Node n;
  n.name = outputs.front();
  n.op_type = std::move(op);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  return n;
}
onnx::Attribute ints_attribute(std::string name, std::vector<std::int64_t> values) {
  onnx::Attribute a;
  a.name = std::move(name);
  a.kind = onnx::Attribute::Kind::ints;
  a.ints = std::move(values);
  return a;
}
onnx::Attribute int_attribute(std::string name, std::int64_t value) {
  onnx::Attribute a;
  a.name = std::move(name);
  a.kind = onnx::Attribute::Kind::i;
  a.i = value;
  return a;
}
onnx::TensorValue int_initializer(std::string name, std::vector<std::int64_t> values, std::vector<std::int64_t> dims) {
  onnx::TensorValue t;
  t.name = std::move(name);
  t.type = onnx::ElementType::int64;
  t.dims = dims;
  t.data = TensorData::from(values, Shape(dims));
  return t;
}
onnx::ValueInfo float_input(std::string name, std::vector<onnx::Dim> dims) {
  return {std::move(name), onnx::ValueInfo::Kind::tensor, onnx::ElementType::float32, std::move(dims)};
}

// x [N, 3, 4] reshaped to [N, 12] with the target built from Shape(x): the usual form of a
// PyTorch export's flatten.
onnx::Graph flatten_by_shape_arithmetic() {
  onnx::Graph g;
  g.inputs = {float_input("x", {{-1, "N"}, {3, ""}, {4, ""}})};
  g.initializers = {int_initializer("zero", {0}, {}), int_initializer("axes", {0}, {1}),
                    int_initializer("minus_one", {-1}, {1})};
  g.nodes = {node("Shape", {"x"}, {"shape"}), node("Gather", {"shape", "zero"}, {"batch"}, {int_attribute("axis", 0)}),
             node("Unsqueeze", {"batch", "axes"}, {"batch_1d"}),
             node("Concat", {"batch_1d", "minus_one"}, {"target"}, {int_attribute("axis", 0)}),
             node("Reshape", {"x", "target"}, {"y"})};
  g.outputs = {{"y", onnx::ValueInfo::Kind::tensor, onnx::ElementType::float32, std::nullopt}};
  return g;
}

TEST(OnnxShapes, ShapeArithmeticResolvesReshape) {
  const onnx::Graph g = flatten_by_shape_arithmetic();
  const auto values = onnx::infer_shapes(g, 13, {{"x", {5, 3, 4}}});
  EXPECT_EQ(values.at("shape").value->to_vec<std::int64_t>(), (Dims{5, 3, 4}));
  EXPECT_EQ(values.at("batch").dims, Dims{});
  EXPECT_EQ(values.at("target").value->to_vec<std::int64_t>(), (Dims{5, -1}));
  EXPECT_EQ(values.at("y").dims, (Dims{5, 12}));
  EXPECT_EQ(values.at("y").dtype, DType::f32);
  // Without the batch size the target is unknown, but its length still gives the rank.
  const auto symbolic = onnx::infer_shapes(g, 13);
  EXPECT_EQ(symbolic.at("x").dims, (Dims{-1, 3, 4}));
  EXPECT_FALSE(symbolic.at("target").value.has_value());
  EXPECT_EQ(symbolic.at("y").dims, (Dims{-1, -1}));
}

TEST(OnnxShapes, UnknownOpsGiveUnknownRank) {
  onnx::Graph g;
  g.inputs = {float_input("x", {{2, ""}, {3, ""}})};
  g.nodes = {node("SomethingNew", {"x"}, {"y"}), node("Relu", {"y"}, {"z"})};
  const auto values = onnx::infer_shapes(g, 17);
  EXPECT_FALSE(values.at("y").dims.has_value());
  EXPECT_FALSE(values.at("z").dims.has_value());
}

// The error of a contradiction: a kiln::Error naming the node and the shapes.
std::string error_of(const onnx::Graph& g, const std::map<std::string, Dims>& dims = {}) {
  try {
    (void)onnx::infer_shapes(g, 17, dims);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OnnxShapes, ContradictionsNameTheNode) {
  onnx::Graph add;
  add.inputs = {float_input("a", {{2, ""}, {3, ""}}), float_input("b", {{4, ""}, {3, ""}})};
  add.nodes = {node("Add", {"a", "b"}, {"sum"})};
  const std::string message = error_of(add);
  EXPECT_NE(message.find("Add node 'sum'"), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("[4, 3]"), std::string::npos) << message;

  onnx::Graph reshape;
  reshape.inputs = {float_input("x", {{2, ""}, {3, ""}})};
  reshape.initializers = {int_initializer("target", {4, -1}, {2})};
  reshape.nodes = {node("Reshape", {"x", "target"}, {"y"})};
  const std::string reshaped = error_of(reshape);
  EXPECT_NE(reshaped.find("Reshape node 'y'"), std::string::npos) << reshaped;
  EXPECT_NE(reshaped.find("[2, 3]"), std::string::npos) << reshaped;
  EXPECT_NE(reshaped.find("[4, -1]"), std::string::npos) << reshaped;

  // Dims given for an input must fit its declaration.
  const std::string given = error_of(reshape, {{"x", {2, 4}}});
  EXPECT_NE(given.find("input 'x'"), std::string::npos) << given;
}

// PyTorch's exports (tests/golden/onnx) at the dims of their second test set, a batch and
// sequence length other than those they were traced with: every value gets known dims, and
// each output those of the expected output.
void check_golden(const fs::path& dir) {
  const std::string model_name = dir.filename().string();
  const onnx::ModelFile file = onnx::load_model(dir / "model.onnx");
  const std::vector<fs::path> inputs = numbered_files(dir / "test_data_set_1", "input_");
  ASSERT_EQ(file.graph.inputs.size(), inputs.size()) << model_name;
  std::map<std::string, Dims> dims;
  for (std::size_t i = 0; i < inputs.size(); ++i) dims[file.graph.inputs[i].name] = onnx::load_tensor(inputs[i]).dims;
  const auto values = onnx::infer_shapes(file.graph, file.opset(), dims);
  for (const onnx::Node& n : file.graph.nodes)
    for (const std::string& out : n.outputs)
      if (!out.empty())
        EXPECT_TRUE(values.at(out).shape_known())
            << model_name << ": " << n.describe() << " output '" << out << "' " << text(values.at(out).dims);
  const std::vector<fs::path> outputs = numbered_files(dir / "test_data_set_1", "output_");
  ASSERT_EQ(file.graph.outputs.size(), outputs.size()) << model_name;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const onnx::TensorValue expected = onnx::load_tensor(outputs[k]);
    const onnx::InferredValue& output = values.at(file.graph.outputs[k].name);
    EXPECT_EQ(output.dims, expected.dims) << model_name << " output " << k;
    EXPECT_EQ(output.dtype, onnx::dtype_of(expected.type)) << model_name << " output " << k;
  }
}

TEST(OnnxShapes, TorchExportsAreInferredThroughout) {
  const fs::path golden = KILN_ONNX_GOLDEN;
  // The transformer's and the LSTM's second test sets are the [batch, sequence, features]
  // that they were not traced with.
  EXPECT_EQ(onnx::load_tensor(golden / "transformer" / "test_data_set_1" / "input_0.pb").dims, (Dims{3, 7, 16}));
  EXPECT_EQ(onnx::load_tensor(golden / "lstm" / "test_data_set_1" / "input_0.pb").dims, (Dims{3, 5, 8}));
  int models = 0;
  for (const auto& e : fs::directory_iterator(golden))
    if (fs::exists(e.path() / "model.onnx")) {
      SCOPED_TRACE(e.path().filename().string());
      check_golden(e.path());
      ++models;
    }
  EXPECT_GE(models, 2);
}

}  // namespace
