// 3-d MaxPool (with Indices), AveragePool and ConvTranspose through onnx::Model, which
// composes them from Kiln's 2-d primitives (kiln/onnx/ops_nn.hpp), against naive loops
// written here from ONNX's definitions, on small random inputs with strides, pads (both
// symmetric and not), ceil_mode, count_include_pad, dilations, groups and output_padding;
// and the shapes that static inference gives them.
#include <kiln/cpu/backend.hpp>
#include <kiln/onnx/module.hpp>
#include <kiln/onnx/shapes.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::onnx::build;

namespace {

using Dims = std::vector<std::int64_t>;
using Index3 = std::array<std::int64_t, 3>;

std::vector<float> random_values(std::int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

std::int64_t numel(const Dims& d) {
  std::int64_t n = 1;
  for (const std::int64_t x : d) n *= x;
  return n;
}

// A window's attributes along the three spatial axes; pads as ONNX orders them (begins, then ends).
struct Window3 {
  Index3 kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  std::array<std::int64_t, 6> pads{};
  bool ceil_mode = false;

  std::int64_t output(std::size_t i, std::int64_t in) const {
    const std::int64_t span = dilation[i] * (kernel[i] - 1) + 1, room = in + pads[i] + pads[3 + i] - span;
    std::int64_t out = (ceil_mode ? room + stride[i] - 1 : room) / stride[i] + 1;
    if (ceil_mode && (out - 1) * stride[i] >= in + pads[i]) --out;  // no window starts in the end padding
    return out;
  }
  std::vector<onnx::Attribute> attributes() const {
    return {attr_ints("kernel_shape", Dims(kernel.begin(), kernel.end())),
            attr_ints("strides", Dims(stride.begin(), stride.end())), attr_ints("pads", Dims(pads.begin(), pads.end())),
            attr_int("ceil_mode", ceil_mode ? 1 : 0)};
  }
};

// One node over graph inputs "x" (and "w" where given), run on the CPU; each output as host data.
std::vector<TensorData> run_node(const std::string& op, std::vector<onnx::Attribute> attributes, const Dims& x_dims,
                                 const std::vector<float>& x, std::size_t outputs, const Dims& w_dims = {},
                                 const std::vector<float>& w = {}) {
  onnx::ModelFile file;
  file.opsets[""] = 19;
  std::vector<std::string> inputs{"x"}, names{"y", "indices"};
  names.resize(outputs);
  std::vector<TensorData> in{TensorData::from(x, Shape(x_dims))};
  file.graph.inputs = {value("x", onnx::ElementType::float32, x_dims)};
  if (!w.empty()) {
    inputs.push_back("w");
    in.push_back(TensorData::from(w, Shape(w_dims)));
    file.graph.inputs.push_back(value("w", onnx::ElementType::float32, w_dims));
  }
  file.graph.nodes = {node(op, "n", inputs, names, std::move(attributes))};
  file.graph.outputs = {value("y", onnx::ElementType::float32, {-1, -1, -1, -1, -1})};
  if (outputs > 1) file.graph.outputs.push_back(value("indices", onnx::ElementType::int64, {-1, -1, -1, -1, -1}));
  // Static shape inference (src/onnx/shape_rules_nn.cpp) must agree with the run.
  const auto inferred = onnx::infer_shapes(file.graph, 19);
  const onnx::Model<Cpu> model(std::move(file));
  std::vector<TensorData> out;
  for (const auto& p : model.run(std::span<const TensorData>(in))) out.push_back(Cpu::into_data(p));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::optional<Dims>& dims = inferred.at(names[k]).dims;
    EXPECT_TRUE(dims && *dims == out[k].shape().to_vector()) << op << " output " << names[k] << ": shape inference differs";
  }
  return out;
}

void expect_near(const TensorData& got, const Dims& want_dims, const std::vector<float>& want) {
  ASSERT_EQ(got.shape().to_vector(), want_dims);
  const std::vector<float> values = got.to_vec<float>();
  ASSERT_EQ(values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(values[i], want[i], 1e-5) << "at flat position " << i;
}

// Calls f(output position, list of (input flat offset within the channel, in-bounds)) for every
// window of a pooling of one [D, H, W] channel; `padded` counts the cells inside the padded input.
struct PoolVisit {
  std::int64_t out_flat;
  std::vector<std::int64_t> inside;  // flat [D, H, W] offsets of the window's input cells
  std::int64_t padded;               // the window's cells within the padded input
};
std::vector<PoolVisit> pool_windows(const Window3& win, const Index3& in, Index3& out) {
  for (std::size_t i = 0; i < 3; ++i) out[i] = win.output(i, in[i]);
  std::vector<PoolVisit> visits;
  for (std::int64_t od = 0; od < out[0]; ++od)
    for (std::int64_t oh = 0; oh < out[1]; ++oh)
      for (std::int64_t ow = 0; ow < out[2]; ++ow) {
        PoolVisit v{(od * out[1] + oh) * out[2] + ow, {}, 1};
        const Index3 o{od, oh, ow};
        Index3 count{};
        for (std::size_t i = 0; i < 3; ++i)
          for (std::int64_t k = 0; k < win.kernel[i]; ++k) {
            const std::int64_t at = o[i] * win.stride[i] - win.pads[i] + k * win.dilation[i];
            count[i] += at < in[i] + win.pads[3 + i] ? 1 : 0;
          }
        v.padded = count[0] * count[1] * count[2];
        for (std::int64_t kd = 0; kd < win.kernel[0]; ++kd)
          for (std::int64_t kh = 0; kh < win.kernel[1]; ++kh)
            for (std::int64_t kw = 0; kw < win.kernel[2]; ++kw) {
              const Index3 k{kd, kh, kw};
              Index3 at{};
              bool inside = true;
              for (std::size_t i = 0; i < 3; ++i) {
                at[i] = o[i] * win.stride[i] - win.pads[i] + k[i] * win.dilation[i];
                inside = inside && at[i] >= 0 && at[i] < in[i];
              }
              if (inside) v.inside.push_back((at[0] * in[1] + at[1]) * in[2] + at[2]);
            }
        visits.push_back(std::move(v));
      }
  return visits;
}

// A pooling test's input (random values) and the windows it visits, with the sizes the
// reference loops index by.
struct PoolCase {
  std::vector<float> x;
  Index3 in{}, out{};
  std::vector<PoolVisit> visits;
  std::int64_t channels = 0, per_in = 0, per_out = 0;

  PoolCase(const Window3& win, const Dims& x_dims, unsigned seed)
      : x(random_values(numel(x_dims), seed)), in{x_dims[2], x_dims[3], x_dims[4]} {
    visits = pool_windows(win, in, out);
    channels = x_dims[0] * x_dims[1];
    per_in = in[0] * in[1] * in[2];
    per_out = out[0] * out[1] * out[2];
  }
};

void check_max_pool(const Window3& win, const Dims& x_dims, unsigned seed, bool column_major) {
  const PoolCase pc(win, x_dims, seed);
  const auto& [x, in, out, visits, channels, per_in, per_out] = pc;
  std::vector<float> want(static_cast<std::size_t>(channels * per_out));
  std::vector<std::int64_t> want_index(want.size());
  for (std::int64_t c = 0; c < channels; ++c)
    for (const PoolVisit& v : visits) {
      float best = -std::numeric_limits<float>::infinity();
      std::int64_t best_at = -1;
      for (const std::int64_t at : v.inside)  // the first maximum in row-major order
        if (x[static_cast<std::size_t>(c * per_in + at)] > best) {
          best = x[static_cast<std::size_t>(c * per_in + at)];
          best_at = at;
        }
      const std::int64_t d = best_at / (in[1] * in[2]), h = best_at / in[2] % in[1], w = best_at % in[2];
      want[static_cast<std::size_t>(c * per_out + v.out_flat)] = best;
      want_index[static_cast<std::size_t>(c * per_out + v.out_flat)] =
          c * per_in + (column_major ? (w * in[1] + h) * in[0] + d : best_at);
    }
  std::vector<onnx::Attribute> attributes = win.attributes();
  attributes.push_back(attr_ints("dilations", Dims(win.dilation.begin(), win.dilation.end())));
  attributes.push_back(attr_int("storage_order", column_major ? 1 : 0));
  const std::vector<TensorData> got = run_node("MaxPool", attributes, x_dims, x, 2);
  const Dims y_dims{x_dims[0], x_dims[1], out[0], out[1], out[2]};
  expect_near(got.at(0), y_dims, want);
  ASSERT_EQ(got.at(1).shape().to_vector(), y_dims);
  EXPECT_EQ(got.at(1).to_vec<std::int64_t>(), want_index);
}

void check_average_pool(const Window3& win, const Dims& x_dims, unsigned seed, bool include_pad) {
  const PoolCase pc(win, x_dims, seed);
  const auto& [x, in, out, visits, channels, per_in, per_out] = pc;
  std::vector<float> want(static_cast<std::size_t>(channels * per_out));
  for (std::int64_t c = 0; c < channels; ++c)
    for (const PoolVisit& v : visits) {
      double sum = 0;
      for (const std::int64_t at : v.inside) sum += x[static_cast<std::size_t>(c * per_in + at)];
      const double count = include_pad ? static_cast<double>(v.padded) : static_cast<double>(v.inside.size());
      want[static_cast<std::size_t>(c * per_out + v.out_flat)] = static_cast<float>(sum / count);
    }
  std::vector<onnx::Attribute> attributes = win.attributes();
  attributes.push_back(attr_int("count_include_pad", include_pad ? 1 : 0));
  const std::vector<TensorData> got = run_node("AveragePool", attributes, x_dims, x, 1);
  expect_near(got.at(0), {x_dims[0], x_dims[1], out[0], out[1], out[2]}, want);
}

TEST(OnnxPool3d, MaxPoolWithStridesPadsAndCeilMode) {
  Window3 win;
  win.kernel = {3, 2, 3};
  win.stride = {2, 2, 1};
  win.pads = {1, 0, 1, 1, 1, 0};  // d symmetric, h and w not
  win.ceil_mode = true;
  check_max_pool(win, {2, 3, 6, 5, 7}, 1, false);
  check_max_pool(win, {1, 2, 5, 6, 4}, 2, true);
}

TEST(OnnxPool3d, MaxPoolWithDilationsAndFloorMode) {
  Window3 win;
  win.kernel = {2, 2, 2};
  win.stride = {1, 2, 2};
  win.dilation = {2, 1, 2};
  win.pads = {1, 1, 0, 1, 1, 0};
  check_max_pool(win, {1, 3, 6, 6, 7}, 3, false);
}

TEST(OnnxPool3d, AveragePoolWithPads) {
  Window3 win;
  win.kernel = {3, 3, 2};
  win.stride = {2, 1, 2};
  win.pads = {1, 1, 1, 1, 1, 0};  // fits the primitive along d and h, an explicit border along w
  for (const bool include_pad : {false, true}) {
    SCOPED_TRACE(include_pad ? "count_include_pad 1" : "count_include_pad 0");
    check_average_pool(win, {2, 2, 5, 6, 7}, 4, include_pad);
  }
}

TEST(OnnxPool3d, AveragePoolWithWidePadsAndCeilMode) {
  Window3 win;
  win.kernel = {2, 3, 3};
  win.stride = {2, 2, 3};
  win.pads = {1, 2, 0, 1, 2, 2};  // wider than half the kernel: explicit borders
  win.ceil_mode = true;
  for (const bool include_pad : {false, true}) {
    SCOPED_TRACE(include_pad ? "count_include_pad 1" : "count_include_pad 0");
    check_average_pool(win, {1, 3, 5, 6, 7}, 5, include_pad);
  }
}

// ConvTranspose from ONNX's definition: every input cell adds x * w[ic, oc, k] at
// i * stride + k * dilation - pads_begin; output_padding extends the end.
struct ConvTransposeCase {
  Dims x_dims;  // [N, IC, D, H, W]
  std::int64_t out_per_group, group;
  Index3 kernel, stride, dilation, output_padding;
  std::array<std::int64_t, 6> pads;
};

void check_conv_transpose(const ConvTransposeCase& t, unsigned seed) {
  const std::int64_t batch = t.x_dims[0], in_channels = t.x_dims[1], out_channels = t.out_per_group * t.group;
  const Index3 in{t.x_dims[2], t.x_dims[3], t.x_dims[4]};
  const Dims w_dims{in_channels, t.out_per_group, t.kernel[0], t.kernel[1], t.kernel[2]};
  const std::vector<float> x = random_values(numel(t.x_dims), seed), w = random_values(numel(w_dims), seed + 100);
  Index3 out{};
  for (std::size_t i = 0; i < 3; ++i)
    out[i] = t.stride[i] * (in[i] - 1) + t.output_padding[i] + (t.kernel[i] - 1) * t.dilation[i] + 1 - t.pads[i] -
             t.pads[3 + i];
  const Dims y_dims{batch, out_channels, out[0], out[1], out[2]};
  std::vector<double> want(static_cast<std::size_t>(numel(y_dims)), 0.0);
  const std::int64_t per_group_in = in_channels / t.group;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t ic = 0; ic < in_channels; ++ic)
      for (std::int64_t ocl = 0; ocl < t.out_per_group; ++ocl) {
        const std::int64_t oc = ic / per_group_in * t.out_per_group + ocl;
        for (std::int64_t id = 0; id < in[0]; ++id)
          for (std::int64_t ih = 0; ih < in[1]; ++ih)
            for (std::int64_t iw = 0; iw < in[2]; ++iw) {
              const std::int64_t x_at = (((n * in_channels + ic) * in[0] + id) * in[1] + ih) * in[2] + iw;
              const float xv = x[static_cast<std::size_t>(x_at)];
              for (std::int64_t kd = 0; kd < t.kernel[0]; ++kd)
                for (std::int64_t kh = 0; kh < t.kernel[1]; ++kh)
                  for (std::int64_t kw = 0; kw < t.kernel[2]; ++kw) {
                    const std::int64_t od = id * t.stride[0] + kd * t.dilation[0] - t.pads[0];
                    const std::int64_t oh = ih * t.stride[1] + kh * t.dilation[1] - t.pads[1];
                    const std::int64_t ow = iw * t.stride[2] + kw * t.dilation[2] - t.pads[2];
                    if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1] || ow < 0 || ow >= out[2]) continue;
                    const float wv = w[static_cast<std::size_t>(
                        (((ic * t.out_per_group + ocl) * t.kernel[0] + kd) * t.kernel[1] + kh) * t.kernel[2] + kw)];
                    want[static_cast<std::size_t>((((n * out_channels + oc) * out[0] + od) * out[1] + oh) * out[2] +
                                                  ow)] += static_cast<double>(xv) * wv;
                  }
            }
      }
  const std::vector<onnx::Attribute> attributes{
      attr_ints("strides", Dims(t.stride.begin(), t.stride.end())),
      attr_ints("dilations", Dims(t.dilation.begin(), t.dilation.end())),
      attr_ints("pads", Dims(t.pads.begin(), t.pads.end())),
      attr_ints("output_padding", Dims(t.output_padding.begin(), t.output_padding.end())),
      attr_int("group", t.group)};
  const std::vector<TensorData> got = run_node("ConvTranspose", attributes, t.x_dims, x, 1, w_dims, w);
  expect_near(got.at(0), y_dims, std::vector<float>(want.begin(), want.end()));
}

