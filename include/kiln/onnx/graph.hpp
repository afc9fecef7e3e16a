// An ONNX model as Kiln reads it: the graph's nodes, attributes, initializers and declared
// inputs and outputs, parsed from a `.onnx` file (protobuf bytes) by a small reader of
// Kiln's own (src/onnx/proto.cpp), compiled into kiln::onnx (libkiln_onnx). The reader
// knows the wire format and the fields of onnx.proto that inference needs; fields it does
// not use are skipped, malformed bytes are a kiln::Error naming the message and field.
// See docs/onnx.md.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx {

// TensorProto.DataType, with ONNX's numbers.
enum class ElementType : std::int32_t {
  undefined = 0, float32 = 1, uint8 = 2, int8 = 3, uint16 = 4, int16 = 5, int32 = 6, int64 = 7,
  string = 8, boolean = 9, float16 = 10, float64 = 11, uint32 = 12, uint64 = 13, complex64 = 14,
  complex128 = 15, bfloat16 = 16,
};

// ONNX's name of an element type ("FLOAT", "INT8"; "TYPE 42" for an unknown number).
std::string element_type_name(ElementType type);
// The Kiln dtype of an element type, if Kiln has it (float, double, float16, bfloat16, int32,
// int64, uint8, bool).
std::optional<DType> dtype_of(ElementType type);
// The dtype that holds an element type's values: dtype_of's, or a wider integer dtype for the
// integer types Kiln has no dtype of (INT8, INT16 and UINT16 in i32, UINT32 and UINT64 in i64);
// nullopt for STRING and the complex types.
std::optional<DType> held_dtype_of(ElementType type);
ElementType element_type_of(DType dtype);

// A tensor of the file (an initializer, a Constant's value, a test's input): its values as
// TensorData in the dtype that holds its element type (held_dtype_of), a STRING tensor's as
// strings, else only its type and dims (`data` empty: complex numbers, later ONNX versions'
// types, a UINT64 value beyond int64), so that such a model parses and fails only where the
// tensor is used.
struct TensorValue {
  std::string name;
  ElementType type = ElementType::undefined;
  std::vector<std::int64_t> dims;
  std::optional<TensorData> data;
  std::vector<std::string> strings;  // a STRING tensor's values, row-major

  // The data, or a kiln::Error naming the tensor and its element type.
  const TensorData& values(std::string_view where) const;
};

struct Graph;

struct Attribute {
  // AttributeProto.AttributeType, with ONNX's numbers.
  enum class Kind : std::int32_t {
    undefined = 0, f = 1, i = 2, s = 3, tensor = 4, graph = 5, floats = 6, ints = 7, strings = 8,
    tensors = 9, graphs = 10, sparse_tensor = 11, sparse_tensors = 12, type_proto = 13, type_protos = 14,
  };
  std::string name;
  Kind kind = Kind::undefined;
  double f = 0;
  std::int64_t i = 0;
  std::string s;
  std::optional<TensorValue> tensor;
  std::shared_ptr<const Graph> graph;
  std::vector<double> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
  std::vector<TensorValue> tensors;
  std::vector<std::shared_ptr<const Graph>> graphs;
};

std::string_view attribute_kind_name(Attribute::Kind kind);

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" and "ai.onnx" are the default domain
  // Input and output value names; "" marks an omitted optional input or output.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;

  const Attribute* find(std::string_view attribute) const;
  // Typed attribute reads: the value, `fallback` when the attribute is absent, or a
  // kiln::Error naming the node, the attribute and the kind it has when it is of another kind.
  std::int64_t attr_int(std::string_view attribute, std::int64_t fallback) const;
  double attr_float(std::string_view attribute, double fallback) const;
  std::string attr_string(std::string_view attribute, std::string_view fallback) const;
  std::vector<std::int64_t> attr_ints(std::string_view attribute, std::vector<std::int64_t> fallback = {}) const;
  // An ints attribute's values in place (no copy), nullopt when absent.
  std::optional<std::span<const std::int64_t>> find_ints(std::string_view attribute) const;
  std::vector<double> attr_floats(std::string_view attribute, std::vector<double> fallback = {}) const;
  std::vector<std::string> attr_strings(std::string_view attribute) const;
  const TensorValue* attr_tensor(std::string_view attribute) const;  // nullptr when absent

  // "Conv node 'conv1'" (or "Conv node (unnamed, outputs 'y')" when the node has no name: a
  // Node does not know its index), for messages.
  std::string describe() const;
};

