// kiln-onnx2cpp: an ONNX model as a Kiln module. Writes a header with a module type (its
// initializers as KILN_MODULE fields, its graph as C++, run by kiln::onnx::GraphRunner) and
// a safetensors file of its weights under the fields' names, so that the program that
// includes the header loads them with nn::load, trains the module on Autodiff<B> and reads
// no ONNX file. With --embed it also writes a source file holding the weights file's bytes
// (a program that needs no file beside it). CMake: kiln_onnx_generate (cmake/KilnOnnx.cmake).
//
//   kiln-onnx2cpp MODEL.onnx OUT_DIR NAME [--namespace NS] [--embed]
//     → OUT_DIR/NAME.hpp, OUT_DIR/NAME.safetensors [, OUT_DIR/NAME_weights.cpp]
#include <kiln/onnx/graph.hpp>
#include <kiln/onnx/model.hpp>  // the op groups' lists (no kernel is instantiated here)
#include <kiln/store/safetensors.hpp>

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::onnx;

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (const char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A C++ string literal.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", static_cast<unsigned char>(c));
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string list(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "}";
}
std::string ints(const std::vector<std::int64_t>& v) {
  std::vector<std::string> s;
  for (const std::int64_t x : v) s.push_back(std::to_string(x));
  return list(s);
}
std::string number(double v) {
  char buf[40];
  if (std::isinf(v)) return v > 0 ? "std::numeric_limits<double>::infinity()" : "-std::numeric_limits<double>::infinity()";
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string strings(const std::vector<std::string>& v) {
  std::vector<std::string> s;
  for (const std::string& x : v) s.push_back(quoted(x));
  return list(s);
}

std::string element_type(ElementType t) {
  static const std::map<ElementType, std::string> names{
      {ElementType::float32, "float32"}, {ElementType::float64, "float64"}, {ElementType::float16, "float16"},
      {ElementType::bfloat16, "bfloat16"}, {ElementType::int32, "int32"}, {ElementType::int64, "int64"},
      {ElementType::uint8, "uint8"}, {ElementType::boolean, "boolean"}};
  const auto it = names.find(t);
  KILN_CHECK(it != names.end(), "kiln-onnx2cpp: Kiln holds no {} tensors", element_type_name(t));
  return "kiln::onnx::ElementType::" + it->second;
}

std::string attribute(const Attribute& a) {
  using K = Attribute::Kind;
  switch (a.kind) {
    case K::i: return "attr_int(" + quoted(a.name) + ", " + std::to_string(a.i) + ")";
    case K::f: return "attr_float(" + quoted(a.name) + ", " + number(a.f) + ")";
    case K::s: return "attr_string(" + quoted(a.name) + ", " + quoted(a.s) + ")";
    case K::ints: return "attr_ints(" + quoted(a.name) + ", " + ints(a.ints) + ")";
    case K::floats: {
      std::vector<std::string> v;
      for (const double f : a.floats) v.push_back(number(f));
      return "attr_floats(" + quoted(a.name) + ", " + list(v) + ")";
    }
    case K::strings: return "attr_strings(" + quoted(a.name) + ", " + strings(a.strings) + ")";
    case K::tensor: {
      const TensorValue& t = *a.tensor;
      const TensorData& d = t.values("kiln-onnx2cpp: attribute " + a.name);
      std::string bytes = "{";
      for (std::size_t i = 0; i < d.bytes().size(); ++i)
        bytes += (i ? "," : "") + std::to_string(static_cast<unsigned>(d.bytes()[i]));
      bytes += "}";
      return "attr_tensor(" + quoted(a.name) + ", " + element_type(t.type) + ", " + ints(t.dims) + ", " + bytes + ")";
    }
    default:
      KILN_FAIL("kiln-onnx2cpp: the attribute '{}' is a {}, which generated modules do not hold (subgraphs, "
                "sparse tensors and types are not supported)", a.name, attribute_kind_name(a.kind));
  }
}

std::string value_info(const ValueInfo& v) {
  std::vector<std::int64_t> dims;
  KILN_CHECK(v.shape.has_value(), "kiln-onnx2cpp: the graph input or output '{}' declares no shape, so its rank "
             "(the rank of the module's tensor) is unknown", v.name);
  for (const Dim& d : *v.shape) dims.push_back(d.value);
  return "value(" + quoted(v.name) + ", " + element_type(v.type) + ", " + ints(dims) + ")";
}

// The kiln::Tensor type of a graph value of element type t and rank r.
std::string tensor_type(ElementType t, std::size_t rank) {
  const auto dtype = onnx::dtype_of(t);
  KILN_CHECK(dtype.has_value(), "kiln-onnx2cpp: Kiln holds no {} tensors", element_type_name(t));
  KILN_CHECK(rank >= 1, "kiln-onnx2cpp: a graph input or output of rank 0 (Kiln tensors have rank 1 or more)");
  const std::string kind = is_float(*dtype) ? "" : is_bool(*dtype) ? ", kiln::Bool" : ", kiln::Int";
  return "kiln::Tensor<B, " + std::to_string(rank) + kind + ">";
}

std::string dims_text(const ValueInfo& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.shape->size(); ++i) {
    const Dim& d = (*v.shape)[i];
    s += (i ? ", " : "") + (d.value >= 0 ? std::to_string(d.value) : d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

struct Field {
  std::string name;  // the C++ member
  std::string path;  // its path from the module (name, or part0.name), the weights file's key
  const TensorValue* init;
  Shape shape;       // as held (rank-0 initializers as [1])
};

int generate(const fs::path& model_path, const fs::path& out, const std::string& name, const std::string& ns,
             bool embed) {
  const ModelFile model = load_model(model_path);
  const Graph& g = model.graph;
  KILN_CHECK(is_identifier(name), "kiln-onnx2cpp: the module name '{}' is not a C++ identifier", name);
  KILN_CHECK(ns.empty() || is_identifier(ns), "kiln-onnx2cpp: the namespace '{}' is not a C++ identifier", ns);
  const std::int64_t opset = model.opset();

  // Fields: one per initializer, named after it (made an identifier, unique).
  std::vector<Field> fields;
  std::set<std::string> taken{"forward", "graph", "runner", "visit"};
  std::set<std::string> initializer_names;
  for (const TensorValue& init : g.initializers) {
    std::string field;
    for (const char c : init.name) field += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) field = "w_" + field;
    while (!field.empty() && field[0] == '_') field.erase(0, 1);
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) field = "w_" + field;
    for (std::string base = field; taken.count(field);) field = base + "_" + std::to_string(taken.size());
    taken.insert(field);
    (void)init.values("kiln-onnx2cpp: initializer");
    const Shape shape = init.dims.empty() ? Shape{1} : Shape(init.dims);
    fields.push_back({field, field, &init, shape});
    initializer_names.insert(init.name);
  }
  std::vector<const ValueInfo*> inputs;
  for (const ValueInfo& in : g.inputs)
    if (!initializer_names.count(in.name)) inputs.push_back(&in);
  KILN_CHECK(!g.outputs.empty(), "kiln-onnx2cpp: the graph has no outputs");

  fs::create_directories(out);
  std::ostringstream h;
  h << "// Generated by kiln-onnx2cpp from " << model_path.filename().string() << " (" << model.producer_name << " "
    << model.producer_version << ", opset " << opset << "): the model as a Kiln module, its\n"
    << "// weights in " << name << ".safetensors. Regenerate it from the model rather than editing it.\n"
    << "#pragma once\n\n#include <kiln/onnx/module.hpp>\n\n#include <limits>\n#include <tuple>\n\n";
  if (!ns.empty()) h << "namespace " << ns << " {\n\n";
  // The fields: the module's own, or, past KILN_MODULE's 256 names, in parts of 200
  // (struct Part0 part0; ...), whose names then start with "part0.".
  const std::size_t per_part = fields.size() > 250 ? 200 : fields.size();
  const auto emit_fields = [&](std::size_t first, std::size_t last, const std::string& type_name,
                               const std::string& indent) {
    for (std::size_t i = first; i < last; ++i) {
      const Field& f = fields[i];
      const DType dtype = f.init->data->dtype();
      h << indent << "// '" << f.init->name << "' " << f.shape.str() << " " << dtype_name(dtype) << "\n";
      h << indent << "kiln::nn::" << (is_float(dtype) ? "Param" : "Buffer") << "<"
        << tensor_type(f.init->type, f.shape.rank()) << "> " << f.name << ";\n";
    }
    h << indent << "KILN_MODULE(";
    for (std::size_t i = first; i < last; ++i) h << (i > first ? ", " : "") << fields[i].name;
    h << ")\n\n" << indent << type_name << "() = default;\n";
    h << indent << "// The model's parameters, zero: load its weights into them (kiln::nn::load).\n";
    h << indent << "explicit " << type_name << "(const typename B::Device& device)";
    for (std::size_t i = first; i < last; ++i) {
      const Field& f = fields[i];
      h << (i > first ? ",\n" + indent + "    " : "\n" + indent + "  : ") << f.name
        << "(kiln::onnx::zeros_like_initializer<" << tensor_type(f.init->type, f.shape.rank()) << ">(kiln::Shape"
        << ints(f.shape.to_vector()) << ", kiln::DType::" << dtype_name(f.init->data->dtype()) << ", device))";
    }
    h << " {}\n";
  };
  h << "template <class B> struct " << name << " {\n";
  if (per_part == fields.size()) {
    emit_fields(0, fields.size(), name, "  ");
  } else {
    std::vector<std::string> parts;
    for (std::size_t first = 0; first < fields.size(); first += per_part) {
      const std::string part = "part" + std::to_string(parts.size());
      h << "  struct Part" << parts.size() << " {\n";
      emit_fields(first, std::min(fields.size(), first + per_part), "Part" + std::to_string(parts.size()), "    ");
      h << "  };\n";
      for (std::size_t i = first; i < std::min(fields.size(), first + per_part); ++i)
        fields[i].path = part + "." + fields[i].name;
      parts.push_back(part);
    }
    for (std::size_t k = 0; k < parts.size(); ++k) h << "  Part" << k << " " << parts[k] << ";\n";
    h << "  KILN_MODULE(" << [&] {
      std::string s;
      for (std::size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
      return s;
    }() << ")\n\n  " << name << "() = default;\n  explicit " << name << "(const typename B::Device& device)";
    for (std::size_t k = 0; k < parts.size(); ++k) h << (k ? ", " : " : ") << parts[k] << "(device)";
    h << " {}\n";
  }
  h << "\n";

  // forward: the graph's inputs in order; its output, or a tuple of its outputs.
  std::vector<std::string> out_types;
  for (const ValueInfo& o : g.outputs) {
    KILN_CHECK(o.shape.has_value(), "kiln-onnx2cpp: the graph output '{}' declares no shape, so its rank is unknown",
               o.name);
    out_types.push_back(tensor_type(o.type, o.shape->size()));
  }
  const std::string result = out_types.size() == 1 ? out_types[0] : "std::tuple<" + [&] {
    std::string s;
    for (std::size_t i = 0; i < out_types.size(); ++i) s += (i ? ", " : "") + out_types[i];
    return s;
  }() + ">";
  h << "  // ";
  for (std::size_t i = 0; i < inputs.size(); ++i)
    h << (i ? ", " : "") << inputs[i]->name << " " << dims_text(*inputs[i]);
  h << " → ";
  for (std::size_t i = 0; i < g.outputs.size(); ++i) h << (i ? ", " : "") << g.outputs[i].name << " " << dims_text(g.outputs[i]);
  h << "\n  " << result << " forward(";
  std::vector<std::string> args;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i]->shape.has_value(), "kiln-onnx2cpp: the graph input '{}' declares no shape", inputs[i]->name);
    h << (i ? ", " : "") << "const " << tensor_type(inputs[i]->type, inputs[i]->shape->size()) << "& in" << i;
    args.push_back("in" + std::to_string(i) + ".primitive()");
  }
  h << ") const {\n    kiln::onnx::ModuleConstants<B> constants(" << fields.size() << ");\n";
  for (const Field& f : fields) {
    h << "    constants.add(*" << f.path;
    if (f.init->dims.empty()) h << ", kiln::Shape{}";
    h << ");\n";
  }
  KILN_CHECK(!inputs.empty(), "kiln-onnx2cpp: the graph has no inputs");
  h << "    const auto out = runner().run(constants.values(), " << list(args) << ", in0.device());\n";
  if (out_types.size() == 1) {
    h << "    return " << out_types[0] << "(out[0]);\n";
  } else {
    h << "    return {";
    for (std::size_t i = 0; i < out_types.size(); ++i) h << (i ? ", " : "") << out_types[i] << "(out[" << i << "])";
    h << "};\n";
  }
  h << "  }\n\n";

  h << "  // The graph, without its weights.\n  static const kiln::onnx::Graph& graph() {\n"
    << "    static const kiln::onnx::Graph g = [] {\n      using namespace kiln::onnx::build;\n"
    << "      kiln::onnx::Graph g;\n      g.nodes.reserve(" << g.nodes.size() << ");\n";
  for (const Node& n : g.nodes) {
    KILN_CHECK(n.domain.empty() || n.domain == "ai.onnx", "kiln-onnx2cpp: {}: the domain '{}' is not one Kiln runs",
               n.describe(), n.domain);
    std::vector<std::string> in, outs, attrs;
    for (const std::string& s : n.inputs) in.push_back(quoted(s));
    for (const std::string& s : n.outputs) outs.push_back(quoted(s));
    for (const Attribute& a : n.attributes) attrs.push_back(attribute(a));
    h << "      g.nodes.push_back(node(" << quoted(n.op_type) << ", " << quoted(n.name) << ", " << list(in) << ", "
      << list(outs);
    if (!attrs.empty()) h << ",\n                             " << list(attrs);
    h << "));\n";
  }
  std::vector<std::string> ins, outs;
  for (const ValueInfo* v : inputs) ins.push_back(value_info(*v));
  for (const ValueInfo& v : g.outputs) outs.push_back(value_info(v));
  h << "      g.inputs = " << list(ins) << ";\n      g.outputs = " << list(outs) << ";\n      return g;\n    }();\n"
    << "    return g;\n  }\n";
  std::vector<std::string> constant_names;
  for (const Field& f : fields) constant_names.push_back(quoted(f.init->name));
  // The op groups the graph uses: the program then links only their kernels.
  std::set<std::string> groups;
  for (const Node& n : g.nodes) {
    std::string found;
    for (const OpGroup& group : kOpGroups)
      if (std::find(group.ops.begin(), group.ops.end(), n.op_type) != group.ops.end()) found = group.name;
    KILN_CHECK(!found.empty(), "kiln-onnx2cpp: {}: Kiln has no kernel for the op type {}", n.describe(), n.op_type);
    groups.insert(found);
  }
  std::vector<std::string> group_entries;
  for (const std::string& group : groups) {
    std::string upper = group;
    upper[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[0])));
    group_entries.push_back("{kiln::onnx::k" + upper + "Group, &kiln::onnx::add_" + group + "_ops<B>}");
  }
  h << "  static const kiln::onnx::GraphRunner<B>& runner() {\n"
    << "    static const kiln::onnx::OpTable<B> ops = kiln::onnx::op_table_of<B>(" << list(group_entries) << ");\n"
    << "    static const kiln::onnx::GraphRunner<B> r(graph(), " << opset << ", " << list(constant_names)
    << ", {}, ops);\n    return r;\n  }\n};\n";
  if (embed) {
    h << "\n// The weights file's bytes, compiled into the program (" << name << "_weights.cpp).\n"
      << "std::span<const std::byte> " << name << "_weights();\n";
  }
  if (!ns.empty()) h << "\n}  // namespace " << ns << "\n";
  std::ofstream(out / (name + ".hpp")) << h.str();

  store::NamedTensors weights;
  for (const Field& f : fields) weights.insert(f.path, f.init->data->reshaped(f.shape));
  store::save_safetensors(out / (name + ".safetensors"), weights);
  if (embed) {
    const std::vector<std::byte> bytes = store::serialize_safetensors(weights);
    std::ofstream cpp(out / (name + "_weights.cpp"));
    cpp << "// Generated by kiln-onnx2cpp: " << name << ".safetensors as bytes.\n#include \"" << name
        << ".hpp\"\n\n";
    if (!ns.empty()) cpp << "namespace " << ns << " {\n\n";
    cpp << "alignas(8) static const unsigned char weights_bytes[" << bytes.size() << "] = {";
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (i % 24 == 0) cpp << "\n ";
      cpp << static_cast<unsigned>(bytes[i]) << ",";
    }
    cpp << "\n};\n\nstd::span<const std::byte> " << name << "_weights() {\n  return std::as_bytes(std::span(weights_bytes));\n}\n";
    if (!ns.empty()) cpp << "\n}  // namespace " << ns << "\n";
  }
  std::cout << "kiln-onnx2cpp: " << (out / (name + ".hpp")).string() << ": " << name << " with " << fields.size()
            << " parameters and buffers, " << g.nodes.size() << " nodes\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> positional;
  std::string ns;
  bool embed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--namespace" && i + 1 < argc) ns = argv[++i];
    else if (arg == "--embed") embed = true;
    else if (arg.rfind("--", 0) == 0) {
      std::cerr << "kiln-onnx2cpp: unknown flag " << arg << "\n";
      return 2;
    } else positional.push_back(arg);
  }
  if (positional.size() != 3) {
    std::cerr << "usage: kiln-onnx2cpp MODEL.onnx OUT_DIR NAME [--namespace NS] [--embed]\n";
    return 2;
  }
  return generate(positional[0], positional[1], positional[2], ns, embed);
} catch (const kiln::Error& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
