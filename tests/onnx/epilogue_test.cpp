// Activations folded into the node before them (GraphRunner: a Conv, Gemm or MatMul whose one
// reader is a Relu runs it as its epilogue, inside the kernel where the backend takes it), and
// Gemm's bias added inside the product: the results against loops written here, on graphs
// where the fold applies and where it must not (the intermediate is a graph output, or a
// second node reads it). Built twice: on kiln::cpu (oneDNN post-ops) and on
// kiln::cpu_embedded (Kiln's own epilogues).
#include <kiln/cpu/backend.hpp>
#include <kiln/onnx/model.hpp>
#include <kiln/onnx/module.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using namespace kiln;
using namespace kiln::onnx::build;

namespace {

using Floats = std::vector<float>;

Floats random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Floats v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

onnx::TensorValue initializer(const std::string& name, const Floats& values, std::vector<std::int64_t> dims) {
  onnx::TensorValue t;
  t.name = name;
  t.type = onnx::ElementType::float32;
  t.dims = dims;
  t.data = TensorData::from(values, Shape(dims));
  return t;
}

std::vector<Floats> run(const onnx::ModelFile& file, const Floats& x, const Shape& shape) {
  const onnx::Model<Cpu> model(file);
  const std::vector<TensorData> in{TensorData::from(x, shape)};
  std::vector<Floats> out;
  for (const auto& y : model.run(std::span<const TensorData>(in))) out.push_back(Cpu::into_data(y).to_vec<float>());
  return out;
}

Floats relu(Floats v) {
  for (float& x : v) x = std::max(x, 0.0f);
  return v;
}

void expect_near(const Floats& got, const Floats& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "at " << i;
}

// y [n, o, oh, ow] of x [n, c, h, w] by w [o, c, k, k], bias [o], stride s, padding p.
Floats conv_reference(const Floats& x, const Floats& w, const Floats& b, std::int64_t n, std::int64_t c,
                      std::int64_t h, std::int64_t wd, std::int64_t o, std::int64_t k, std::int64_t s,
                      std::int64_t p) {
  const std::int64_t oh = (h + 2 * p - k) / s + 1, ow = (wd + 2 * p - k) / s + 1;
  Floats y(static_cast<std::size_t>(n * o * oh * ow));
  for (std::int64_t ni = 0; ni < n; ++ni)
    for (std::int64_t oc = 0; oc < o; ++oc)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          double acc = b[static_cast<std::size_t>(oc)];
          for (std::int64_t ic = 0; ic < c; ++ic)
            for (std::int64_t ky = 0; ky < k; ++ky)
              for (std::int64_t kx = 0; kx < k; ++kx) {
                const std::int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += static_cast<double>(x[static_cast<std::size_t>(((ni * c + ic) * h + iy) * wd + ix)]) *
                       w[static_cast<std::size_t>(((oc * c + ic) * k + ky) * k + kx)];
              }
          y[static_cast<std::size_t>(((ni * o + oc) * oh + oy) * ow + ox)] = static_cast<float>(acc);
        }
  return y;
}

// Conv (4 output channels, 3x3, `stride`, padding 1) of x [2, 3, 9, 9], then Relu; the
// convolution's output is also a graph output where `conv_is_output`.
onnx::ModelFile conv_relu(std::int64_t stride, bool conv_is_output, const Floats& w, const Floats& b) {
  onnx::ModelFile file;
  file.opsets[""] = 13;
  file.graph.nodes = {
      node("Conv", "conv", {"x", "w", "b"}, {"c"},
           {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {stride, stride})}),
      node("Relu", "act", {"c"}, {"y"})};
  file.graph.initializers = {initializer("w", w, {4, 3, 3, 3}), initializer("b", b, {4})};
  file.graph.inputs = {value("x", onnx::ElementType::float32, {-1, 3, 9, 9})};
  const std::int64_t side = stride == 1 ? 9 : 5;
  file.graph.outputs = {value("y", onnx::ElementType::float32, {-1, 4, side, side})};
  if (conv_is_output) file.graph.outputs.push_back(value("c", onnx::ElementType::float32, {-1, 4, side, side}));
  return file;
}

