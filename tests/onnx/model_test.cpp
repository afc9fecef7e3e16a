// onnx::Model's errors on graphs it cannot run, and on inputs that do not fit the graph: each
// a kiln::Error (or onnx::Unsupported) naming the node, its op type and the model's opset,
// or the input and the shapes at fault. Graphs are built in C++ (kiln/onnx/module.hpp's
// helpers), so the test needs no file.
#include "expect_error.hpp"

#include <kiln/cpu/backend.hpp>
#include <kiln/onnx/module.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <vector>

using namespace kiln;
using namespace kiln::onnx::build;

namespace {

// y = Relu(x + b): x [batch, 3] f32, b an initializer [3].
onnx::ModelFile add_relu(std::string op = "Relu", std::int64_t opset = 13) {
  onnx::ModelFile file;
  file.opsets[""] = opset;
  file.graph.nodes = {node("Add", "add", {"x", "b"}, {"s"}), node(op, "act", {"s"}, {"y"})};
  onnx::TensorValue b;
  b.name = "b";
  b.type = onnx::ElementType::float32;
  b.dims = {3};
  b.data = TensorData::from(std::vector<float>{1, -2, 3}, Shape{3});
  file.graph.initializers = {b};
  file.graph.inputs = {value("x", onnx::ElementType::float32, {-1, 3})};
  file.graph.outputs = {value("y", onnx::ElementType::float32, {-1, 3})};
  return file;
}

TEST(OnnxModel, RunsAHandBuiltGraph) {
  const onnx::Model<Cpu> model(add_relu());
  const std::vector<TensorData> in{TensorData::from(std::vector<float>{0, 0, 0, -5, 5, -5}, Shape{2, 3})};
  const auto y = Cpu::into_data(model.run(std::span<const TensorData>(in)).at(0)).to_vec<float>();
  EXPECT_EQ(y, (std::vector<float>{1, 0, 3, 0, 3, 0}));
}

TEST(OnnxModel, AnOpWithoutKernelIsUnsupportedAtLoad) {
  try {
    const onnx::Model<Cpu> model(add_relu("TfIdfVectorizer"));
    FAIL() << "no error";
  } catch (const onnx::Unsupported& e) {
    const std::string message = e.what();
    for (const char* part : {"TfIdfVectorizer node 'act'", "(opset 13)", "no kernel for the op type TfIdfVectorizer"})
      EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(OnnxModel, AnOpsetOutsideTheKernelsIsUnsupported) {
  EXPECT_THROW(onnx::Model<Cpu>(add_relu("Relu", 5)), onnx::Unsupported);  // Add before opset 7
}

TEST(OnnxModel, AnInputProducedByNoNodeIsAnError) {
  onnx::ModelFile file = add_relu();
  file.graph.nodes[1].inputs = {"missing"};
  test::expect_error([&] { onnx::Model<Cpu> model(std::move(file)); }, {"Relu node 'act'", "'missing'", "no earlier node"});
}

TEST(OnnxModel, InputsMustFitTheDeclaration) {
  const onnx::Model<Cpu> model(add_relu());
  const std::vector<TensorData> wrong_dims{TensorData::from(std::vector<float>{1, 2, 3, 4}, Shape{2, 2})};
  test::expect_error([&] { (void)model.run(std::span<const TensorData>(wrong_dims)); }, {"input 'x'", "[2, 2]", "[?, 3]"});
  const std::vector<TensorData> wrong_dtype{TensorData::from(std::vector<double>{1, 2, 3}, Shape{1, 3})};
  test::expect_error([&] { (void)model.run(std::span<const TensorData>(wrong_dtype)); }, {"input 'x'", "f32", "f64"});
  test::expect_error([&] { (void)model.run(std::span<const TensorData>()); }, {"takes 1 inputs, got 0"});
}

TEST(OnnxModel, AKernelErrorNamesTheNodeAndOpset) {
  // Reshape of 6 elements to [4, -1].
  onnx::ModelFile file;
  file.opsets[""] = 14;
  file.graph.nodes = {node("Reshape", "r", {"x", "shape"}, {"y"})};
  onnx::TensorValue shape;
  shape.name = "shape";
  shape.type = onnx::ElementType::int64;
  shape.dims = {2};
  shape.data = TensorData::from(std::vector<std::int64_t>{4, -1}, Shape{2});
  file.graph.initializers = {shape};
  file.graph.inputs = {value("x", onnx::ElementType::float32, {2, 3})};
  file.graph.outputs = {value("y", onnx::ElementType::float32, {4, -1})};
  const onnx::Model<Cpu> model(std::move(file));
  const std::vector<TensorData> in{TensorData::from(std::vector<float>(6, 1.0f), Shape{2, 3})};
  test::expect_error([&] { (void)model.run(std::span<const TensorData>(in)); },
                     {"Reshape node 'r'", "(opset 14)", "cannot reshape [2, 3] to [4, -1]"});
}

// ONNX's Slice and Range arithmetic, which the kernels and shape inference share, on the
// values a hostile file may hold.
TEST(OnnxModel, SliceAndRangeArithmeticOnExtremeValues) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(onnx::slice_extent(10, 0, max, max).size, 1);      // no overflow in (distance - 1) / step
  EXPECT_EQ(onnx::slice_extent(10, max, -max, -max).size, 1);  // from the last element, once
  EXPECT_EQ(onnx::slice_extent(10, -1, -11, -3).first, 9);
  EXPECT_EQ(onnx::slice_extent(10, -1, -11, -3).size, 4);      // 9, 6, 3, 0
  EXPECT_EQ(onnx::slice_extent(10, 2, 8, 2).size, 3);          // 2, 4, 6
  test::expect_error([] { (void)onnx::slice_extent(10, 0, 5, std::numeric_limits<std::int64_t>::min()); },
                     {"slice step"});
  test::expect_error([] { (void)onnx::slice_extent(10, 0, 5, 0); }, {"slice step of 0"});
  EXPECT_EQ(onnx::range_count(0, 10, 3), 4);
  EXPECT_EQ(onnx::range_count(10, 0, 1), 0);
  test::expect_error([] { (void)onnx::range_count(0, std::numeric_limits<double>::infinity(), 1); },
                     {"Range", "inf"});
  test::expect_error([] { (void)onnx::range_count(0, 1e300, 1e-300); }, {"Range", "elements"});
  test::expect_error([] { (void)onnx::range_count(0, 1, 0); }, {"Range: delta must not be 0"});
}

}  // namespace
