// The protobuf wire format as the ONNX reader needs it: a reader of one message's fields that
// checks every tag, varint and length against the bytes left, the scope chain that names the
// message and field at fault in errors, and the table of ONNX element types. Private to
// src/onnx; the message parsers are in proto.cpp, the public functions over them in graph.cpp.
#pragma once

#include "kiln/onnx/graph.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx::detail {

// ---- element types

// The TensorProto field that holds an element type's values when raw_data does not.
enum class ValuesField : std::uint8_t { float_data, int32_data, string_data, int64_data, double_data, uint64_data };

struct ElementInfo {
  ElementType type;
  std::string_view name;       // ONNX's spelling, for messages
  std::size_t size;            // bytes per element in raw_data (0 for STRING, which has no raw form)
  ValuesField field;           // where the values are when not in raw_data
  std::size_t per_element;     // values of `field` per element (2 for the complex types)
  std::optional<DType> dtype;  // the Kiln dtype of the same element type
  std::optional<DType> held;   // the dtype that holds its values: `dtype`, or a wider integer one
};

// Every element type of onnx.proto up to BFLOAT16; element_type_name, dtype_of, held_dtype_of
// and the TensorProto checks all read this one table. INT8, INT16 and UINT16 values are held
// in i32, UINT32 and UINT64 values in i64 (a UINT64 value beyond int64 is not held).
inline constexpr ElementInfo kElementTypes[] = {
    {ElementType::float32, "FLOAT", 4, ValuesField::float_data, 1, DType::f32, DType::f32},
    {ElementType::uint8, "UINT8", 1, ValuesField::int32_data, 1, DType::u8, DType::u8},
    {ElementType::int8, "INT8", 1, ValuesField::int32_data, 1, std::nullopt, DType::i32},
    {ElementType::uint16, "UINT16", 2, ValuesField::int32_data, 1, std::nullopt, DType::i32},
    {ElementType::int16, "INT16", 2, ValuesField::int32_data, 1, std::nullopt, DType::i32},
    {ElementType::int32, "INT32", 4, ValuesField::int32_data, 1, DType::i32, DType::i32},
    {ElementType::int64, "INT64", 8, ValuesField::int64_data, 1, DType::i64, DType::i64},
    {ElementType::string, "STRING", 0, ValuesField::string_data, 1, std::nullopt, std::nullopt},
    {ElementType::boolean, "BOOL", 1, ValuesField::int32_data, 1, DType::boolean, DType::boolean},
    {ElementType::float16, "FLOAT16", 2, ValuesField::int32_data, 1, DType::f16, DType::f16},
    {ElementType::float64, "DOUBLE", 8, ValuesField::double_data, 1, DType::f64, DType::f64},
    {ElementType::uint32, "UINT32", 4, ValuesField::uint64_data, 1, std::nullopt, DType::i64},
    {ElementType::uint64, "UINT64", 8, ValuesField::uint64_data, 1, std::nullopt, DType::i64},
    {ElementType::complex64, "COMPLEX64", 8, ValuesField::float_data, 2, std::nullopt, std::nullopt},
    {ElementType::complex128, "COMPLEX128", 16, ValuesField::double_data, 2, std::nullopt, std::nullopt},
    {ElementType::bfloat16, "BFLOAT16", 2, ValuesField::int32_data, 1, DType::bf16, DType::bf16},
};

// The table's entry for `type`; nullptr for UNDEFINED and for numbers it does not list
// (the 8-bit floats and 4-bit integers of later ONNX versions).
inline const ElementInfo* element_info(ElementType type) {
  for (const ElementInfo& info : kElementTypes)
    if (info.type == type) return &info;
  return nullptr;
}

// ---- where a message is

// How deep messages may nest. Each level is a few stack frames of the recursive parsers, and a
// hostile file could otherwise nest graph attributes until the stack overflows; a subgraph
// costs three levels (GraphProto, NodeProto, AttributeProto), and real models nest a handful.
inline constexpr int kMaxDepth = 64;

// A message being read, for errors: its label ("TensorProto 'w'"), set again once its name
// has been read, and the message it sits in. Scopes live on the parsers' stack, each pointing
// to its parent.
struct Scope {
  std::string_view what;                  // the bytes' name, as the caller gave it
  const std::byte* file_begin = nullptr;  // the first byte, for byte offsets in messages
  const ParseOptions* options = nullptr;
  const Scope* parent = nullptr;
  int depth = 0;
  std::string label;

  // A message inside this one; a kiln::Error when it would nest deeper than kMaxDepth.
  Scope nested(std::string inner_label) const;
  // "onnx: model.onnx: TensorProto 'w' in GraphProto 'main'", how every message starts.
  std::string where() const;
  std::size_t offset_of(const std::byte* p) const { return static_cast<std::size_t>(p - file_begin); }
};

// ---- the wire format

enum class WireType : std::uint8_t { varint = 0, fixed64 = 1, length = 2, fixed32 = 5 };

// Reads one message's fields in order: next() checks and steps over a field, the typed reads
// return its value, checking the wire type against the field's declared one and naming the
// field when they differ. Fields a parser does not read are thereby skipped.
class FieldReader {
 public:
  FieldReader(std::span<const std::byte> bytes, const Scope& scope)
      : scope_(scope), next_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  // Reads the next field; false at the end of the message.
  bool next();
  std::uint32_t number() const { return number_; }

  std::int64_t int64(std::string_view field) const;
  std::int32_t int32(std::string_view field) const;
  float float32(std::string_view field) const;
  std::string string(std::string_view field) const;
  std::span<const std::byte> bytes(std::string_view field) const;  // a nested message or a bytes field

  // Append the values of a repeated scalar field, packed (one length-delimited run of values)
  // or not (one value per field), as writers may do either.
  void append(std::string_view field, std::vector<std::int64_t>& out) const;
  void append(std::string_view field, std::vector<std::int32_t>& out) const;
  void append(std::string_view field, std::vector<std::uint64_t>& out) const;
  void append(std::string_view field, std::vector<float>& out) const;
  void append(std::string_view field, std::vector<double>& out) const;

 private:
  void expect(WireType wire, std::string_view field) const;
  template <class T> void append_values(std::string_view field, std::vector<T>& out) const;
  std::int32_t checked_int32(std::uint64_t value, std::string_view field) const;

  const Scope& scope_;
  const std::byte* next_;
  const std::byte* end_;
  const std::byte* tag_at_ = nullptr;  // where the current field starts
  std::uint32_t number_ = 0;
  WireType wire_ = WireType::varint;
  std::uint64_t value_ = 0;             // a varint's value, or a fixed field's bits
  std::span<const std::byte> payload_;  // a length-delimited field's bytes
};

// ---- the ONNX messages

// Each reads one message of `bytes`; `scope` is the message's own (its label is updated as
// its name is read), made by the caller with Scope::nested or, for the file's outermost
// message, directly.
ModelFile read_model(std::span<const std::byte> bytes, Scope scope);
TensorValue read_tensor(std::span<const std::byte> bytes, Scope scope);
DataValue read_value(std::span<const std::byte> bytes, ValueInfo::Kind kind, Scope scope);

}  // namespace kiln::onnx::detail