// A dimension of a declared shape: a number, or a symbolic name ("batch"), or unknown.
struct Dim {
  std::int64_t value = -1;  // -1 when not a number
  std::string param;
};

// A graph input, output or value_info entry: a tensor's element type and shape, or a
// sequence's or optional's, whose `element` is the type inside (maps and sparse tensors are
// only marked as such).
struct ValueInfo {
  enum class Kind : std::uint8_t { tensor, sequence, optional, map, sparse_tensor };
  std::string name;
  Kind kind = Kind::tensor;
  ElementType type = ElementType::undefined;  // a tensor's; a sequence's or optional's innermost tensor's
  std::optional<std::vector<Dim>> shape;      // nullopt when the shape is not declared
  std::shared_ptr<const ValueInfo> element;   // a sequence's elements' type, an optional's value's

  bool is_tensor() const { return kind == Kind::tensor; }
};

// A value of a serialized file that is not a model: a TensorProto, SequenceProto or
// OptionalProto (what ONNX's node tests feed and expect, test_data_set_*/*.pb).
struct DataValue {
  ValueInfo::Kind kind = ValueInfo::Kind::tensor;
  TensorValue tensor;               // a tensor's
  std::vector<DataValue> elements;  // a sequence's elements; an optional's value (none when empty)
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<TensorValue> initializers;
  std::vector<ValueInfo> inputs;  // may also list initializers (IR version < 4)
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
};

struct ModelFile {
  std::int64_t ir_version = 0;
  std::map<std::string, std::int64_t> opsets;  // domain ("" for ai.onnx) → version
  std::string producer_name;
  std::string producer_version;
  Graph graph;

  // The opset version of the default domain (ai.onnx); a kiln::Error when none is imported.
  std::int64_t opset() const;
};

struct ParseOptions {
  // Where external-data tensors' files are looked up (their `location` is relative to it);
  // load_model sets it to the model file's folder. Empty: external data is a kiln::Error.
  std::filesystem::path external_data_dir;
};

// Parses a serialized ModelProto. `what` names the bytes in messages (a path, "memory").
ModelFile parse_model(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options = {});
// Reads and parses a `.onnx` file; external-data tensors are read from beside it.
ModelFile load_model(const std::filesystem::path& path);
// Parses a serialized TensorProto (the `.pb` files of ONNX's node tests).
TensorValue parse_tensor(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options = {});
TensorValue load_tensor(const std::filesystem::path& path);
// Parses a serialized TensorProto, SequenceProto or OptionalProto, as `kind` says (the bytes do
// not tell), of tensors, sequences and optionals.
DataValue parse_value(std::span<const std::byte> bytes, ValueInfo::Kind kind, std::string_view what);
DataValue load_value(const std::filesystem::path& path, ValueInfo::Kind kind);

// The elements one axis of Slice takes from a dim of `n` (ONNX's rule, shared by the kernel and
// shape inference): `start` and `end` count from the end when negative, then clamp to [0, n]
// going forward and [-1, n - 1] going backward; `size` elements from `first`, `step` apart.
struct SliceExtent {
  std::int64_t first = 0;
  std::int64_t size = 0;
};
inline SliceExtent slice_extent(std::int64_t n, std::int64_t start, std::int64_t end, std::int64_t step) {
  KILN_CHECK(step != 0 && step != INT64_MIN, "a slice step of {} (it must be non-zero, and its negation must fit)", step);
  start = start < 0 ? start + n : start;
  end = end < 0 ? end + n : end;
  // Written so that no step near the int64 limits overflows: (distance - 1) / step + 1.
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, n);
    end = std::clamp<std::int64_t>(end, 0, n);
    return {start, end > start ? (end - start - 1) / step + 1 : 0};
  }
  start = std::clamp<std::int64_t>(start, -1, n - 1);
  end = std::clamp<std::int64_t>(end, -1, n - 1);
  return {start, start > end ? (start - end - 1) / -step + 1 : 0};
}

// The number of elements of Range(start, limit, delta): ceil((limit - start) / delta), at
// least 0; checked before it becomes an integer (a NaN or an infinity would not convert).
inline std::int64_t range_count(double start, double limit, double delta) {
  KILN_CHECK(delta != 0, "Range: delta must not be 0");
  const double count = std::max(std::ceil((limit - start) / delta), 0.0);
  KILN_CHECK(std::isfinite(count) && count <= 2147483647.0,
             "Range: start {}, limit {} and delta {} give {} elements (at most 2^31 - 1)", start, limit, delta, count);
  return static_cast<std::int64_t>(count);
}

}  // namespace kiln::onnx
