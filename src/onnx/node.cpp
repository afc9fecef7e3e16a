// kiln/onnx/graph.hpp's model above the wire format: element types, typed attribute reads,
// node descriptions. What a generated module needs at run time, without the reader
// (load.cpp, proto.cpp): the embedded build links this file alone.
#include "kiln/onnx/graph.hpp"

#include "proto.hpp"

#include <string>

namespace kiln::onnx {

// ---- element types

std::string element_type_name(ElementType type) {
  if (const detail::ElementInfo* info = detail::element_info(type)) return std::string(info->name);
  if (type == ElementType::undefined) return "UNDEFINED";
  return "TYPE " + std::to_string(static_cast<std::int32_t>(type));
}

std::optional<DType> dtype_of(ElementType type) {
  const detail::ElementInfo* info = detail::element_info(type);
  return info != nullptr ? info->dtype : std::nullopt;
}

std::optional<DType> held_dtype_of(ElementType type) {
  const detail::ElementInfo* info = detail::element_info(type);
  return info != nullptr ? info->held : std::nullopt;
}

ElementType element_type_of(DType dtype) {
  for (const detail::ElementInfo& info : detail::kElementTypes)
    if (info.dtype == dtype) return info.type;
  return ElementType::undefined;  // unreachable: the table names every dtype
}

const TensorData& TensorValue::values(std::string_view where) const {
  if (!data) {
    std::string held;
    for (const detail::ElementInfo& info : detail::kElementTypes)
      if (info.held) held += (held.empty() ? "" : ", ") + std::string(info.name);
    KILN_FAIL("{}: tensor '{}' holds {} values, which Kiln does not hold (it reads {}, and UINT64 values up to "
              "2^63 - 1)", where, name, element_type_name(type), held);
  }
  return *data;
}

// ---- attributes

std::string_view attribute_kind_name(Attribute::Kind kind) {
  static constexpr std::array<std::string_view, 15> names{
      "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",         "GRAPH",      "FLOATS",     "INTS",
      "STRINGS",   "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  const auto index = static_cast<std::size_t>(kind);
  return index < names.size() ? names[index] : "?";
}

const Attribute* Node::find(std::string_view attribute) const {
  for (const Attribute& a : attributes)
    if (a.name == attribute) return &a;
  return nullptr;
}

namespace {

bool is_list(Attribute::Kind kind) {
  using Kind = Attribute::Kind;
  return kind == Kind::floats || kind == Kind::ints || kind == Kind::strings || kind == Kind::tensors ||
         kind == Kind::graphs || kind == Kind::sparse_tensors || kind == Kind::type_protos;
}

// The node's attribute `name` when it is of `kind`, nullptr when the node has none, and an
// error naming the node when it is of another kind. An attribute of an old file with neither
// `type` nor a value field was an empty list, so it reads as an empty list of any kind.
const Attribute* find_typed(const Node& node, std::string_view name, Attribute::Kind kind) {
  const Attribute* found = node.find(name);
  if (found == nullptr || found->kind == kind || (found->kind == Attribute::Kind::undefined && is_list(kind)))
    return found;
  KILN_FAIL("onnx: {}: attribute '{}' is {}, not {}", node.describe(), name, attribute_kind_name(found->kind),
            attribute_kind_name(kind));
}

}  // namespace

std::int64_t Node::attr_int(std::string_view attribute, std::int64_t fallback) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::i);
  return a != nullptr ? a->i : fallback;
}

double Node::attr_float(std::string_view attribute, double fallback) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::f);
  return a != nullptr ? a->f : fallback;
}

std::string Node::attr_string(std::string_view attribute, std::string_view fallback) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::s);
  return a != nullptr ? a->s : std::string(fallback);
}

std::vector<std::int64_t> Node::attr_ints(std::string_view attribute, std::vector<std::int64_t> fallback) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::ints);
  return a != nullptr ? a->ints : fallback;
}

std::optional<std::span<const std::int64_t>> Node::find_ints(std::string_view attribute) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::ints);
  if (a == nullptr) return std::nullopt;
  return std::span<const std::int64_t>(a->ints);
}

std::vector<double> Node::attr_floats(std::string_view attribute, std::vector<double> fallback) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::floats);
  return a != nullptr ? a->floats : fallback;
}

std::vector<std::string> Node::attr_strings(std::string_view attribute) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::strings);
  return a != nullptr ? a->strings : std::vector<std::string>{};
}

const TensorValue* Node::attr_tensor(std::string_view attribute) const {
  const Attribute* a = find_typed(*this, attribute, Attribute::Kind::tensor);
  if (a == nullptr) return nullptr;
  // `type` says TENSOR, but the file may still lack the `t` field.
  KILN_CHECK(a->tensor.has_value(), "onnx: {}: attribute '{}' is a TENSOR but holds no tensor (no field t)", describe(),
             attribute);
  return &*a->tensor;
}

std::string Node::describe() const {
  const std::string op = domain.empty() || domain == "ai.onnx" ? op_type : domain + "." + op_type;
  if (!name.empty()) return op + " node '" + name + "'";
  // Unnamed nodes are common (exporters often leave names out); the outputs, which are unique
  // in a graph, say which node it is.
  std::string out = op + " node (unnamed, ";
  if (outputs.empty()) return out + "no outputs)";
  out += "outputs ";
  for (std::size_t i = 0; i < outputs.size(); ++i) out += (i ? ", '" : "'") + outputs[i] + "'";
  return out + ")";
}

std::int64_t ModelFile::opset() const {
  const auto found = opsets.find("");
  if (found != opsets.end()) return found->second;
  std::string domains;
  for (const auto& [domain, version] : opsets) domains += (domains.empty() ? "" : ", ") + domain;
  KILN_FAIL(
      "onnx: the model's opset_import names no version of the default domain (ai.onnx), which every model "
      "needs; it imports {}",
      domains.empty() ? std::string("nothing") : "only " + domains);
}

}  // namespace kiln::onnx
