// Elementwise programs: what a backend's one elementwise primitive, B::elementwise, runs.
// A program is a DAG of scalar nodes (kiln/codegen/expr.hpp) computing in one type over
// typed inputs, with scalar parameters whose values come with each call, and one or more
// outputs. Its structural key names what it computes; backends cache their kernels by
// the key's id, so a repeated program traces, renders and hashes nothing.
#pragma once

#include "kiln/codegen/expr.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::codegen {

// One output of a program: the tree that computes it and the dtype it is stored in. In a row
// program, a `per_row` output is stored once per row (the domain with its last dim 1): its
// tree must not vary along the row (it reads the row only through reductions).
struct ProgramOutput {
  NodePtr root;
  DType dtype;
  bool per_row = false;
};

// One step of a program's code: a node with its arguments as indices of earlier steps.
struct Instruction {
  Kind kind;
  bool mask = false;                      // the value is a bool
  std::array<std::uint32_t, 3> args{};    // the first kind_arity(kind) are used
  double value = 0;                       // Kind::constant
  int index = 0;                          // Kind::input, Kind::param
};

namespace detail {
// The id of a structural key: equal keys get equal ids, for as long as the process runs.
// One table per process, in libkiln_core (src/core/program.cpp): a table in this header
// would be one per shared library wherever symbols are not merged across them (hidden
// visibility, static builds, other platforms), and two programs could share an id.
std::uint64_t intern_key(const std::string& key);
}  // namespace detail

class Program {
 public:
  // A program over `inputs` (input i has dtype inputs[i]; a bool input is a mask) with
  // `params` scalar parameters, computing in type `type` (f16 and bf16 values compute in
  // f32). Checks every node against the declaration and throws kiln::Error naming the
  // mismatch, so that a backend can trust any program it is given.
  // Compiled once, in libkiln_core (src/core/program.cpp).
  Program(ScalarType type, std::vector<DType> inputs, int params, std::vector<ProgramOutput> outputs);

  ScalarType type() const { return type_; }
  std::span<const DType> inputs() const { return inputs_; }
  int param_count() const { return params_; }
  // The outputs' trees, for renderers.
  std::span<const ProgramOutput> outputs() const { return outputs_; }
  // The nodes in an order where each comes after its arguments, each distinct subtree
  // once; output_slots()[k] is the step that computes output k. For evaluators.
  std::span<const Instruction> code() const { return code_; }
  std::span<const std::uint32_t> output_slots() const { return output_slots_; }
  // Whether the code reduces along rows (Kind::row_sum...): a row program, which
  // B::row_program runs and B::elementwise rejects.
  bool reduces_rows() const { return reduces_rows_; }
  // What the program computes, as text: its type, input dtypes, parameter count, code and
  // outputs ("f32|f32|p1|in0;p0;mul(0,1)|2:f32"). Programs with equal keys compute the same
  // thing; scalar parameter values and tensor shapes are not part of it. Made when asked
  // (for messages and logs): the id below is interned from the code itself.
  std::string key() const;
  // A number for the structure (equal keys, equal ids) that backends index their kernels by.
  std::uint64_t id() const { return id_; }

 private:
  ScalarType type_;
  std::vector<DType> inputs_;
  int params_;
  std::vector<ProgramOutput> outputs_;
  std::vector<Instruction> code_;
  std::vector<std::uint32_t> output_slots_;
  bool reduces_rows_ = false;
  std::uint64_t id_ = 0;
};

// Programs made once and kept for the process, by a small slot number (a dtype, a pair of
// them...): the one-op programs of kiln/backend/provided.hpp live in one of these per op,
// so a repeated op finds its program without tracing it. Thread-safe; lock-free once made.
template <std::size_t Slots> class ProgramTable {
 public:
  template <class Make> const Program& get(std::size_t slot, Make&& make) {
    KILN_CHECK(slot < Slots, "elementwise program: slot {} of {}", slot, Slots);
    if (const Program* p = programs_[slot].load(std::memory_order_acquire)) return *p;
    const std::lock_guard lock(mutex_);
    if (const Program* p = programs_[slot].load(std::memory_order_relaxed)) return *p;
    const Program* made = new Program(make());  // kept until exit, like the kernels made for it
    programs_[slot].store(made, std::memory_order_release);
    return *made;
  }

 private:
  std::array<std::atomic<const Program*>, Slots> programs_{};
  std::mutex mutex_;
};

