// The ONNX reader (kiln/onnx/graph.hpp) on protobuf bytes written here by a small writer of the
// wire format: a model with every kind of attribute and initializer, each TensorProto data
// field and element type, external data, malformed bytes of every kind (each a kiln::Error
// naming the message and field), and, where Debian's libonnx-testdata is installed, every
// model and tensor of ONNX's node tests.
#include <kiln/onnx/graph.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::onnx::test {
namespace {

namespace fs = std::filesystem;

// ---- a protobuf writer

// One message's bytes, written field by field.
class Proto {
 public:
  Proto& varint(std::uint32_t field, std::uint64_t value) {
    tag(field, 0);
    put_varint(value);
    return *this;
  }
  Proto& float32(std::uint32_t field, float value) {
    tag(field, 5);
    put_le(std::bit_cast<std::uint32_t>(value));
    return *this;
  }
  Proto& float64(std::uint32_t field, double value) {
    tag(field, 1);
    put_le(std::bit_cast<std::uint64_t>(value));
    return *this;
  }
  Proto& bytes(std::uint32_t field, std::string_view data) {
    tag(field, 2);
    put_varint(data.size());
    bytes_ += data;
    return *this;
  }
  Proto& message(std::uint32_t field, const Proto& inner) { return bytes(field, inner.bytes_); }
  // Packed repeated fields: one length-delimited run of varints, floats or doubles.
  Proto& packed(std::uint32_t field, std::initializer_list<std::int64_t> values) {
    Proto run;
    for (const std::int64_t v : values) run.put_varint(static_cast<std::uint64_t>(v));
    return bytes(field, run.bytes_);
  }
  Proto& packed_floats(std::uint32_t field, std::initializer_list<float> values) {
    Proto run;
    for (const float v : values) run.put_le(std::bit_cast<std::uint32_t>(v));
    return bytes(field, run.bytes_);
  }
  Proto& packed_doubles(std::uint32_t field, std::initializer_list<double> values) {
    Proto run;
    for (const double v : values) run.put_le(std::bit_cast<std::uint64_t>(v));
    return bytes(field, run.bytes_);
  }
  // Bytes as they are, for malformed input.
  Proto& raw(std::string_view data) {
    bytes_ += data;
    return *this;
  }

  const std::string& str() const { return bytes_; }
  std::span<const std::byte> span() const { return std::as_bytes(std::span(bytes_)); }