TEST(OnnxPool3d, ConvTransposeWithStridesPadsGroupsAndOutputPadding) {
  ConvTransposeCase t{{2, 4, 3, 4, 3}, 3, 2, {3, 2, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 0}, {1, 0, 1, 1, 1, 0}};
  check_conv_transpose(t, 6);
}

TEST(OnnxPool3d, ConvTransposeWithDilationsAndUnevenStrides) {
  ConvTransposeCase t{{1, 2, 4, 3, 5}, 2, 1, {2, 3, 2}, {3, 1, 2}, {2, 1, 2}, {2, 0, 1}, {0, 1, 2, 1, 0, 0}};
  check_conv_transpose(t, 7);
}

TEST(OnnxPool3d, FourSpatialDimsStayUnsupported) {
  const Dims x_dims{1, 1, 2, 2, 2, 2};
  onnx::ModelFile file;
  file.opsets[""] = 19;
  file.graph.inputs = {value("x", onnx::ElementType::float32, x_dims)};
  file.graph.nodes = {node("MaxPool", "n", {"x"}, {"y"}, {attr_ints("kernel_shape", {1, 1, 1, 1})})};
  file.graph.outputs = {value("y", onnx::ElementType::float32, {-1, -1, -1, -1, -1, -1})};
  const onnx::Model<Cpu> model(std::move(file));
  const std::vector<TensorData> in{TensorData::from(std::vector<float>(16, 1.0f), Shape(x_dims))};
  EXPECT_THROW((void)model.run(std::span<const TensorData>(in)), onnx::Unsupported);
}

}  // namespace
