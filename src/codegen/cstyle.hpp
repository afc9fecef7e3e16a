// The renderer base of the GPU backends: turns a codegen tree (kiln/codegen/expr.hpp) into
// one expression of a C-like language, plus the helper functions it calls, from a table of
// spellings. What every language shares lives here once: the type rules of the node kinds
// (from expr.hpp's table), the folding of isnan / isinf where they are always false, the
// order of helpers (each after the helpers it calls), and rendering each shared subtree
// once. What differs is a Language: how each kind is spelled in each type, how constants
// are written, and where a helper function comes from. GLSL (glsl.hpp) and CUDA C++
// (cuda.hpp) are two such tables. Private to Kiln's backends and tests (src/codegen/).
#pragma once

#include "codegen/decompositions.hpp"
#include "kiln/codegen/expr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::codegen {

// A function a rendered expression calls: its name, its definition, and the kinds whose
// helpers that definition calls (to be placed before it).
struct Helper {
  std::string_view name;
  std::string_view source;
  std::span<const Kind> needs = {};
};

// How a language writes one kind in one type: a pattern whose {0}, {1}, {2} are the
// rendered arguments ("({0} + {1})", "expf({0})"), or a call of the language's helper for
// the kind (`helper`), or nothing (the kind does not exist in that type; the type rules of
// expr.hpp's table already reject most of those).
struct Spelling {
  std::string_view pattern;
  bool helper = false;
  bool decompose = false;  // rendered as its decomposition into other kinds (decompositions.hpp)
};
inline constexpr Spelling call_helper{{}, true};
inline constexpr Spelling decomposed{{}, false, true};

// A language's table. One row of `spellings` per node kind (in expr.hpp's order), one
// column per ScalarType (f32, f64, i32, i64, u8, bool); input and constant rows are unused.
struct Language {
  std::string_view name;  // in errors: "glsl", "cuda"
  std::array<std::array<Spelling, 6>, kind_count> spellings;
  std::string (*constant)(double value, ScalarType t);
  Helper (*helper)(Kind kind, ScalarType t);
  std::string_view (*input)(int index);  // an operand's name; in<index> unless overridden
};

// A value that an expression reads more than once, computed once before it: the kernel
// declares `const <type> <name> = <value>;` (type: bool where `mask`, else the tree's type).
struct Let {
  std::string name;  // e0, e1...
  bool mask = false;
  std::string value;  // over in0, in1..., p0..., and the lets before it
};

struct Expression {
  std::string helpers;    // the functions `value` calls, each once, each after those it calls
  std::vector<Let> lets;  // declared, in order, before `value` is read
  std::string value;      // one expression over in0, in1...; of type t, or bool for a mask root
};
struct Expressions {
  std::string helpers;                 // the functions the values call, each once
  std::vector<std::vector<Let>> lets;  // per root: declared, in order, before its value is read
  std::vector<std::string> values;     // one expression per root
};

// Where a kernel reads the values of several roots: in one scope (an elementwise kernel's
// outputs: a root may read the lets of the roots before it) or each in a scope of its own
// (a row kernel's reductions and output: each root's lets are its own).
enum class RootScope : std::uint8_t { shared, separate };