 private:
  void tag(std::uint32_t field, std::uint32_t wire) { put_varint(std::uint64_t{field} << 3 | wire); }
  void put_varint(std::uint64_t value) {
    for (; value >= 0x80; value >>= 7) bytes_ += static_cast<char>((value & 0x7f) | 0x80);
    bytes_ += static_cast<char>(value);
  }
  template <class T> void put_le(T bits) {
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  std::string bytes_;
};

// Values as little-endian raw_data.
template <class T> std::string le(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (values.size() != 0) std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// Field numbers of onnx.proto.
namespace model_field {
enum : std::uint32_t { ir_version = 1, producer_name = 2, producer_version = 3, graph = 7, opset_import = 8 };
}
namespace opset_field {
enum : std::uint32_t { domain = 1, version = 2 };
}
namespace graph_field {
enum : std::uint32_t { node = 1, name = 2, initializer = 5, input = 11, output = 12, value_info = 13 };
}
namespace node_field {
enum : std::uint32_t { input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7 };
}
namespace attr_field {
enum : std::uint32_t {
  name = 1,
  f = 2,
  i = 3,
  s = 4,
  t = 5,
  g = 6,
  floats = 7,
  ints = 8,
  strings = 9,
  tensors = 10,
  graphs = 11,
  type = 20
};
}
namespace tensor_field {
enum : std::uint32_t {
  dims = 1,
  data_type = 2,
  float_data = 4,
  int32_data = 5,
  string_data = 6,
  int64_data = 7,
  name = 8,
  raw_data = 9,
  double_data = 10,
  uint64_data = 11,
  external_data = 13,
  data_location = 14
};
}

// ---- ONNX messages

Proto tensor(std::string_view name, ElementType type, std::initializer_list<std::int64_t> dims) {
  Proto t;
  for (const std::int64_t d : dims) t.varint(tensor_field::dims, static_cast<std::uint64_t>(d));
  t.varint(tensor_field::data_type, static_cast<std::uint64_t>(type));
  if (!name.empty()) t.bytes(tensor_field::name, name);
  return t;
}

Proto attribute(std::string_view name, Attribute::Kind kind) {
  return Proto().bytes(attr_field::name, name).varint(attr_field::type, static_cast<std::uint64_t>(kind));
}

// A dimension: a number, a symbolic name, or "" for one with neither.
using DimSpec = std::variant<std::int64_t, std::string_view>;

Proto value_info(std::string_view name, ElementType type, std::initializer_list<DimSpec> dims) {
  Proto shape;
  for (const DimSpec& d : dims) {
    Proto dim;
    if (const auto* value = std::get_if<std::int64_t>(&d))
      dim.varint(1, static_cast<std::uint64_t>(*value));
    else if (!std::get<std::string_view>(d).empty())
      dim.bytes(2, std::get<std::string_view>(d));
    shape.message(1, dim);
  }
  const Proto tensor_type = Proto().varint(1, static_cast<std::uint64_t>(type)).message(2, shape);
  return Proto().bytes(1, name).message(2, Proto().message(1, tensor_type));
}

Proto opset(std::string_view domain, std::int64_t version) {
  return Proto().bytes(opset_field::domain, domain).varint(opset_field::version, static_cast<std::uint64_t>(version));
}

// A model around `graph`, importing opset 17 of the default domain.
Proto model_of(const Proto& graph) {
  return Proto()
      .varint(model_field::ir_version, 8)
      .message(model_field::opset_import, opset("", 17))
      .message(model_field::graph, graph);
}

ModelFile model_from(const Proto& model) { return parse_model(model.span(), "model.onnx"); }
TensorValue tensor_from(const Proto& tensor, const ParseOptions& options = {}) {
  return parse_tensor(tensor.span(), "tensor.pb", options);
}

template <class T> std::vector<T> values_of(const TensorValue& t) {
  const auto span = t.values("test").as<T>();
  return {span.begin(), span.end()};
}

// A fresh folder, removed with its content at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-onnx-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ---- a model

// Two nodes with every common kind of attribute, two initializers (raw_data and float_data),
// inputs with symbolic and unknown dims.
Proto sample_graph() {
  const Proto conv =
      Proto()
          .bytes(node_field::input, "x")
          .bytes(node_field::input, "w")
          .bytes(node_field::input, "")  // an omitted optional input
          .bytes(node_field::output, "y")
          .bytes(node_field::name, "conv1")
          .bytes(node_field::op_type, "Conv")
          .message(node_field::attribute, attribute("strides", Attribute::Kind::ints).packed(attr_field::ints, {2, 2}))
          .message(node_field::attribute, attribute("group", Attribute::Kind::i).varint(attr_field::i, 1))
          .message(node_field::attribute, attribute("alpha", Attribute::Kind::f).float32(attr_field::f, 0.25f))
          .message(node_field::attribute, attribute("auto_pad", Attribute::Kind::s).bytes(attr_field::s, "SAME_UPPER"));
  const Proto constant =
      Proto()
          .bytes(node_field::output, "c")
          .bytes(node_field::op_type, "Constant")
          .message(node_field::attribute,
                   attribute("value", Attribute::Kind::tensor)
                       .message(attr_field::t,
                                tensor("", ElementType::int64, {2}).packed(tensor_field::int64_data, {-1, 7})))
          .message(node_field::attribute,  // unpacked ints, negative
                   attribute("axes", Attribute::Kind::ints).varint(attr_field::ints, 0).varint(attr_field::ints, ~0ull))
          .message(node_field::attribute,
                   attribute("scales", Attribute::Kind::floats).packed_floats(attr_field::floats, {1.5f, -2.0f}))
          .message(node_field::attribute, attribute("names", Attribute::Kind::strings)
                                              .bytes(attr_field::strings, "a")
                                              .bytes(attr_field::strings, "bc"));
  return Proto()
      .message(graph_field::node, conv)
      .message(graph_field::node, constant)
      .bytes(graph_field::name, "main")
      .message(graph_field::initializer,
               tensor("w", ElementType::float32, {2, 3}).bytes(tensor_field::raw_data, le<float>({1, 2, 3, 4, 5, 6})))
      .message(graph_field::initializer, tensor("b", ElementType::float32, {2})
                                             .float32(tensor_field::float_data, 0.5f)
                                             .float32(tensor_field::float_data, -1))
      .message(graph_field::input,
               value_info("x", ElementType::float32, {std::string_view("batch"), 3, std::string_view("")}))
      .message(graph_field::output, value_info("y", ElementType::float32, {}));
}

TEST(OnnxParse, Model) {
  const Proto bytes = model_of(sample_graph())
                          .message(model_field::opset_import, opset("com.microsoft", 1))
                          .bytes(model_field::producer_name, "kiln-test")
                          .bytes(model_field::producer_version, "0.1");
  const ModelFile model = model_from(bytes);
  EXPECT_EQ(model.ir_version, 8);
  EXPECT_EQ(model.producer_name, "kiln-test");
  EXPECT_EQ(model.producer_version, "0.1");
  EXPECT_EQ(model.opset(), 17);
  EXPECT_EQ(model.opsets.at("com.microsoft"), 1);

  const Graph& graph = model.graph;
  EXPECT_EQ(graph.name, "main");
  ASSERT_EQ(graph.nodes.size(), 2u);
  const Node& conv = graph.nodes[0];
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.inputs, (std::vector<std::string>{"x", "w", ""}));
  EXPECT_EQ(conv.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(conv.describe(), "Conv node 'conv1'");
  EXPECT_EQ(conv.attr_ints("strides"), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(conv.attr_int("group", 7), 1);
  EXPECT_EQ(conv.attr_int("missing", 7), 7);
  EXPECT_EQ(conv.attr_float("alpha", 1), 0.25);
  EXPECT_EQ(conv.attr_string("auto_pad", "NOTSET"), "SAME_UPPER");
  EXPECT_EQ(conv.attr_string("missing", "NOTSET"), "NOTSET");
  EXPECT_EQ(conv.attr_ints("missing", {1, 1}), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(conv.attr_tensor("missing"), nullptr);
  EXPECT_KILN_ERROR(conv.attr_int("strides", 0), "Conv node 'conv1'", "attribute 'strides' is INTS, not INT");
  EXPECT_KILN_ERROR(conv.attr_floats("alpha"), "attribute 'alpha' is FLOAT, not FLOATS");

  const Node& constant = graph.nodes[1];
  EXPECT_EQ(constant.describe(), "Constant node (unnamed, outputs 'c')");
  const TensorValue* value = constant.attr_tensor("value");
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->type, ElementType::int64);
  EXPECT_EQ(values_of<std::int64_t>(*value), (std::vector<std::int64_t>{-1, 7}));
  EXPECT_EQ(constant.attr_ints("axes"), (std::vector<std::int64_t>{0, -1}));
  EXPECT_EQ(constant.attr_floats("scales"), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(constant.attr_strings("names"), (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(constant.attr_strings("missing"), std::vector<std::string>{});

  ASSERT_EQ(graph.initializers.size(), 2u);
  const TensorValue& w = graph.initializers[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.dims, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w.values("w").shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(w), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values_of<float>(graph.initializers[1]), (std::vector<float>{0.5f, -1}));

  ASSERT_EQ(graph.inputs.size(), 1u);
  const ValueInfo& x = graph.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.type, ElementType::float32);
  EXPECT_TRUE(x.is_tensor());
  ASSERT_TRUE(x.shape.has_value());
  ASSERT_EQ(x.shape->size(), 3u);
  EXPECT_EQ((*x.shape)[0].param, "batch");
  EXPECT_EQ((*x.shape)[0].value, -1);
  EXPECT_EQ((*x.shape)[1].value, 3);
  EXPECT_EQ((*x.shape)[2].value, -1);
  EXPECT_EQ((*x.shape)[2].param, "");
  ASSERT_EQ(graph.outputs.size(), 1u);
  ASSERT_TRUE(graph.outputs[0].shape.has_value());  // declared, of rank 0
  EXPECT_TRUE(graph.outputs[0].shape->empty());
}

TEST(OnnxParse, OpsetOfTheDefaultDomain) {
  const Proto graph = Proto().bytes(graph_field::name, "g");
  const Proto spelled =
      Proto().message(model_field::opset_import, opset("ai.onnx", 13)).message(model_field::graph, graph);
  EXPECT_EQ(model_from(spelled).opset(), 13);
  const Proto other =
      Proto().message(model_field::opset_import, opset("com.microsoft", 1)).message(model_field::graph, graph);
  EXPECT_KILN_ERROR(model_from(other).opset(), "opset_import names no version of the default domain (ai.onnx)",
                    "it imports only com.microsoft");
  EXPECT_KILN_ERROR(model_from(Proto().message(model_field::graph, graph)).opset(), "it imports nothing");
}

TEST(OnnxParse, AttributeKindWithoutType) {
  // Files of early IR versions have no `type`: it comes from the field that is present.
  const Proto node = Proto()
                         .bytes(node_field::op_type, "Old")
                         .bytes(node_field::output, "y")
                         .message(node_field::attribute, Proto().bytes(attr_field::name, "i").varint(attr_field::i, 5))
                         .message(node_field::attribute, Proto().bytes(attr_field::name, "f").float32(attr_field::f, 2))
                         .message(node_field::attribute,
                                  Proto().bytes(attr_field::name, "fs").packed_floats(attr_field::floats, {1, 2}))
                         .message(node_field::attribute, Proto().bytes(attr_field::name, "empty"));
  const ModelFile model = model_from(model_of(Proto().message(graph_field::node, node)));
  const Node& n = model.graph.nodes.at(0);
  EXPECT_EQ(n.find("i")->kind, Attribute::Kind::i);
  EXPECT_EQ(n.attr_int("i", 0), 5);
  EXPECT_EQ(n.attr_float("f", 0), 2);
  EXPECT_EQ(n.attr_floats("fs"), (std::vector<double>{1, 2}));
  // An attribute with no type and no value was an empty list.
  EXPECT_EQ(n.find("empty")->kind, Attribute::Kind::undefined);
  EXPECT_EQ(n.attr_ints("empty", {3}), std::vector<std::int64_t>{});
  EXPECT_KILN_ERROR(n.attr_int("empty", 0), "Old node (unnamed, outputs 'y')",
                    "attribute 'empty' is UNDEFINED, not INT");
  EXPECT_EQ(attribute_kind_name(Attribute::Kind::type_protos), "TYPE_PROTOS");
}

TEST(OnnxParse, GraphAttribute) {
  const Proto body = Proto()
                         .bytes(graph_field::name, "body")
                         .message(graph_field::node, Proto()
                                                         .bytes(node_field::op_type, "Identity")
                                                         .bytes(node_field::input, "a")
                                                         .bytes(node_field::output, "b"));
  const Proto loop = Proto()
                         .bytes(node_field::op_type, "If")
                         .message(node_field::attribute,
                                  attribute("then_branch", Attribute::Kind::graph).message(attr_field::g, body));
  const ModelFile model = model_from(model_of(Proto().message(graph_field::node, loop)));
  const Attribute* branch = model.graph.nodes.at(0).find("then_branch");
  ASSERT_NE(branch, nullptr);
  ASSERT_NE(branch->graph, nullptr);
  EXPECT_EQ(branch->graph->name, "body");
  EXPECT_EQ(branch->graph->nodes.at(0).op_type, "Identity");
}

// ---- TensorProto data fields and element types

TEST(OnnxTensor, TypedFieldsPackedAndUnpacked) {
  using E = ElementType;
  EXPECT_EQ(
      values_of<float>(tensor_from(tensor("t", E::float32, {2}).packed_floats(tensor_field::float_data, {1.5f, -2}))),
      (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(values_of<double>(tensor_from(tensor("t", E::float64, {3})
                                              .packed_doubles(tensor_field::double_data, {0.25, -1})
                                              .float64(tensor_field::double_data, 1e300))),  // packed, then unpacked
            (std::vector<double>{0.25, -1, 1e300}));
  EXPECT_EQ(values_of<std::int32_t>(
                tensor_from(tensor("t", E::int32, {3}).packed(tensor_field::int32_data, {-5, 0, 2147483647}))),
            (std::vector<std::int32_t>{-5, 0, 2147483647}));
  EXPECT_EQ(
      values_of<std::int32_t>(tensor_from(
          tensor("t", E::int32, {2}).varint(tensor_field::int32_data, ~0ull).varint(tensor_field::int32_data, 9))),
      (std::vector<std::int32_t>{-1, 9}));
  EXPECT_EQ(
      values_of<std::int64_t>(tensor_from(tensor("t", E::int64, {2}).packed(tensor_field::int64_data, {INT64_MIN, 3}))),
      (std::vector<std::int64_t>{INT64_MIN, 3}));
  EXPECT_EQ(values_of<std::int64_t>(tensor_from(tensor("t", E::int64, {1}).varint(tensor_field::int64_data, 42))),
            std::vector<std::int64_t>{42});
  EXPECT_EQ(
      values_of<std::uint8_t>(tensor_from(tensor("t", E::uint8, {3}).packed(tensor_field::int32_data, {0, 128, 255}))),
      (std::vector<std::uint8_t>{0, 128, 255}));
  // A bool is stored as 0 or 1 whatever the non-zero value was.
  const TensorValue flags = tensor_from(tensor("t", E::boolean, {3}).packed(tensor_field::int32_data, {0, 1, 2}));
  EXPECT_EQ(flags.values("t").dtype(), DType::boolean);
  EXPECT_EQ(std::vector<std::byte>(flags.values("t").bytes().begin(), flags.values("t").bytes().end()),
            (std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{1}}));
  // The 16-bit floats are their bit patterns in int32_data.
  const TensorValue half = tensor_from(tensor("t", E::float16, {2}).packed(tensor_field::int32_data, {0x3c00, 0xc000}));
  EXPECT_EQ(half.values("t").to_vec<float>(), (std::vector<float>{1, -2}));
  const TensorValue brain =
      tensor_from(tensor("t", E::bfloat16, {2}).packed(tensor_field::int32_data, {0x3f80, 0xc040}));
  EXPECT_EQ(brain.values("t").dtype(), DType::bf16);
  EXPECT_EQ(brain.values("t").to_vec<float>(), (std::vector<float>{1, -3}));
}

TEST(OnnxTensor, RawDataOfEveryHeldType) {
  using E = ElementType;
  EXPECT_EQ(
      values_of<float>(tensor_from(tensor("t", E::float32, {2}).bytes(tensor_field::raw_data, le<float>({1, -0.5f})))),
      (std::vector<float>{1, -0.5f}));
  EXPECT_EQ(
      values_of<double>(tensor_from(tensor("t", E::float64, {1}).bytes(tensor_field::raw_data, le<double>({3.25})))),
      std::vector<double>{3.25});
  EXPECT_EQ(tensor_from(tensor("t", E::float16, {1}).bytes(tensor_field::raw_data, le<std::uint16_t>({0x3800})))
                .values("t")
                .to_vec<float>(),
            std::vector<float>{0.5f});
  EXPECT_EQ(tensor_from(tensor("t", E::bfloat16, {1}).bytes(tensor_field::raw_data, le<std::uint16_t>({0x4000})))
                .values("t")
                .to_vec<float>(),
            std::vector<float>{2});
  EXPECT_EQ(values_of<std::int32_t>(
                tensor_from(tensor("t", E::int32, {2}).bytes(tensor_field::raw_data, le<std::int32_t>({-7, 8})))),
            (std::vector<std::int32_t>{-7, 8}));
  EXPECT_EQ(values_of<std::int64_t>(
                tensor_from(tensor("t", E::int64, {1}).bytes(tensor_field::raw_data, le<std::int64_t>({-9})))),
            std::vector<std::int64_t>{-9});
  EXPECT_EQ(
      values_of<std::uint8_t>(tensor_from(tensor("t", E::uint8, {2, 1}).bytes(tensor_field::raw_data, "\x01\xff"))),
      (std::vector<std::uint8_t>{1, 255}));
  const TensorValue flags =
      tensor_from(tensor("t", E::boolean, {2}).bytes(tensor_field::raw_data, std::string("\x00\x07", 2)));
  EXPECT_EQ(flags.values("t").to_vec<std::int32_t>(), (std::vector<std::int32_t>{0, 1}));
}

TEST(OnnxTensor, ShapesOfScalarsAndEmptyTensors) {
  const TensorValue scalar = tensor_from(tensor("s", ElementType::float32, {}).float32(tensor_field::float_data, 4));
  EXPECT_TRUE(scalar.dims.empty());
  EXPECT_EQ(scalar.values("s").shape(), Shape{});
  EXPECT_EQ(values_of<float>(scalar), std::vector<float>{4});
  const TensorValue empty = tensor_from(tensor("e", ElementType::int64, {0, 3}));
  EXPECT_EQ(empty.values("e").shape(), (Shape{0, 3}));
  EXPECT_EQ(empty.values("e").numel(), 0);
  const TensorValue empty_raw =
      tensor_from(tensor("e", ElementType::float32, {2, 0}).bytes(tensor_field::raw_data, ""));
  EXPECT_EQ(empty_raw.values("e").numel(), 0);
}

TEST(OnnxTensor, NarrowIntegersAreHeldWider) {
  using E = ElementType;
  // INT8, INT16 and UINT16 in i32; UINT32 and UINT64 in i64; typed fields and raw bytes alike.
  const TensorValue int8 = tensor_from(tensor("q", E::int8, {2}).packed(tensor_field::int32_data, {-128, 127}));
  EXPECT_EQ(int8.type, E::int8);
  EXPECT_EQ(int8.values("q").dtype(), DType::i32);
  EXPECT_EQ(int8.values("q").to_vec<std::int32_t>(), (std::vector<std::int32_t>{-128, 127}));
  EXPECT_KILN_ERROR(tensor_from(tensor("q", E::int8, {1}).packed(tensor_field::int32_data, {128})),
                    "int32_data[0] is 128, outside the range of INT8");
  const TensorValue raw8 = tensor_from(tensor("q", E::int8, {2}).bytes(tensor_field::raw_data, "\xff\x05"));
  EXPECT_EQ(raw8.values("q").to_vec<std::int32_t>(), (std::vector<std::int32_t>{-1, 5}));
  const TensorValue int16 = tensor_from(tensor("t", E::int16, {1}).bytes(tensor_field::raw_data, "\xfe\xff"));
  EXPECT_EQ(int16.values("t").to_vec<std::int32_t>(), (std::vector<std::int32_t>{-2}));
  const TensorValue uint16 = tensor_from(tensor("t", E::uint16, {1}).packed(tensor_field::int32_data, {65535}));
  EXPECT_EQ(uint16.values("t").to_vec<std::int32_t>(), (std::vector<std::int32_t>{65535}));
  const TensorValue uint32 =
      tensor_from(tensor("t", E::uint32, {2}).packed(tensor_field::uint64_data, {1, 4294967295}));
  EXPECT_EQ(uint32.values("t").dtype(), DType::i64);
  EXPECT_EQ(uint32.values("t").to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 4294967295}));
  const TensorValue uint64 = tensor_from(tensor("t", E::uint64, {1}).varint(tensor_field::uint64_data, 1ull << 62));
  EXPECT_EQ(uint64.values("t").to_vec<std::int64_t>(), (std::vector<std::int64_t>{std::int64_t{1} << 62}));
  // A UINT64 value beyond int64 is not held: the tensor keeps its type and dims only.
  const TensorValue huge = tensor_from(tensor("t", E::uint64, {1}).varint(tensor_field::uint64_data, ~0ull));
  EXPECT_FALSE(huge.data.has_value());
  EXPECT_KILN_ERROR(huge.values("Gather"), "Gather", "tensor 't' holds UINT64 values", "up to 2^63 - 1");
}

TEST(OnnxTensor, TypesKilnDoesNotHoldKeepTheirTypeAndDims) {
  using E = ElementType;
  const TensorValue strings = tensor_from(
      tensor("s", E::string, {2}).bytes(tensor_field::string_data, "ab").bytes(tensor_field::string_data, ""));
  EXPECT_EQ(strings.type, E::string);
  EXPECT_EQ(strings.dims, std::vector<std::int64_t>{2});
  EXPECT_FALSE(strings.data.has_value());
  EXPECT_EQ(strings.strings, (std::vector<std::string>{"ab", ""}));
  // COMPLEX64: two floats per element.
  const TensorValue complex =
      tensor_from(tensor("c", E::complex64, {1}).packed_floats(tensor_field::float_data, {1, 2}));
  EXPECT_FALSE(complex.data.has_value());
  EXPECT_KILN_ERROR(complex.values("Mul"), "Mul", "tensor 'c' holds COMPLEX64 values",
                    "FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL, FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16");
  EXPECT_KILN_ERROR(tensor_from(tensor("c", E::complex64, {2}).packed_floats(tensor_field::float_data, {1, 2})),
                    "float_data holds 2 values, dims [2] of COMPLEX64 need 4");
  // A type of a later ONNX version (17: FLOAT8E4M3FN) is kept as its number.
  const TensorValue fp8 = tensor_from(tensor("f", static_cast<E>(17), {2}).bytes(tensor_field::raw_data, "ab"));
  EXPECT_EQ(static_cast<int>(fp8.type), 17);
  EXPECT_EQ(element_type_name(fp8.type), "TYPE 17");
  EXPECT_FALSE(fp8.data.has_value());
}

TEST(OnnxTensor, ElementTypeNamesAndDTypes) {
  EXPECT_EQ(element_type_name(ElementType::float32), "FLOAT");
  EXPECT_EQ(element_type_name(ElementType::float64), "DOUBLE");
  EXPECT_EQ(element_type_name(ElementType::undefined), "UNDEFINED");
  EXPECT_EQ(dtype_of(ElementType::int8), std::nullopt);
  for (int i = 0; i < dtype_count; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(dtype_of(element_type_of(dtype)), dtype) << dtype_name(dtype);
  }
}

// ---- external data

Proto external_tensor(std::string_view location,
                      std::initializer_list<std::pair<std::string_view, std::string_view>> more = {}) {
  Proto t = tensor("w", ElementType::float32, {2, 3}).varint(tensor_field::data_location, 1);
  t.message(tensor_field::external_data, Proto().bytes(1, "location").bytes(2, location));
  for (const auto& [key, value] : more) t.message(tensor_field::external_data, Proto().bytes(1, key).bytes(2, value));
  return t;
}

TEST(OnnxExternalData, ReadFromTheModelsFolder) {
  const TempDir dir;
  fs::create_directory(dir.path() / "data");
  write_file(dir.path() / "data" / "weights.bin", std::string(16, 'x') + le<float>({1, 2, 3, 4, 5, 6}) + "tail");
  const ParseOptions options{.external_data_dir = dir.path()};
  const TensorValue w = tensor_from(external_tensor("data/weights.bin", {{"offset", "16"}, {"length", "24"}}), options);
  EXPECT_EQ(values_of<float>(w), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // Without a length, the data runs to the end of the file.
  write_file(dir.path() / "whole.bin", le<float>({6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(values_of<float>(tensor_from(external_tensor("./whole.bin"), options)),
            (std::vector<float>{6, 5, 4, 3, 2, 1}));

  // load_model looks beside the model file.
  const Proto graph = Proto().message(graph_field::initializer, external_tensor("whole.bin"));
  write_file(dir.path() / "model.onnx", model_of(graph).str());
  const ModelFile model = load_model(dir.path() / "model.onnx");
  EXPECT_EQ(values_of<float>(model.graph.initializers.at(0)), (std::vector<float>{6, 5, 4, 3, 2, 1}));

  // The bytes must fit the dims and the file.
  EXPECT_KILN_ERROR(tensor_from(external_tensor("data/weights.bin", {{"offset", "16"}, {"length", "20"}}), options),
                    "TensorProto 'w'", "external data 'data/weights.bin' holds 20 bytes, dims [2, 3] of FLOAT need 24");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("whole.bin", {{"offset", "25"}}), options),
                    "offset 25 is past the end");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("whole.bin", {{"offset", "8"}, {"length", "24"}}), options),
                    "offset 8 and length 24 run past the end");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("whole.bin", {{"offset", "-1"}}), options), "offset '-1' is not");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("missing.bin"), options), "cannot open the external data file");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("data"), options), "is a directory");
}

