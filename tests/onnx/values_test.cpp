// onnx::Model on the values that are not tensors of Kiln's dtypes: integer types held wider
// (INT8... in i32 or i64, results wrapped or refused), STRING tensors, sequences, and the
// subgraphs of If and Loop reading values from around them. Graphs are built in C++.
#include "expect_error.hpp"

#include <kiln/cpu/backend.hpp>
#include <kiln/onnx/model.hpp>
#include <kiln/onnx/module.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::onnx::build;
using E = onnx::ElementType;
using Value = onnx::Value<Cpu>;

namespace {

onnx::ModelFile model_of(std::vector<onnx::Node> nodes, std::vector<onnx::ValueInfo> inputs,
                         std::vector<onnx::ValueInfo> outputs, std::int64_t opset = 17) {
  onnx::ModelFile file;
  file.opsets[""] = opset;
  file.graph.nodes = std::move(nodes);
  file.graph.inputs = std::move(inputs);
  file.graph.outputs = std::move(outputs);
  return file;
}

template <class T> Value host(std::vector<T> values, Shape shape) {
  return Value::host(TensorData::from(values, std::move(shape)), {});
}

onnx::Attribute graph_attr(std::string name, onnx::Graph g) {
  onnx::Attribute a = named(std::move(name), onnx::Attribute::Kind::graph);
  a.graph = std::make_shared<const onnx::Graph>(std::move(g));
  return a;
}

TEST(OnnxValues, CastToANarrowIntegerWraps) {
  const onnx::Model<Cpu> model(model_of({node("Cast", "c8", {"x"}, {"a"}, {attr_int("to", 3)}),         // INT8
                                         node("Cast", "c16", {"x"}, {"b"}, {attr_int("to", 4)}),        // UINT16
                                         node("Cast", "back", {"a"}, {"c"}, {attr_int("to", 1)})},      // FLOAT
                                        {value("x", E::int32, {4})},
                                        {value("a", E::int8, {4}), value("b", E::uint16, {4}), value("c", E::float32, {4})}));
  const auto out = model.run_values({host<std::int32_t>({300, -1, 127, -129}, Shape{4})});
  EXPECT_EQ(out[0].type(), E::int8);
  EXPECT_EQ(out[0].data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{44, -1, 127, 127}));
  EXPECT_EQ(out[1].type(), E::uint16);
  EXPECT_EQ(out[1].data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{300, 65535, 127, 65407}));
  EXPECT_EQ(out[2].type(), E::float32);
  EXPECT_EQ(out[2].data().to_vec<float>(), (std::vector<float>{44, -1, 127, 127}));
}

TEST(OnnxValues, NarrowIntegersReachOnlyOpsWhoseResultsStayInRange) {
  // Max keeps INT8 (its results are inputs' values); Add could overflow INT8 and is refused.
  const onnx::Model<Cpu> max(model_of({node("Max", "m", {"x", "y"}, {"z"})}, {value("x", E::int8, {3}), value("y", E::int8, {3})},
                                      {value("z", E::int8, {3})}));
  const auto out = max.run_values({host<std::int32_t>({-128, 5, 0}, Shape{3}), host<std::int32_t>({1, -5, 127}, Shape{3})});
  EXPECT_EQ(out[0].type(), E::int8);
  EXPECT_EQ(out[0].data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{1, 5, 127}));

  const onnx::Model<Cpu> add(model_of({node("Add", "sum", {"x", "y"}, {"z"})}, {value("x", E::int8, {3}), value("y", E::int8, {3})},
                                      {value("z", E::int8, {3})}));
  try {
    (void)add.run_values({host<std::int32_t>({100, 5, 0}, Shape{3}), host<std::int32_t>({100, -5, 1}, Shape{3})});
    FAIL() << "no error";
  } catch (const onnx::Unsupported& e) {
    for (const char* part : {"Add node 'sum'", "input 0 is an INT8 tensor (held as i32)", "Kiln runs Add on Kiln's dtypes only"})
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
  // A tensor of another narrow type is not retyped.
  test::expect_error([&] {
    (void)max.run_values({Value::typed(host<std::int32_t>({1, 2, 3}, Shape{3}), E::uint16), host<std::int32_t>({0, 0, 0}, Shape{3})});
  }, {"input 'x' must be INT8", "a UINT16 tensor"});
  // An input given in the dtype that holds its type must fit the type.
  test::expect_error([&] { (void)max.run_values({host<std::int32_t>({200, 0, 0}, Shape{3}), host<std::int32_t>({0, 0, 0}, Shape{3})}); },
                     {"input 'x' is INT8", "element 0 is 200", "-128 to 127"});
}