// Renders `roots`, trees computing in type t, in `language`: one expression each, and the
// helpers they call, each once. A subtree that a root's tree reads more than once is a Let,
// rendered once and read by name: written out at each use instead, a formula whose steps
// each read the step before twice (atan2's series, a gradient of a gradient) doubles in
// length per step, and a shader compiler spends seconds on megabytes of text. Throws
// kiln::Error, naming the language, the kind and the type, for what the trees' type rules
// or the language forbid.
inline Expressions render(const Language& language, std::span<const NodePtr> roots, ScalarType t,
                          RootScope scope = RootScope::shared) {
  for (const NodePtr& root : roots) KILN_CHECK(root != nullptr, "render_{}: null tree", language.name);
  Expressions out;
  std::vector<std::string_view> used;                    // helpers already in out.helpers
  std::unordered_map<const Node*, std::string> rendered;  // each subtree renders once
  std::unordered_map<const Node*, int> reads;             // how often the trees read each node
  std::unordered_map<const Node*, NodePtr> decompositions;  // each decomposed node's tree
  int lets = 0;

  auto add_helper = [&](auto& self, Kind kind) -> std::string_view {
    const Helper h = language.helper(kind, t);
    KILN_CHECK(!h.name.empty(), "render_{}: no helper for {} in {}", language.name, kind_name(kind),
               scalar_type_name(t));
    if (std::find(used.begin(), used.end(), h.name) == used.end()) {
      for (const Kind need : h.needs) self(self, need);
      used.push_back(h.name);
      out.helpers += h.source;
      out.helpers += '\n';
    }
    return h.name;
  };
  // isnan / isinf of an integer, or of a finite constant, is false: kiln::fn::max's NaN
  // checks vanish for integer trees and for constant operands (fn::min(x, constant(x, 20))).
  auto always_false = [&](const Node& n) {
    if (n.kind != Kind::isnan && n.kind != Kind::isinf) return false;
    const Node& x = *n.args[0];
    return !is_float(t) || (x.kind == Kind::constant && std::isfinite(x.value));
  };

  auto decomposed = [&](const Node& n) {
    return language.spellings[static_cast<std::size_t>(n.kind)][static_cast<std::size_t>(t)].decompose;
  };
  auto decomposition_of = [&](const Node& n) -> const Node& {
    NodePtr& tree = decompositions[&n];
    if (!tree) tree = decomposition(n, t);
    return *tree;
  };
  // Counts the reads of each node that rendering reaches: the children of a node read
  // once, however often the node itself is read.
  auto count = [&](auto& self, const Node& n) -> void {
    if (++reads[&n] > 1 || n.kind == Kind::input || n.kind == Kind::param || n.kind == Kind::constant) return;
    if (n.kind == Kind::select && always_false(*n.args[0])) return self(self, *n.args[2]);
    if (always_false(n)) return;
    if (decomposed(n)) return self(self, decomposition_of(n));
    for (const NodePtr& arg : n.args) self(self, *arg);
  };
  std::vector<Let>* root_lets = nullptr;  // the lets of the root being rendered
  // A node read more than once becomes a let of the root that reads it first.
  auto bind = [&](const Node& n, std::string s) {
    if (reads[&n] < 2) return s;
    root_lets->push_back({fmt::format("e{}", lets++), n.mask, std::move(s)});
    return root_lets->back().name;
  };

  auto render_node = [&](auto& self, const Node& n) -> std::string {
    if (auto it = rendered.find(&n); it != rendered.end()) return it->second;
    const KindInfo& info = kind_info(n.kind);
    KILN_CHECK(t != ScalarType::boolean || n.mask, "render_{}: a bool tree has the numeric node {}", language.name,
               info.name);
    KILN_CHECK(info.types != Types::floats || is_float(t), "render_{}: {} needs a float type, got {}", language.name,
               info.name, scalar_type_name(t));
    KILN_CHECK(info.types != Types::integers || is_integer(t), "render_{}: {} needs an integer type, got {}",
               language.name, info.name, scalar_type_name(t));
    std::string s;
    if (n.kind == Kind::input) {
      s = language.input ? std::string(language.input(n.index)) : fmt::format("in{}", n.index);
    } else if (n.kind == Kind::param) {
      s = fmt::format("p{}", n.index);  // a kernel argument, or read from the layout (KernelDialect::param_load)
    } else if (n.kind == Kind::constant) {
      s = language.constant(n.value, t);
    } else if (n.kind == Kind::select && always_false(*n.args[0])) {
      s = self(self, *n.args[2]);  // the folded select never renders its dead branch (or the condition)
    } else if (always_false(n)) {
      s = "false";
    } else if (decomposed(n)) {
      s = bind(n, self(self, decomposition_of(n)));
    } else {
      std::array<std::string, 3> a;
      for (std::size_t i = 0; i < n.args.size(); ++i) a[i] = self(self, *n.args[i]);
      const Spelling& spelling = language.spellings[static_cast<std::size_t>(n.kind)][static_cast<std::size_t>(t)];
      if (spelling.helper) {
        const std::string_view fn = add_helper(add_helper, n.kind);
        s = fmt::format("{}({})", fn, a[0]);
        for (std::size_t i = 1; i < n.args.size(); ++i) s.insert(s.size() - 1, ", " + a[i]);
      } else {
        KILN_CHECK(!spelling.pattern.empty(), "render_{}: {} is not available in {}", language.name, info.name,
                   scalar_type_name(t));
        s = fmt::format(fmt::runtime(spelling.pattern), a[0], a[1], a[2]);
      }
      s = bind(n, std::move(s));
    }
    rendered.emplace(&n, s);
    return s;
  };
  out.lets.resize(roots.size());
  for (std::size_t r = 0; r < roots.size(); ++r) {
    if (scope == RootScope::separate || r == 0) {
      rendered.clear();
      reads.clear();
      for (std::size_t k = r; k < (scope == RootScope::separate ? r + 1 : roots.size()); ++k) count(count, *roots[k]);
    }
    root_lets = &out.lets[r];
    out.values.push_back(render_node(render_node, *roots[r]));
  }
  return out;
}

// Renders one tree (as above).
inline Expression render(const Language& language, const NodePtr& root, ScalarType t) {
  Expressions e = render(language, std::span(&root, 1), t);
  return {std::move(e.helpers), std::move(e.lets[0]), std::move(e.values[0])};
}

// A row of a Language's spellings: the same spelling in every type (the kinds whose
// meaning the language's operators already have in each), or one per type.
constexpr std::array<Spelling, 6> every_type(Spelling s) { return {s, s, s, s, s, s}; }

// What every C-like language spells alike: C's operators, in every type. A language's
// table starts from these rows and replaces those its language spells otherwise.
constexpr Language c_operators(std::string_view name) {
  Language l{};
  l.name = name;
  auto row = [&](Kind k, std::string_view pattern) {
    l.spellings[static_cast<std::size_t>(k)] = every_type(Spelling{pattern});
  };
  row(Kind::add, "({0} + {1})");
  row(Kind::sub, "({0} - {1})");
  row(Kind::mul, "({0} * {1})");
  row(Kind::div, "({0} / {1})");
  row(Kind::select, "({0} ? {1} : {2})");
  row(Kind::lt, "({0} < {1})");
  row(Kind::le, "({0} <= {1})");
  row(Kind::gt, "({0} > {1})");
  row(Kind::ge, "({0} >= {1})");
  row(Kind::eq, "({0} == {1})");
  row(Kind::ne, "({0} != {1})");
  row(Kind::logical_and, "({0} && {1})");
  row(Kind::logical_or, "({0} || {1})");
  row(Kind::logical_xor, "({0} != {1})");
  row(Kind::logical_not, "(!{0})");
  return l;
}

}  // namespace kiln::codegen
