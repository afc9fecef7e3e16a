// What Fusion<B> (include/kiln/fusion/backend.hpp) needs once per process, not per backend:
// KILN_FUSION_LOG's one line per fused program launched, and the tree work of a launch's plan.
#include "kiln/fusion/backend.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace kiln::fusion::detail {

bool log_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("KILN_FUSION_LOG");
    return value != nullptr && *value != '\0' && std::string(value) != "0";
  }();
  return enabled;
}

void log_launch(std::string_view backend, const codegen::Program& program, bool compiled,
                std::span<const Shape> input_shapes, std::span<const Shape> output_shapes,
                std::span<const std::string> runs) {
  std::string inputs;
  for (std::size_t k = 0; k < input_shapes.size(); ++k)
    inputs += fmt::format("{}in{} {}{}", k ? ", " : "", k, program.inputs()[k], input_shapes[k]);
  std::string outputs;
  for (std::size_t k = 0; k < program.outputs().size(); ++k)
    outputs += fmt::format("{}{}{}", k ? ", " : "", program.outputs()[k].dtype, output_shapes[k]);
  std::string ops;
  for (const codegen::Instruction& step : program.code())
    if (step.kind != codegen::Kind::input && step.kind != codegen::Kind::param && step.kind != codegen::Kind::constant)
      ops += fmt::format("{}{}", ops.empty() ? "" : " ", codegen::kind_name(step.kind));
  std::string plan;
  for (const std::string& step : runs)
    if (step != "input") plan += fmt::format("{}{}", plan.empty() ? "; runs [" : " ", step);
  if (!plan.empty()) plan += ']';
  std::fprintf(stderr, "kiln fusion: %.*s program %llu %s: %zu steps [%s]; inputs %s; %d params; outputs %s%s\n",
               static_cast<int>(backend.size()), backend.data(), static_cast<unsigned long long>(program.id()),
               compiled ? "compiled" : "found", program.code().size(), ops.c_str(), inputs.c_str(),
               program.param_count(), outputs.c_str(), plan.c_str());
}


bool worth_storing(const codegen::Node& root) {
  std::unordered_set<const codegen::Node*> seen;
  std::unordered_set<int> inputs;
  bool costly = false;
  auto visit = [&](auto& self, const codegen::Node& n) -> void {
    if (!seen.insert(&n).second) return;
    switch (n.kind) {
      case codegen::Kind::input: inputs.insert(n.index); return;
      case codegen::Kind::exp: case codegen::Kind::log: case codegen::Kind::log1p: case codegen::Kind::expm1:
      case codegen::Kind::sqrt: case codegen::Kind::sin: case codegen::Kind::cos: case codegen::Kind::tan:
      case codegen::Kind::tanh: case codegen::Kind::erf: case codegen::Kind::div: case codegen::Kind::pow:
      case codegen::Kind::atan2: case codegen::Kind::int_div: case codegen::Kind::int_rem:
      case codegen::Kind::int_pow: case codegen::Kind::row_sum: case codegen::Kind::row_max:
      case codegen::Kind::row_min:
        costly = true;
        break;
      default: break;
    }
    for (const codegen::NodePtr& a : n.args) self(self, *a);
  };
  visit(visit, root);
  return costly || inputs.size() >= 2;
}

bool has_row_reduction(const codegen::NodePtr& root) {
  std::unordered_set<const codegen::Node*> seen;
  auto visit = [&](auto& self, const codegen::Node& n) -> bool {
    if (!seen.insert(&n).second) return false;
    if (codegen::is_row_reduction(n.kind)) return true;
    for (const codegen::NodePtr& a : n.args)
      if (self(self, *a)) return true;
    return false;
  };
  return visit(visit, *root);
}

codegen::NodePtr replace_nodes(const codegen::NodePtr& root,
                               const std::unordered_map<const codegen::Node*, codegen::NodePtr>& with) {
  return codegen::rewrite(root, [&](const codegen::NodePtr& n, auto&&) -> codegen::NodePtr {
    const auto it = with.find(n.get());
    return it == with.end() ? nullptr : it->second;
  });
}

codegen::NodePtr renumber_inputs(const codegen::NodePtr& root, std::span<const int> index) {
  return codegen::rewrite(root, [&](const codegen::NodePtr& n, auto&&) -> codegen::NodePtr {
    if (n->kind != codegen::Kind::input) return nullptr;
    return codegen::make_input(index[static_cast<std::size_t>(n->index)], n->mask);
  });
}

}  // namespace kiln::fusion::detail