TEST(OnnxValues, StringsCastBothWays) {
  const onnx::Model<Cpu> model(model_of({node("Cast", "s", {"x"}, {"t"}, {attr_int("to", 8)}),
                                         node("Cast", "f", {"t"}, {"y"}, {attr_int("to", 1)})},
                                        {value("x", E::float32, {5})}, {value("t", E::string, {5}), value("y", E::float32, {5})}));
  const float nan = std::nanf("");
  const auto out = model.run_values({host<float>({0.1f, -2.5f, 1e-7f, nan, -INFINITY}, Shape{5})});
  EXPECT_EQ(out[0].string_values(), (std::vector<std::string>{"0.1", "-2.5", "1e-07", "NaN", "-INF"}));
  const std::vector<float> back = out[1].data().to_vec<float>();
  EXPECT_EQ(back[0], 0.1f);
  EXPECT_EQ(back[2], 1e-7f);
  EXPECT_TRUE(std::isnan(back[3]));
  EXPECT_EQ(back[4], -INFINITY);

  const onnx::Model<Cpu> parse(model_of({node("Cast", "f", {"t"}, {"y"}, {attr_int("to", 7)})}, {value("t", E::string, {2})},
                                        {value("y", E::int64, {2})}));
  EXPECT_EQ(parse.run_values({Value::strings(Shape{2}, {"+12", "-3"})})[0].data().to_vec<std::int64_t>(),
            (std::vector<std::int64_t>{12, -3}));
  test::expect_error([&] { (void)parse.run_values({Value::strings(Shape{2}, {"1", "one"})}); },
                     {"Cast node 'f'", "element 1 is the string 'one'"});
}

TEST(OnnxValues, SequencesSplitAndJoin) {
  const onnx::Model<Cpu> model(
      model_of({node("SplitToSequence", "split", {"x"}, {"seq"}, {attr_int("axis", 1), attr_int("keepdims", 0)}),
                node("SequenceLength", "n", {"seq"}, {"n"}),
                node("ConcatFromSequence", "stack", {"seq"}, {"y"}, {attr_int("axis", 0), attr_int("new_axis", 1)}),
                node("SequenceAt", "at", {"seq", "pos"}, {"last"})},
               {value("x", E::float32, {2, 3}), value("pos", E::int64, {})},
               {value("n", E::int64, {}), value("y", E::float32, {3, 2}), value("last", E::float32, {2})}));
  const auto out = model.run_values({host<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}), host<std::int64_t>({-1}, Shape{})});
  EXPECT_EQ(out[0].data().to_vec<std::int64_t>(), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(out[1].shape(), (Shape{3, 2}));  // the columns stacked: x transposed
  EXPECT_EQ(out[1].data().to_vec<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out[2].data().to_vec<float>(), (std::vector<float>{3, 6}));
  test::expect_error(
      [&] { (void)model.run_values({host<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}), host<std::int64_t>({3}, Shape{})}); },
      {"SequenceAt node 'at'", "position 3 is out of range for a sequence of 3 elements"});
}