TEST(OnnxExternalData, LocationMustStayInsideTheFolder) {
  const TempDir dir;
  fs::create_directory(dir.path() / "model");
  write_file(dir.path() / "secret.bin", le<float>({1, 2, 3, 4, 5, 6}));
  const ParseOptions options{.external_data_dir = dir.path() / "model"};
  EXPECT_KILN_ERROR(tensor_from(external_tensor("../secret.bin"), options),
                    "location '../secret.bin' leads out of the model's folder");
  EXPECT_KILN_ERROR(tensor_from(external_tensor("a/../../secret.bin"), options), "leads out of the model's folder");
  EXPECT_KILN_ERROR(tensor_from(external_tensor((dir.path() / "secret.bin").string()), options),
                    "is not a path relative");
  EXPECT_KILN_ERROR(tensor_from(external_tensor(""), options), "is not a path relative");
  // Without a folder (parse_model from memory), external data cannot be read at all.
  EXPECT_KILN_ERROR(tensor_from(external_tensor("w.bin")), "no folder to find it in was given");
  const Proto no_location = tensor("w", ElementType::float32, {1}).varint(tensor_field::data_location, 1);
  EXPECT_KILN_ERROR(tensor_from(no_location, options), "has no 'location'");
}

// ---- malformed bytes

