// KILN_FUSION_LOG (include/kiln/fusion/backend.hpp): one line per fused program launched.
#include "kiln/fusion/backend.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

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
                std::span<const Shape> input_shapes, const Shape& shape, std::span<const std::string> runs) {
  std::string inputs;
  for (std::size_t k = 0; k < input_shapes.size(); ++k)
    inputs += fmt::format("{}in{} {}{}", k ? ", " : "", k, program.inputs()[k], input_shapes[k]);
  std::string outputs;
  for (std::size_t k = 0; k < program.outputs().size(); ++k)
    outputs += fmt::format("{}{}{}", k ? ", " : "", program.outputs()[k].dtype, shape);
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

}  // namespace kiln::fusion::detail