TEST(OnnxEpilogue, ConvThenReluMatchesTheLoops) {
  const Floats x = random_values(2 * 3 * 9 * 9, 1), w = random_values(4 * 3 * 3 * 3, 2), b = random_values(4, 3);
  for (const std::int64_t stride : {1, 2}) {  // the embedded build: direct, and im2col
    SCOPED_TRACE(stride);
    const Floats conv = conv_reference(x, w, b, 2, 3, 9, 9, 4, 3, stride, 1);
    ASSERT_TRUE(std::any_of(conv.begin(), conv.end(), [](float v) { return v < 0; }));
    const auto out = run(conv_relu(stride, false, w, b), x, Shape{2, 3, 9, 9});
    expect_near(out.at(0), relu(conv));
  }
}

TEST(OnnxEpilogue, AConvOutputTheGraphReturnsIsNotFolded) {
  const Floats x = random_values(2 * 3 * 9 * 9, 4), w = random_values(4 * 3 * 3 * 3, 5), b = random_values(4, 6);
  const Floats conv = conv_reference(x, w, b, 2, 3, 9, 9, 4, 3, 1, 1);
  const auto out = run(conv_relu(1, true, w, b), x, Shape{2, 3, 9, 9});
  ASSERT_EQ(out.size(), 2u);
  expect_near(out[0], relu(conv));
  expect_near(out[1], conv);  // the convolution's own output, negatives and all
}

TEST(OnnxEpilogue, AConvOutputTwoNodesReadIsNotFolded) {
  const Floats x = random_values(1 * 3 * 9 * 9, 7), w = random_values(4 * 3 * 3 * 3, 8), b = random_values(4, 9);
  onnx::ModelFile file = conv_relu(1, false, w, b);
  file.graph.nodes.push_back(node("Add", "sum", {"y", "c"}, {"z"}));  // relu(c) + c
  file.graph.outputs = {value("z", onnx::ElementType::float32, {-1, 4, 9, 9})};
  const Floats conv = conv_reference(x, w, b, 1, 3, 9, 9, 4, 3, 1, 1);
  Floats want = relu(conv);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += conv[i];
  expect_near(run(file, x, Shape{1, 3, 9, 9}).at(0), want);
}

// Whether the Relu ran as a node of its own: a table whose Relu kernel throws finds out.
// (The results above hold either way; this is what shows the fold happened.)
bool relu_ran_apart(const onnx::ModelFile& file, const Floats& x, const Shape& shape) {
  onnx::OpTable<Cpu> table = onnx::op_table<Cpu>();
  table["Relu"].kernel = [](const onnx::Args<Cpu>&) -> std::vector<onnx::Value<Cpu>> {
    throw Error("the Relu ran apart");
  };
  std::vector<std::string> names;
  std::vector<onnx::Value<Cpu>> constants;
  for (const onnx::TensorValue& t : file.graph.initializers) {
    names.push_back(t.name);
    constants.emplace_back(Cpu::from_data(*t.data, {}));
  }
  const onnx::GraphRunner<Cpu> runner(file.graph, 13, names, {}, table);
  std::vector<onnx::Value<Cpu>> inputs;
  inputs.emplace_back(Cpu::from_data(TensorData::from(x, shape), {}));
  try {
    (void)runner.run(constants, std::move(inputs), {});
    return false;
  } catch (const Error& e) {
    if (std::string(e.what()).find("the Relu ran apart") == std::string::npos) throw;
    return true;
  }
}

TEST(OnnxEpilogue, TheReluRunsInsideTheNodeOnlyWhereItMay) {
  const Floats x = random_values(1 * 3 * 9 * 9, 15), w = random_values(4 * 3 * 3 * 3, 16), b = random_values(4, 17);
  const Shape shape{1, 3, 9, 9};
  EXPECT_FALSE(relu_ran_apart(conv_relu(1, false, w, b), x, shape));  // folded
  EXPECT_TRUE(relu_ran_apart(conv_relu(1, true, w, b), x, shape));    // the conv's output is returned too
  onnx::ModelFile gemm;
  gemm.opsets[""] = 13;
  gemm.graph.nodes = {node("Gemm", "gemm", {"x", "w"}, {"g"}, {attr_int("transB", 1)}),
                      node("Relu", "act", {"g"}, {"y"})};
  gemm.graph.initializers = {initializer("w", random_values(4 * 5, 18), {4, 5})};
  gemm.graph.inputs = {value("x", onnx::ElementType::float32, {2, 5})};
  gemm.graph.outputs = {value("y", onnx::ElementType::float32, {2, 4})};
  EXPECT_FALSE(relu_ran_apart(gemm, random_values(10, 19), Shape{2, 5}));
}