TEST(OnnxMalformed, WireFormat) {
  EXPECT_KILN_ERROR(parse_model(Proto().raw("\x08\x80").span(), "cut.onnx"), "onnx: cut.onnx: ModelProto",
                    "varint at byte 1 is truncated");
  EXPECT_KILN_ERROR(parse_model(Proto()
                                    .raw("\x3a\x05"
                                         "ab")
                                    .span(),
                                "short.onnx"),
                    "field 7 at byte 0 declares 5 bytes", "has 2 left");
  EXPECT_KILN_ERROR(parse_model(Proto().raw("\x08" + std::string(10, '\x80') + "\x01").span(), "long.onnx"),
                    "varint at byte 1 is longer than 10 bytes");
  EXPECT_KILN_ERROR(parse_model(Proto().raw("\x08" + std::string(9, '\xff') + "\x02").span(), "wide.onnx"),
                    "does not fit 64 bits");
  EXPECT_KILN_ERROR(parse_model(Proto().raw("\x0b").span(), "group.onnx"), "is a group");
  EXPECT_KILN_ERROR(parse_model(Proto().raw("\x0e").span(), "wire6.onnx"),
                    "wire type 6, which protobuf does not define");
  EXPECT_KILN_ERROR(parse_model(Proto().raw(std::string_view("\x00\x00", 2)).span(), "zero.onnx"), "has number 0");
  EXPECT_KILN_ERROR(parse_model(Proto()
                                    .raw("\x0d"
                                         "ab")
                                    .span(),
                                "fixed.onnx"),
                    "needs 4 bytes");
  // A known field of the wrong wire type.
  EXPECT_KILN_ERROR(tensor_from(Proto().bytes(tensor_field::data_type, "x")), "onnx: tensor.pb: TensorProto",
                    "field data_type (2) at byte 0 is length-delimited", "but data_type is varint");
  EXPECT_KILN_ERROR(parse_model(Proto().varint(model_field::graph, 1).span(), "m.onnx"), "field graph (7)");
  EXPECT_KILN_ERROR(tensor_from(tensor("t", ElementType::float32, {1}).varint(tensor_field::float_data, 1)),
                    "field float_data (4)", "but float_data is 32-bit");
  EXPECT_KILN_ERROR(tensor_from(tensor("t", ElementType::float32, {1}).bytes(tensor_field::float_data, "abcde")),
                    "packed field float_data (4)", "holds 5 bytes, not a whole number of 4-byte values");
  EXPECT_KILN_ERROR(tensor_from(tensor("t", ElementType::int32, {1}).varint(tensor_field::int32_data, 1ull << 40)),
                    "does not fit in an int32");
  EXPECT_KILN_ERROR(parse_model(Proto().varint(model_field::ir_version, 8).span(), "m.onnx"), "has no graph");
}

