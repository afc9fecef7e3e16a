// The row kernel around rendered expressions (cstyle.hpp): a row program's output
// (kiln/codegen/program.hpp) computed one workgroup per row of its domain. The row's
// reductions run one after another, each a loop of the workgroup's invocations over the
// row's elements followed by a tree reduction of their partial results in shared memory;
// then the output is written, over the row or, where it is per row, once. Written once
// for every C-like language, from the parts of a KernelDialect (kernel.hpp) that differ.
// Private to Kiln.
#pragma once

#include "codegen/kernel.hpp"

#include <cmath>
#include <utility>

namespace kiln::codegen {

// What one row kernel computes: `kernel` gives the inputs, the parameters, the output (one),
// the helpers and the output's value; the value and each
// reduction's argument read the reductions before them as in<inputs + k> (codegen::row_tree).
struct RowKernel {
  ElementwiseKernel kernel;
  ScalarType type = ScalarType::f32;  // what the reductions' arguments and results compute in
  // f32 sums accumulate in f64 (each invocation adds thousands of a long row's elements):
  // where the language has doubles on every device (CUDA), not GLSL's optional ones.
  bool wide_sums = false;
  struct Reduction {
    Kind kind;
    std::string argument;        // rendered
    std::vector<Let> lets = {};  // declared before the argument, in the reduction's loop
  };
  std::vector<Reduction> reductions;
  bool per_row = false;  // the output has one element per row
};

// The row kernel of a row program's output k, rendered in `language`, with workgroups of
// `workgroup_size` (the entry's name is the caller's).
inline RowKernel program_row_kernel(const Language& language, const Program& program, std::size_t k,
                                    int workgroup_size) {
  const ProgramOutput& out = program.outputs()[k];
  const RowTree tree = row_tree(out.root, static_cast<int>(program.inputs().size()));
  std::vector<NodePtr> roots;
  for (const RowReduction& r : tree.reductions) roots.push_back(r.argument);
  roots.push_back(tree.value);
  Expressions e = render(language, roots, program.type(), RootScope::separate);
  RowKernel kernel;
  kernel.kernel.inputs.assign(program.inputs().begin(), program.inputs().end());
  kernel.kernel.params = program.param_count();
  kernel.kernel.param_type = program.type();
  kernel.kernel.outputs = {{out.dtype, std::move(e.values.back()), out.root->mask, std::move(e.lets.back())}};
  kernel.kernel.helpers = std::move(e.helpers);
  kernel.kernel.workgroup_size = workgroup_size;
  kernel.type = program.type();
  kernel.per_row = out.per_row;
  for (std::size_t j = 0; j < tree.reductions.size(); ++j)
    kernel.reductions.push_back({tree.reductions[j].kind, std::move(e.values[j]), std::move(e.lets[j])});
  return kernel;
}

// The layout integers a row kernel reads: [0] the number of rows, [1] the domain's rank,
// [2, 2 + kMaxRank) its dims (the last one the row's length), then each input's offset and
// strides (broadcast to the domain, 0 along dims it has 1 of) and the parameters, as in
// kernel.hpp. The output is
// dense: the domain, or the domain with its last dim 1 where it is per row.
inline std::string row_kernel(const Language& language, const KernelDialect& d, const RowKernel& r) {
  KILN_CHECK(!d.group_index.empty() && !d.local_index.empty() && !d.shared_array.empty() && !d.barrier.empty(),
             "row_kernel_{}: the language has no workgroups here", d.name);
  const ElementwiseKernel& k = r.kernel;
  const int size = k.workgroup_size;
  KILN_CHECK(size > 0 && (size & (size - 1)) == 0, "row_kernel_{}: a workgroup of {} (not a power of two)", d.name,
             size);
  const std::string_view I = d.index_type;
  const std::string_view T = d.scalar_type(r.type);
  // What partial results accumulate in.
  const ScalarType wide = r.wide_sums && r.type == ScalarType::f32 ? ScalarType::f64 : r.type;
  const std::string_view A = d.scalar_type(wide);
  auto at = [&](const auto& i) { return fmt::format(fmt::runtime(d.layout_at), i); };
  std::string s = d.declarations(k, {});
  s += k.helpers;
  if (!r.reductions.empty()) s += fmt::format(fmt::runtime(d.shared_array), A, "kiln_partial", size);
  s += d.entry(k);
  s += fmt::format("  const {0} row = {1};\n  if (row >= {2}) return;\n  const {0} lid = {3};\n"
                   "  const {0} rank = {4};\n  const {0} cols = {5};\n",
                   I, d.group_index, at(0), d.local_index, at(1), at("1 + rank"));
  s += param_loads(d, k);
  // Each input's first element in this row, and its stride along the row.
  for (std::size_t n = 0; n < k.inputs.size(); ++n) {
    const int base = kFirstLayout + static_cast<int>(n) * kLayoutStride;
    s += fmt::format("  {0} base{1} = {2};\n"
                     "  for ({0} rest = row, d = rank - 2; d >= 0; --d) {{\n"
                     "    const {0} size = {3};\n"
                     "    base{1} += (rest % size) * {4};\n"
                     "    rest /= size;\n"
                     "  }}\n"
                     "  const {0} step{1} = {5};\n",
                     I, n, at(base), at("2 + d"), at(fmt::format("{} + d", base + 1)), at(fmt::format("{} + rank", base)));
  }
  // The inputs' elements at column c (loads a value does not read are dead code).
  auto loads = [&](std::string_view indent) {
    std::string out;
    for (std::size_t n = 0; n < k.inputs.size(); ++n)
      out += fmt::format("{}{}\n", indent,
                         load_input(d, k, n, fmt::format(fmt::runtime(d.input_at), n, fmt::format("base{0} + c * step{0}", n))));
    return out;
  };
  // Max and min keep a NaN (as the CPU's reductions and torch.amax do).
  auto combine = [&](Kind kind, const std::string& a, const std::string& b) {
    if (kind == Kind::row_sum) return fmt::format("{} + {}", a, b);
    const char* order = kind == Kind::row_max ? ">" : "<";
    return fmt::format("(isnan({1}) || {1} {2} {0}) ? {1} : {0}", a, b, order);
  };
  auto identity = [&](Kind kind) {
    const double v = kind == Kind::row_sum ? 0.0 : kind == Kind::row_max ? -INFINITY : INFINITY;
    return language.constant(v, r.type);
  };
  const auto first = static_cast<int>(k.inputs.size());
  for (std::size_t j = 0; j < r.reductions.size(); ++j) {
    const auto& [kind, argument, lets] = r.reductions[j];
    KILN_CHECK(is_row_reduction(kind), "row_kernel_{}: {} is not a row reduction", d.name, kind_name(kind));
    const auto name = fmt::format("in{}", first + static_cast<int>(j));
    s += fmt::format("  {0} {1};\n  {{\n    {5} acc = {2};\n    for ({3} c = lid; c < cols; c += {4}) {{\n", T, name,
                     identity(kind), I, size, A);
    s += loads("      ");
    s += let_statements(lets, T, "      ");
    s += fmt::format("      const {} v = {};\n      acc = {};\n    }}\n", A, argument, combine(kind, "acc", "v"));
    s += fmt::format("    kiln_partial[lid] = acc;\n    {0}\n"
                     "    for ({1} reach = {2}; reach > 0; reach >>= 1) {{\n"
                     "      if (lid < reach) {{\n"
                     "        const {3} other = kiln_partial[lid + reach];\n"
                     "        kiln_partial[lid] = {4};\n"
                     "      }}\n"
                     "      {0}\n"
                     "    }}\n"
                     "    {5} = {6};\n    {0}\n  }}\n",
                     d.barrier, I, size / 2, A, combine(kind, "kiln_partial[lid]", "other"), name,
                     A == T ? std::string("kiln_partial[0]") : d.cast(T, "kiln_partial[0]"));
  }
  KILN_CHECK(k.outputs.size() == 1, "row_kernel_{}: one output per row kernel, got {}", d.name, k.outputs.size());
  const std::string out = fmt::format(fmt::runtime(d.output_at), 0, r.per_row ? "row" : "row * cols + c");
  if (r.per_row) {
    s += fmt::format("  if (lid == 0) {{\n    const {} c = 0;\n", I);
    s += loads("    ");
  } else {
    s += fmt::format("  for ({} c = lid; c < cols; c += {}) {{\n", I, size);
    s += loads("    ");
  }
  s += let_statements(k.outputs[0].lets, T, "    ");
  s += fmt::format("    {} = {};\n  }}\n}}\n", out, stored_value(d, k, k.outputs[0]));
  return s;
}

}  // namespace kiln::codegen