// ---------------------------------------------------------------- running programs
// What every backend's B::elementwise checks first: the inputs and parameters match the
// program. Returns the shape the inputs broadcast to (the outputs' shape).
// That `inputs` operands and `params` parameters are what `program` takes, for `op`.
inline void check_program_arity(std::string_view op, const Program& program, std::size_t inputs, std::size_t params) {
  KILN_CHECK(inputs == program.inputs().size(), "{}: the program takes {} inputs, got {} ({})", op,
             program.inputs().size(), inputs, program.key());
  KILN_CHECK(params == static_cast<std::size_t>(program.param_count()), "{}: the program takes {} parameters, got {} ({})",
             op, program.param_count(), params, program.key());
}

template <class B>
Shape check_elementwise_call(const Program& program, std::span<const typename B::Primitive> inputs,
                             std::span<const double> params) {
  const std::span<const DType> declared = program.inputs();
  check_program_arity("elementwise", program, inputs.size(), params.size());
  KILN_CHECK(!inputs.empty(), "elementwise: a program needs at least one input ({})", program.key());
  KILN_CHECK(!program.reduces_rows(), "elementwise: the program reduces along rows; run it with row_program ({})",
             program.key());
  Shape shape = B::shape(inputs[0]);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Shape s = B::shape(inputs[k]);
    KILN_CHECK(B::dtype(inputs[k]) == declared[k], "elementwise: input {} must be {}, got {} {} ({})", k, declared[k],
               s, B::dtype(inputs[k]), program.key());
    if (s != shape) shape = broadcast_shapes("elementwise", shape, s);
  }
  return shape;
}

// What every backend's B::row_program checks first. A row program runs over `domain`: its
// inputs broadcast to it (each to exactly the domain), its row reductions reduce along the
// domain's last dim (its rows, at least one element long), and each output is the domain, or
// the domain with its last dim 1 where it is per_row.
template <class B>
void check_row_program_call(const Program& program, std::span<const typename B::Primitive> inputs,
                            std::span<const double> params, const Shape& domain) {
  const std::span<const DType> declared = program.inputs();
  check_program_arity("row_program", program, inputs.size(), params.size());
  KILN_CHECK(domain.rank() >= 1 && domain[domain.rank() - 1] >= 1,
             "row_program: the domain {} has no rows of at least one element ({})", domain, program.key());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Shape s = B::shape(inputs[k]);
    KILN_CHECK(B::dtype(inputs[k]) == declared[k], "row_program: input {} must be {}, got {} {} ({})", k, declared[k], s,
               B::dtype(inputs[k]), program.key());
    KILN_CHECK(s.rank() <= domain.rank() && broadcast_shapes("row_program", domain, s) == domain,
               "row_program: input {} of shape {} does not broadcast to the domain {} ({})", k, s, domain,
               program.key());
  }
  // A per-row output reads the row only through reductions and inputs of one element per row.
  const std::int64_t row = domain[domain.rank() - 1];
  std::unordered_map<const Node*, bool> varies;
  auto varying = [&](auto& self, const Node& n) -> bool {
    if (auto it = varies.find(&n); it != varies.end()) return it->second;
    bool v = false;
    if (n.kind == Kind::input) {
      const Shape s = B::shape(inputs[static_cast<std::size_t>(n.index)]);
      v = row > 1 && s.rank() > 0 && s[s.rank() - 1] != 1;
    } else if (!is_row_reduction(n.kind)) {
      for (const NodePtr& a : n.args) v = v || self(self, *a);
    }
    varies.emplace(&n, v);
    return v;
  };
  const std::span<const ProgramOutput> outputs = program.outputs();
  for (std::size_t k = 0; k < outputs.size(); ++k)
    KILN_CHECK(!outputs[k].per_row || !varying(varying, *outputs[k].root),
               "row_program: output {} is stored per row but varies along the row ({})", k, program.key());
}

// Which of the inputs in0..in<inputs-1> the trees `roots` read (libkiln_core).
std::vector<bool> inputs_read(std::span<const NodePtr> roots, std::size_t inputs);