TEST(OnnxMalformed, ErrorsNameWhereInTheModel) {
  const Proto bad = tensor("w", ElementType::float32, {2}).bytes(tensor_field::raw_data, "abc");
  const Proto node =
      Proto()
          .bytes(node_field::name, "c")
          .bytes(node_field::op_type, "Constant")
          .message(node_field::attribute, attribute("value", Attribute::Kind::tensor).message(attr_field::t, bad));
  EXPECT_KILN_ERROR(model_from(model_of(Proto().bytes(graph_field::name, "main").message(graph_field::node, node))),
                    "onnx: model.onnx: TensorProto 'w' in AttributeProto 'value' in NodeProto #0 'c' (Constant) in "
                    "GraphProto 'main': raw_data holds 3 bytes, dims [2] of FLOAT need 8");
  EXPECT_KILN_ERROR(
      model_from(model_of(Proto().bytes(graph_field::name, "main").message(graph_field::initializer, bad))),
      "onnx: model.onnx: TensorProto 'w' in GraphProto 'main': raw_data holds 3 bytes");
  // Names from the file are quoted with their control bytes escaped.
  EXPECT_KILN_ERROR(tensor_from(tensor("a\nb", ElementType::float32, {1})),
                    "TensorProto 'a\\x0ab': float_data holds 0");
}

