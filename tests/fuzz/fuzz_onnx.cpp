// libFuzzer target: bytes → onnx::parse_model, and the same bytes → onnx::parse_tensor and
// onnx::parse_value as a sequence and as an optional. Any
// input must either be rejected with kiln::Error or parse completely; an accepted model is then
// walked (every node, attribute, subgraph and tensor, each tensor's values read as its dtype
// and each attribute through the typed read of its kind), which must not crash, trip a
// sanitizer or throw. A tensor whose data does not match its dims aborts.
#include <kiln/onnx/graph.hpp>

#include <cstdlib>

using namespace kiln;
using namespace kiln::onnx;

namespace {

void walk(const Graph& graph);

void walk(const TensorValue& tensor) {
  (void)element_type_name(tensor.type);
  if (tensor.type == ElementType::string) {
    // A STRING tensor holds one string per element.
    std::int64_t count = 1;
    for (const std::int64_t d : tensor.dims) count *= d;
    if (static_cast<std::int64_t>(tensor.strings.size()) != count) std::abort();
    return;
  }
  if (!tensor.data) {
    // Without data, values() must say why, with a kiln::Error.
    try {
      (void)tensor.values("fuzz");
      std::abort();
    } catch (const Error&) {
    }
    return;
  }
  const TensorData& data = tensor.values("fuzz");
  if (data.shape().to_vector() != tensor.dims || onnx::held_dtype_of(tensor.type) != data.dtype()) std::abort();
  // Every element read as its type: a bool byte other than 0 or 1 would trip UBSan here.
  (void)data.to_vec<double>();
}

void walk(const Node& node) {
  (void)node.describe();
  for (const Attribute& a : node.attributes) {
    (void)attribute_kind_name(a.kind);
    // The typed reads find the first attribute of a name, which a file may repeat with another
    // kind; each is called on the first one, through the read of its kind.
    if (node.find(a.name) == &a) {
      switch (a.kind) {
        case Attribute::Kind::i: (void)node.attr_int(a.name, 0); break;
        case Attribute::Kind::f: (void)node.attr_float(a.name, 0); break;
        case Attribute::Kind::s: (void)node.attr_string(a.name, ""); break;
        case Attribute::Kind::ints: (void)node.attr_ints(a.name); break;
        case Attribute::Kind::floats: (void)node.attr_floats(a.name); break;
        case Attribute::Kind::strings: (void)node.attr_strings(a.name); break;
        case Attribute::Kind::tensor:
          if (a.tensor) (void)node.attr_tensor(a.name);
          break;
        default: break;
      }
    }
    if (a.tensor) walk(*a.tensor);
    for (const TensorValue& t : a.tensors) walk(t);
    if (a.graph) walk(*a.graph);
    for (const auto& g : a.graphs) walk(*g);
  }
}

void walk(const Graph& graph) {
  for (const Node& node : graph.nodes) walk(node);
  for (const TensorValue& t : graph.initializers) walk(t);
  for (const auto* infos : {&graph.inputs, &graph.outputs, &graph.value_info})
    for (const ValueInfo& info : *infos) (void)element_type_name(info.type);
}

void walk(const DataValue& value) {
  if (value.kind == ValueInfo::Kind::tensor) walk(value.tensor);
  if (value.kind == ValueInfo::Kind::optional && value.elements.size() > 1) std::abort();
  for (const DataValue& e : value.elements) walk(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const ModelFile model = parse_model(bytes, "fuzz.onnx");
    walk(model.graph);
    try {
      (void)model.opset();
    } catch (const Error&) {
      // A model without the default domain's opset: an error only where the opset is asked for.
    }
  } catch (const Error&) {
    // Rejected with a message: what the reader must do with bad input.
  }
  try {
    walk(parse_tensor(bytes, "fuzz.pb"));
  } catch (const Error&) {
  }
  for (const ValueInfo::Kind kind : {ValueInfo::Kind::sequence, ValueInfo::Kind::optional}) {
    try {
      walk(parse_value(bytes, kind, "fuzz.pb"));
    } catch (const Error&) {
    }
  }
  return 0;
}