// x [m, k] @ w [n, k]^T (Gemm with transB) or x @ w [k, n] (MatMul, transB 0), then `post`.
Floats product_reference(const Floats& x, const Floats& w, std::int64_t m, std::int64_t k, std::int64_t n,
                         bool trans_b) {
  Floats y(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t t = 0; t < k; ++t)
        acc += static_cast<double>(x[static_cast<std::size_t>(i * k + t)]) *
               w[static_cast<std::size_t>(trans_b ? j * k + t : t * n + j)];
      y[static_cast<std::size_t>(i * n + j)] = static_cast<float>(acc);
    }
  return y;
}

struct GemmCase {
  const char* what;
  std::vector<std::int64_t> c_dims;  // empty: no C
  float alpha, beta;
};

TEST(OnnxEpilogue, GemmWithBiasThenReluMatchesTheLoops) {
  constexpr std::int64_t m = 3, k = 37, n = 21;  // n past one vector, with a tail
  const Floats x = random_values(m * k, 10), w = random_values(n * k, 11);
  for (const GemmCase& c : {GemmCase{"bias row", {n}, 1, 1}, GemmCase{"bias [1, n]", {1, n}, 1, 1},
                            GemmCase{"bias column", {m, 1}, 1, 1}, GemmCase{"bias full", {m, n}, 1, 1},
                            GemmCase{"scaled", {n}, 0.5f, 2}, GemmCase{"no bias", {}, 1, 1}}) {
    SCOPED_TRACE(c.what);
    std::int64_t count = 1;
    for (const auto d : c.c_dims) count *= d;
    const Floats bias = random_values(static_cast<std::size_t>(count), 12);
    for (const bool with_relu : {true, false}) {
      onnx::ModelFile file;
      file.opsets[""] = 13;
      std::vector<std::string> inputs{"x", "w"};
      if (!c.c_dims.empty()) inputs.push_back("c");
      file.graph.nodes = {node("Gemm", "gemm", inputs, {"g"},
                               {attr_int("transB", 1), attr_float("alpha", c.alpha), attr_float("beta", c.beta)})};
      if (with_relu) file.graph.nodes.push_back(node("Relu", "act", {"g"}, {"y"}));
      file.graph.initializers = {initializer("w", w, {n, k})};
      if (!c.c_dims.empty()) file.graph.initializers.push_back(initializer("c", bias, c.c_dims));
      file.graph.inputs = {value("x", onnx::ElementType::float32, {m, k})};
      file.graph.outputs = {value(with_relu ? "y" : "g", onnx::ElementType::float32, {m, n})};

      Floats want = product_reference(x, w, m, k, n, true);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          float& v = want[static_cast<std::size_t>(i * n + j)];
          v *= c.alpha;
          if (c.c_dims.empty()) continue;
          const std::int64_t at = c.c_dims.size() == 1 ? j : (c.c_dims[0] == 1 ? j : (c.c_dims[1] == 1 ? i : i * n + j));
          v += c.beta * bias[static_cast<std::size_t>(at)];
        }
      expect_near(run(file, x, Shape{m, k}).at(0), with_relu ? relu(want) : want);
    }
  }
}

TEST(OnnxEpilogue, MatMulThenReluMatchesTheLoops) {
  constexpr std::int64_t k = 9, n = 19;
  const Floats w = random_values(k * n, 13);
  for (const std::int64_t m : {1, 6}) {  // one row (the embedded build's row kernel), and several
    SCOPED_TRACE(m);
    const Floats x = random_values(static_cast<std::size_t>(2 * m * k), 14);  // [2, m, k]: batched
    onnx::ModelFile file;
    file.opsets[""] = 13;
    file.graph.nodes = {node("MatMul", "mm", {"x", "w"}, {"p"}), node("Relu", "act", {"p"}, {"y"})};
    file.graph.initializers = {initializer("w", w, {k, n})};
    file.graph.inputs = {value("x", onnx::ElementType::float32, {2, m, k})};
    file.graph.outputs = {value("y", onnx::ElementType::float32, {2, m, n})};
    expect_near(run(file, x, Shape{2, m, k}).at(0), relu(product_reference(x, w, 2 * m, k, n, false)));
  }
}

}  // namespace