TEST(OnnxParse, DescribeNodes) {
  Node node;
  node.op_type = "QGemm";
  node.domain = "com.microsoft";
  EXPECT_EQ(node.describe(), "com.microsoft.QGemm node (unnamed, no outputs)");
  node.domain = "ai.onnx";
  node.outputs = {"y", "z"};
  EXPECT_EQ(node.describe(), "QGemm node (unnamed, outputs 'y', 'z')");
  node.name = "q";
  EXPECT_EQ(node.describe(), "QGemm node 'q'");
}

TEST(OnnxMalformed, TensorValues) {
  using E = ElementType;
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {2, 3}).bytes(tensor_field::raw_data, std::string(12, '\0'))),
                    "onnx: tensor.pb: TensorProto 'w': raw_data holds 12 bytes, dims [2, 3] of FLOAT need 24");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {2, -3})), "dims[1] is -3", "must all be >= 0");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {1ll << 40, 1ll << 40})),
                    "hold more elements than fit in 64 bits");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::int8, {INT64_MAX}).bytes(tensor_field::raw_data, "a")),
                    "raw_data holds 1 bytes");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::int64, {INT64_MAX}).bytes(tensor_field::raw_data, "a")),
                    "need more than 2^64");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {3}).packed_floats(tensor_field::float_data, {1, 2})),
                    "float_data holds 2 values, dims [3] of FLOAT need 3");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {2})), "float_data holds 0 values, dims [2] of FLOAT need 2");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {1}).packed(tensor_field::int64_data, {1})),
                    "int64_data holds 1 values, but FLOAT values belong in float_data");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float32, {1})
                                    .bytes(tensor_field::raw_data, le<float>({1}))
                                    .float32(tensor_field::float_data, 1)),
                    "holds values in both raw_data and float_data");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::uint8, {1}).varint(tensor_field::int32_data, 256)),
                    "int32_data[0] is 256, outside the range of UINT8 (0 to 255)");
  EXPECT_KILN_ERROR(tensor_from(tensor("w", E::float16, {1}).varint(tensor_field::int32_data, ~0ull)),
                    "int32_data[0] is -1, outside the range of FLOAT16");
  EXPECT_KILN_ERROR(tensor_from(tensor("s", E::string, {1}).bytes(tensor_field::raw_data, "a")),
                    "STRING tensor's values are in string_data");
  EXPECT_KILN_ERROR(tensor_from(Proto().bytes(tensor_field::name, "n")),
                    "TensorProto 'n': data_type is missing (UNDEFINED)");
  EXPECT_KILN_ERROR(tensor_from(tensor("n", static_cast<E>(-4), {})), "data_type is -4");
}