// Loop(M = 4): acc += i * k, where k is a graph input the body reads from outside; inside
// the body an If on (i == 2) reads k too, two scopes out, and doubles that iteration's term.
TEST(OnnxValues, LoopAndIfReadOuterValues) {
  onnx::Graph then_branch, else_branch, body;
  then_branch.nodes = {node("Add", "twice", {"term", "term"}, {"doubled"})};
  then_branch.outputs = {value("doubled", E::float32, {})};
  else_branch.nodes = {node("Mul", "k_times_i", {"fi", "k"}, {"same"})};
  else_branch.outputs = {value("same", E::float32, {})};
  body.inputs = {value("i", E::int64, {}), value("cond", E::boolean, {}), value("acc", E::float32, {})};
  body.nodes = {node("Cast", "fi", {"i"}, {"fi"}, {attr_int("to", 1)}),
                node("Mul", "term", {"fi", "k"}, {"term"}),
                node("Equal", "is2", {"i", "two"}, {"is2"}),
                node("If", "choose", {"is2"}, {"chosen"}, {graph_attr("then_branch", then_branch), graph_attr("else_branch", else_branch)}),
                node("Add", "next", {"acc", "chosen"}, {"acc_out"}),
                node("Identity", "keep", {"cond"}, {"cond_out"}),
                node("Identity", "scan", {"chosen"}, {"term_out"})};
  body.outputs = {value("cond_out", E::boolean, {}), value("acc_out", E::float32, {}), value("term_out", E::float32, {})};
  onnx::TensorValue two;
  two.name = "two";
  two.type = E::int64;
  two.data = TensorData::from(std::vector<std::int64_t>{2}, Shape{});
  body.initializers = {two};
  onnx::ModelFile file = model_of({node("Loop", "loop", {"m", "", "acc0"}, {"acc", "terms"}, {graph_attr("body", body)})},
                                  {value("m", E::int64, {}), value("acc0", E::float32, {}), value("k", E::float32, {})},
                                  {value("acc", E::float32, {}), value("terms", E::float32, {4})});
  const onnx::Model<Cpu> model(std::move(file));
  const auto out = model.run_values({host<std::int64_t>({4}, Shape{}), host<float>({0.5f}, Shape{}), host<float>({3}, Shape{})});
  // terms: 0, 3, 2 * 6, 9
  EXPECT_EQ(out[1].data().to_vec<float>(), (std::vector<float>{0, 3, 12, 9}));
  EXPECT_EQ(out[0].data().to_vec<float>(), (std::vector<float>{24.5f}));
  // No iteration: the carried value as given, the scan output empty, of its declared type.
  const auto none = model.run_values({host<std::int64_t>({0}, Shape{}), host<float>({0.5f}, Shape{}), host<float>({3}, Shape{})});
  EXPECT_EQ(none[0].data().to_vec<float>(), (std::vector<float>{0.5f}));
  EXPECT_EQ(none[1].shape(), (Shape{0}));
  EXPECT_EQ(none[1].type(), E::float32);
  // A body that reads a name defined nowhere is an error naming the node and the subgraph.
  onnx::Graph broken = body;
  broken.nodes[1].inputs = {"fi", "nowhere"};
  test::expect_error(
      [&] {
        onnx::Model<Cpu> m(model_of({node("Loop", "loop", {"m", "", "acc0"}, {"acc", "terms"}, {graph_attr("body", broken)})},
                                    {value("m", E::int64, {}), value("acc0", E::float32, {})},
                                    {value("acc", E::float32, {}), value("terms", E::float32, {4})}));
      },
      {"Loop node 'loop'", "subgraph 'body'", "Mul node 'term'", "'nowhere'", "no earlier node"});
}

TEST(OnnxValues, TrainingDropoutDrawsTheSeedsMasks) {
  onnx::TensorValue ratio;
  ratio.name = "r";
  ratio.type = E::float32;
  ratio.data = TensorData::from(std::vector<float>{0.25f}, Shape{});
  onnx::ModelFile file = model_of({node("Dropout", "d", {"x", "r", "t"}, {"y", "mask"}, {attr_int("seed", 7)})},
                                  {value("x", E::float32, {1000}), value("t", E::boolean, {})},
                                  {value("y", E::float32, {1000}), value("mask", E::boolean, {1000})}, 13);
  file.graph.initializers = {ratio};
  const onnx::Model<Cpu> model(std::move(file));
  const Value training = Value::host(TensorData(std::vector<std::byte>{std::byte{1}}, Shape{}, DType::boolean), {});
  const auto a = model.run_values({host<float>(std::vector<float>(1000, 3.0f), Shape{1000}), training});
  const auto b = model.run_values({host<float>(std::vector<float>(1000, 3.0f), Shape{1000}), training});
  const std::vector<double> mask = a[1].data().to_vec<double>(), again = b[1].data().to_vec<double>();
  EXPECT_EQ(mask, again);  // the seed fixes the mask
  const std::vector<float> y = a[0].data().to_vec<float>();
  int kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_FLOAT_EQ(y[i], mask[i] != 0 ? 4.0f : 0.0f) << i;  // 3 / (1 - 0.25) where kept
    kept += mask[i] != 0;
  }
  EXPECT_GT(kept, 700);
  EXPECT_LT(kept, 800);
  // The first draws of MT19937 seeded with 7, as 53-bit uniforms, against the ratio.
  const std::vector<double> u = onnx::nn_detail::mt19937_uniform(7, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(mask[i] != 0, u[i] >= 0.25) << i;
  EXPECT_NEAR(onnx::nn_detail::mt19937_uniform(0, 1)[0], 0.5488135039273248, 1e-15);  // NumPy's seed 0
}

}  // namespace