// `root` with nodes replaced: replace(node, self) gives a node's replacement, or null to keep
// the node and rewrite its arguments (self(arg) rewrites a subtree, for a replacement built
// from rewritten arguments). Each shared subtree is rewritten once; untouched subtrees stay
// shared with `root`.
template <class Replace> NodePtr rewrite(const NodePtr& root, Replace&& replace) {
  std::unordered_map<const Node*, NodePtr> done;
  auto visit = [&](auto& self, const NodePtr& n) -> NodePtr {
    if (auto it = done.find(n.get()); it != done.end()) return it->second;
    auto recurse = [&](const NodePtr& a) { return self(self, a); };
    NodePtr out = replace(n, recurse);
    if (out == nullptr) {
      out = n;
      std::vector<NodePtr> args;
      bool changed = false;
      for (const NodePtr& a : n->args) {
        args.push_back(self(self, a));
        changed = changed || args.back() != a;
      }
      if (changed) out = make_node(n->kind, std::move(args));
    }
    done.emplace(n.get(), out);
    return out;
  };
  return visit(visit, root);
}

// A row program's output as a kernel that runs a row at a time computes it: its row
// reductions one after another, each over the row, then the value (kiln/codegen's row
// kernels, src/codegen/row_kernel.hpp).
struct RowReduction {
  Kind kind = Kind::row_sum;
  NodePtr argument;  // over the program's inputs and the reductions before it
};
struct RowTree {
  std::vector<RowReduction> reductions;  // each after those its argument reads
  NodePtr value;
};
// `root`'s reductions, reduction k read as the input in<first + k> wherever a later
// reduction or the value reads it.
inline RowTree row_tree(const NodePtr& root, int first) {
  RowTree tree;
  tree.value = rewrite(root, [&](const NodePtr& n, auto& recurse) -> NodePtr {
    if (!is_row_reduction(n->kind)) return nullptr;
    NodePtr argument = recurse(n->args[0]);
    tree.reductions.push_back({n->kind, std::move(argument)});
    return make_input(first + static_cast<int>(tree.reductions.size()) - 1);
  });
  return tree;
}

// Whether `root` only moves its inputs (inputs and selects between them): such a kernel can
// copy 16-bit floats as their bits.
inline bool moves_only(const NodePtr& root) {
  if (root->kind == Kind::input) return true;
  if (root->kind != Kind::select) return false;
  return root->args[0]->kind == Kind::input && moves_only(root->args[1]) && moves_only(root->args[2]);
}

// ---------------------------------------------------------------- one-op programs
// The catalogue's ops and gradient formulas as programs, for tensors of `dtype`.

// out = Op(in0): a predicate's output is bool.
template <class Op> Program unary_program(DType dtype) {
  const ScalarType t = scalar_type_of(dtype);
  return Program(t, {dtype}, 0, {{trace_unary<Op>(t), ops::is_predicate<Op> ? DType::boolean : dtype}});
}
// out = Op(in0, in1), or Op(in0, p0) with `scalar_rhs`.
template <class Op> Program binary_program(DType dtype, bool scalar_rhs) {
  const ScalarType t = scalar_type_of(dtype);
  std::vector<DType> inputs{dtype};
  if (!scalar_rhs) inputs.push_back(dtype);
  return Program(t, std::move(inputs), scalar_rhs ? 1 : 0,
                 {{trace_binary<Op>(t, scalar_rhs), ops::is_predicate<Op> ? DType::boolean : dtype}});
}
// out = in0 ? in1 : in2, in0 bool.
inline Program where_program(DType dtype) {
  const ScalarType t = scalar_type_of(dtype);
  const bool mask = dtype == DType::boolean;
  NodePtr root = make_node(Kind::select, {make_input(0, true), make_input(1, mask), make_input(2, mask)});
  return Program(t, {DType::boolean, dtype, dtype}, 0, {{std::move(root), dtype}});
}
// dx = Op::grad(x = in0, y = in1, dy = in2).
template <class Op> Program unary_grad_program(DType dtype) {
  const ScalarType t = scalar_type_of(dtype);
  return Program(t, {dtype, dtype, dtype}, 0, {{trace_unary_grad<Op>(t), dtype}});
}
// The gradient of one operand: Op::grad_lhs / grad_rhs(a = in0, b = in1, y = in2, dy = in3).
template <class Op> Program binary_grad_program(DType dtype, ops::Operand side) {
  const ScalarType t = scalar_type_of(dtype);
  NodePtr root = side == ops::Operand::lhs ? trace_binary_grad<Op, ops::Operand::lhs>(t)
                                           : trace_binary_grad<Op, ops::Operand::rhs>(t);
  return Program(t, {dtype, dtype, dtype, dtype}, 0, {{std::move(root), dtype}});
}

}  // namespace kiln::codegen