TEST(OnnxMalformed, AttributeType) {
  const Proto node =
      Proto()
          .bytes(node_field::op_type, "X")
          .message(node_field::attribute, Proto().bytes(attr_field::name, "a").varint(attr_field::type, 99));
  EXPECT_KILN_ERROR(model_from(model_of(Proto().message(graph_field::node, node))), "AttributeProto 'a'",
                    "type is 99, not an AttributeProto.AttributeType");
}

// Graphs in the attributes of graphs: `levels` subgraphs deep.
Proto nested_graph(int levels) {
  Proto graph = Proto().bytes(graph_field::name, "innermost");
  for (int i = 0; i < levels; ++i) {
    const Proto node = Proto()
                           .bytes(node_field::op_type, "If")
                           .message(node_field::attribute,
                                    attribute("then_branch", Attribute::Kind::graph).message(attr_field::g, graph));
    graph = Proto().message(graph_field::node, node);
  }
  return graph;
}

TEST(OnnxMalformed, NestingDepthIsBounded) {
  const ModelFile model = model_from(model_of(nested_graph(15)));
  const Graph* graph = &model.graph;
  for (int i = 0; i < 15; ++i) graph = graph->nodes.at(0).find("then_branch")->graph.get();
  EXPECT_EQ(graph->name, "innermost");
  EXPECT_KILN_ERROR(model_from(model_of(nested_graph(30))), "messages nest more than 64 deep");
  // So deep that an unbounded recursion would overflow the stack.
  EXPECT_KILN_ERROR(model_from(model_of(nested_graph(5000))), "messages nest more than 64 deep");
}

TEST(OnnxMalformed, EveryTruncationParsesOrFails) {
  // A prefix that ends between fields is a valid, smaller message; any other is an error.
  const std::string bytes = model_of(sample_graph()).str();
  int errors = 0;
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    try {
      (void)parse_model(std::as_bytes(std::span(bytes.data(), size)), "cut.onnx");
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string_view(e.what()).find("onnx: cut.onnx: "), std::string_view::npos) << e.what();
    }
  }
  EXPECT_GT(errors, static_cast<int>(bytes.size()) * 9 / 10);
}

TEST(OnnxFiles, MissingFile) {
  EXPECT_KILN_ERROR(load_model("/nonexistent/model.onnx"), "onnx: /nonexistent/model.onnx: cannot open");
  EXPECT_KILN_ERROR(load_tensor("/nonexistent/input_0.pb"), "cannot open");
}

// ---- ONNX's node tests

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

#define SKIP_WITHOUT_NODE_TESTS()    \
  if (!fs::is_directory(kNodeTests)) \
  GTEST_SKIP() << kNodeTests.string() << " is missing: install Debian's libonnx-testdata for ONNX's node tests"

TEST(OnnxNodeTests, Abs) {
  SKIP_WITHOUT_NODE_TESTS();
  const ModelFile model = load_model(kNodeTests / "test_abs" / "model.onnx");
  EXPECT_EQ(model.opset(), 13);
  ASSERT_EQ(model.graph.nodes.size(), 1u);
  EXPECT_EQ(model.graph.nodes[0].op_type, "Abs");
  ASSERT_EQ(model.graph.inputs.size(), 1u);
  EXPECT_EQ(model.graph.inputs[0].name, "x");
  EXPECT_EQ(model.graph.inputs[0].type, ElementType::float32);
  ASSERT_TRUE(model.graph.inputs[0].shape.has_value());
  ASSERT_EQ(model.graph.inputs[0].shape->size(), 3u);
  EXPECT_EQ((*model.graph.inputs[0].shape)[2].value, 5);
  const TensorValue x = load_tensor(kNodeTests / "test_abs" / "test_data_set_0" / "input_0.pb");
  EXPECT_EQ(x.values("x").dtype(), DType::f32);
  EXPECT_EQ(x.values("x").shape(), (Shape{3, 4, 5}));
  // Abs's output is the input's absolute value.
  const TensorValue y = load_tensor(kNodeTests / "test_abs" / "test_data_set_0" / "output_0.pb");
  const auto in = values_of<float>(x);
  const auto out = values_of<float>(y);
  ASSERT_EQ(in.size(), out.size());
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], std::abs(in[i]));
}

TEST(OnnxNodeTests, ConvAndConstant) {
  SKIP_WITHOUT_NODE_TESTS();
  const ModelFile conv = load_model(kNodeTests / "test_conv_with_strides_padding" / "model.onnx");
  const Node& node = conv.graph.nodes.at(0);
  EXPECT_EQ(node.op_type, "Conv");
  EXPECT_EQ(node.inputs, (std::vector<std::string>{"x", "W"}));
  EXPECT_EQ(node.attr_ints("kernel_shape"), (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(node.attr_ints("pads"), (std::vector<std::int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(node.attr_ints("strides"), (std::vector<std::int64_t>{2, 2}));
  const ModelFile constant = load_model(kNodeTests / "test_constant" / "model.onnx");
  const TensorValue* value = constant.graph.nodes.at(0).attr_tensor("value");
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->values("value").shape(), (Shape{5, 5}));
  EXPECT_FLOAT_EQ(values_of<float>(*value)[0], 1.76405239f);
}

// Every model parses, and every .pb file of a test data set that the model declares a tensor
// parses to that tensor's element type and dims. The other files hold a SequenceProto, a
// MapProto or an OptionalProto (onnx-data.proto), not a TensorProto: read as one, they may
// give some tensor or a kiln::Error, never anything else.
TEST(OnnxNodeTests, EveryModelAndTensorParses) {
  SKIP_WITHOUT_NODE_TESTS();
  int models = 0, tensors = 0, others = 0;
  for (const auto& test : fs::directory_iterator(kNodeTests)) {
    const fs::path model_path = test.path() / "model.onnx";
    if (!fs::exists(model_path)) continue;
    SCOPED_TRACE(model_path.string());
    ModelFile model;
    try {
      model = load_model(model_path);
      ++models;
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    for (const auto& set : fs::directory_iterator(test.path())) {
      if (!set.is_directory()) continue;
      for (const auto& file : fs::directory_iterator(set.path())) {
        if (file.path().extension() != ".pb") continue;
        SCOPED_TRACE(file.path().string());
        // input_2.pb is the graph's input 2; output_0.pb its output 0.
        const std::string stem = file.path().stem().string();
        const bool is_input = stem.starts_with("input_");
        const std::size_t index = std::stoul(stem.substr(stem.find('_') + 1));
        const auto& declared = is_input ? model.graph.inputs : model.graph.outputs;
        const ValueInfo* info = index < declared.size() ? &declared[index] : nullptr;
        if (info == nullptr) {
          try {
            (void)load_tensor(file.path());
          } catch (const Error&) {
          }
          ++others;
          continue;
        }
        if (!info->is_tensor()) {
          // Sequences and optionals: SequenceProto and OptionalProto files.
          try {
            (void)load_value(file.path(), info->kind);
          } catch (const Error& e) {
            ADD_FAILURE() << e.what();
          }
          ++others;
          continue;
        }
        try {
          const TensorValue t = load_tensor(file.path());
          ++tensors;
          // ONNX's generator wrote the bfloat16 tensors of the BFLOAT16 Cast and CastLike tests
          // as UINT16, and their `like` inputs with dims other than the declared ones: those
          // files are only parsed.
          if (test.path().filename().string().find("BFLOAT16") != std::string::npos) continue;
          EXPECT_EQ(t.type, info->type);
          EXPECT_EQ(t.data.has_value(), held_dtype_of(t.type).has_value());
          if (!info->shape) continue;
          EXPECT_EQ(t.dims.size(), info->shape->size());
          for (std::size_t i = 0; i < std::min(t.dims.size(), info->shape->size()); ++i) {
            const std::int64_t declared_dim = (*info->shape)[i].value;
            if (declared_dim >= 0) {
              EXPECT_EQ(t.dims[i], declared_dim) << "dim " << i;
            }
          }
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
        }
      }
    }
  }
  EXPECT_GT(models, 900);
  EXPECT_GT(tensors, 2500);
  std::printf("[          ] %d models, %d tensors, %d files of other types\n", models, tensors, others);
}

}  // namespace
}  // namespace kiln::onnx::test
