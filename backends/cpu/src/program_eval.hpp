// What the CPU's two program evaluators share (program.cpp: elementwise programs over chunks
// of a run; row_program.cpp: row programs, row by row): registers and operands, one step's
// arithmetic, the catalogue formulas a plan runs compiled, the loop that executes a plan's
// steps on one chunk, and the store of an output chunk. Private to backends/cpu/src.
#pragma once

#include "elementwise_kernels.hpp"

#include "kiln/codegen/program.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::cpu::program_eval {

using codegen::Instruction;
using codegen::Kind;
using codegen::Program;

// Whether programs of gradient formulas (the backward passes that Fusion<Cpu> records) run
// them compiled, as they do the forward ones. The embedded build (KILN_CPU_ONEDNN=0), made for
// inference, leaves them out: a backward program there runs step by step, and the binary
// keeps a compiled copy of every gradient formula fewer.
// The same build leaves out the chains of two arithmetic steps and exp(a - b) (binary_chain
// below): a fused program there runs them as two steps, and the static classifier stays
// under its 3 MB.
#if defined(KILN_CPU_ONEDNN) && KILN_CPU_ONEDNN == 0
inline constexpr bool kGradientFormulas = false;
inline constexpr bool kChainFormulas = false;
#else
inline constexpr bool kGradientFormulas = true;
inline constexpr bool kChainFormulas = true;
#endif

// Elements per step. A register of a chunk is kChunk * sizeof(T) bytes (1 KiB of floats),
// so a program of a few dozen steps keeps every register in L1.
constexpr std::int64_t kChunk = 256;
// How many chunks ahead each contiguous input is prefetched (8 KiB of floats).
constexpr std::int64_t kPrefetch = 8;

// The registers of type T: Simd<T> and SimdMask<T> for floating types, plain values for
// integers and bool (whose simple loops the compiler vectorizes where it can).
template <class T> constexpr bool simd = std::is_floating_point_v<T>;
template <class T> using Value = std::conditional_t<simd<T>, Simd<T>, T>;
template <class T> using Flag = std::conditional_t<simd<T>, SimdMask<T>, bool>;
template <class T> constexpr std::int64_t width() {
  if constexpr (simd<T>) return Simd<T>::width;
  else return 1;
}


// Where a step's numeric registers are read: register j of the chunk starts at
// base + j * step elements, step being the register width (a run of registers: a computed
// step's own, or a contiguous input read where it lies in memory) or 0 (one register read
// again for every j: a constant, a parameter, a broadcast input). Reading operands through
// this instead of copying them into register runs first keeps inputs, constants and
// parameters out of the executed code: a step of the code costs its own arithmetic plus
// a load per operand and a store, all in L1.
template <class T> struct Operand {
  const T* base = nullptr;
  std::int64_t step = 0;
};

// A catalogue formula compiled for the CPU (Op::apply or a gradient formula instantiated
// with Simd<T>, as the per-op kernels are): it computes `lanes` registers from its operands.
template <class T> using FormulaKernel = void (*)(const Operand<T>* in, Value<T>* out, std::size_t lanes);

// A formula the evaluator recognises in a program: its traced tree over in0..in<inputs-1>,
// how many steps it spans, and its compiled kernel.
template <class T> struct Formula {
  std::string name;
  codegen::NodePtr tree;
  int inputs = 0;
  std::size_t steps = 0;
  FormulaKernel<T> run = nullptr;
};

// One step of a plan: code step `step`, computed by the program's own instruction or, where
// `formula` is set, by that compiled formula reading the steps `bind` as its inputs.
template <class T> struct PlannedStep {
  std::uint32_t step = 0;
  const Formula<T>* formula = nullptr;
  std::array<std::uint32_t, 4> bind{};
  // A division whose divisor is one value for the whole chunk (a row program's uniform
  // divisor): a multiplication by its reciprocal, computed once (as the hand-fused softmax does).
  bool reciprocal = false;
};


// The registers of one thread: one run of values and one of flags per instruction, the
// operands, and a broadcast register per input read at stride 0.
// (Arrays, not vectors: Flag<int> is bool, and a vector<bool> holds no bools.)
template <class T> struct Registers {
  std::unique_ptr<Value<T>[]> values;
  std::unique_ptr<Flag<T>[]> flags;
  std::unique_ptr<Value<T>[]> broadcasts;
  std::vector<Operand<T>> operands;
  std::vector<Value<T>*> direct;  // per step: the output memory it writes this chunk, if any
  std::size_t size = 0, broadcast_size = 0;
  void reserve(std::size_t steps, std::size_t lanes) {
    operands.resize(steps);
    direct.assign(steps, nullptr);
    if (broadcast_size < steps) {
      broadcast_size = steps;
      broadcasts = std::make_unique<Value<T>[]>(steps);
    }
    if (size >= steps * lanes) return;
    size = steps * lanes;
    values = std::make_unique<Value<T>[]>(size);
    flags = std::make_unique<Flag<T>[]>(size);
  }
};

// The calling thread's own X, reached through a call that is not inlined: a thread_local of
// a shared library is found by a call to __tls_get_addr, which GCC repeats after every call
// and in loops (it rematerializes the address rather than keep it), where a reference
// returned from a function is an ordinary pointer.
// Each Owner (the function that uses it) has its own.
template <class X, class Owner> [[gnu::noinline]] X& thread_local_object() {
  static thread_local X object;
  return object;
}

template <class T> Value<T> broadcast(T v) {
  if constexpr (simd<T>) return Simd<T>::broadcast(v);
  else return v;
}
template <class T> KILN_INLINE Value<T> read(const Operand<T>& o, std::size_t j) {
  if constexpr (simd<T>) return Simd<T>::load(o.base + static_cast<std::int64_t>(j) * o.step);
  else return o.base[static_cast<std::int64_t>(j) * o.step];
}
template <class T> const T* elements(const Value<T>* v) {
  if constexpr (simd<T>) return reinterpret_cast<const T*>(v);
  else return v;
}
template <class T> Value<T> load(const T* p, std::int64_t stride, std::int64_t i, std::int64_t count) {
  if constexpr (simd<T>) return load_run(p, stride, i, count);
  else return p[i * stride];
}
// Bool elements (0/1 bytes) as a flag register.
template <class T> Flag<T> load_flag(const std::uint8_t* p, std::int64_t stride, std::int64_t i, std::int64_t count) {
  if constexpr (simd<T>) {
    alignas(64) T lanes[Simd<T>::width] = {};
    for (std::int64_t l = 0; l < count; ++l) lanes[l] = p[(i + l) * stride] != 0 ? T(1) : T(0);
    return Simd<T>::load(lanes) != T(0);
  } else {
    return p[i * stride] != 0;
  }
}
template <class T> void store(const Value<T>& v, T* p, std::int64_t count, bool stream) {
  if constexpr (simd<T>) {
    if (count != Simd<T>::width) v.store_partial(p, count);
    else if (stream) stream_store(p, v.v);
    else v.store(p);
  } else {
    *p = v;
  }
}
template <class T> void store_flag(const Flag<T>& f, bool* p, std::int64_t count) {
  if constexpr (simd<T>) f.store(p, count);
  else *p = f;
}
template <class T> Flag<T> select_flags(const Flag<T>& m, const Flag<T>& a, const Flag<T>& b) {
  if constexpr (simd<T>) return SimdMask<T>::of(Eigen::internal::pselect(m.v, a.v, b.v));
  else return m ? a : b;
}

// One numeric step on one register; `a`, `b` are its arguments.
// Inlined into each kind's loop below, where `kind` is a constant and the switch folds away.
template <class T> KILN_INLINE Value<T> number(Kind kind, const Value<T>& a, const Value<T>& b) {
  if constexpr (simd<T>) {
    switch (kind) {
      case Kind::neg: return -a;
      case Kind::exp: return a.exp();
      case Kind::log: return a.log();
      case Kind::log1p: return a.log1p();
      case Kind::expm1: return a.expm1();
      case Kind::sqrt: return a.sqrt();
      case Kind::abs: return a.abs();
      case Kind::sin: return a.sin();
      case Kind::cos: return a.cos();
      case Kind::tan: return a.tan();
      case Kind::tanh: return a.tanh();
      case Kind::erf: return a.erf();
      case Kind::floor: return a.floor();
      case Kind::ceil: return a.ceil();
      case Kind::round_even: return a.rint();
      case Kind::add: return a + b;
      case Kind::sub: return a - b;
      case Kind::mul: return a * b;
      case Kind::div: return a / b;
      case Kind::max: return a.max(b);
      case Kind::min: return a.min(b);
      case Kind::pow: return a.pow(b);
      case Kind::atan2: return a.atan2(b);
      default: break;
    }
  } else if constexpr (!std::is_same_v<T, bool>) {
    switch (kind) {
      case Kind::neg: return static_cast<T>(-a);
      case Kind::abs: return static_cast<T>(fn::abs(a));
      case Kind::add: return static_cast<T>(a + b);
      case Kind::sub: return static_cast<T>(a - b);
      case Kind::mul: return static_cast<T>(a * b);
      // C's truncating division, where it is defined; x / 0 is 0 and x / -1 wraps, as the
      // catalogue's integer Div does, instead of a trap.
      case Kind::div:
        if (b == 0) return T(0);
        if constexpr (std::is_signed_v<T>) {
          if (b == -1) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
        }
        return static_cast<T>(a / b);
      case Kind::max: return a > b ? a : b;
      case Kind::min: return a < b ? a : b;
      case Kind::int_div: return ops::Div::apply(a, b);
      case Kind::int_rem: return ops::Rem::apply(a, b);
      case Kind::int_pow: return ops::Pow::apply(a, b);
      default: break;
    }
  }
  KILN_FAIL("cpu elementwise: {} is not a numeric step of this program's type", codegen::kind_name(kind));
}

// A comparison or predicate of numbers.
template <class T> Flag<T> compare(Kind kind, const Value<T>& a, const Value<T>& b) {
  if constexpr (std::is_same_v<T, bool>) {
    KILN_FAIL("cpu elementwise: {} compares numbers, which a bool program has none of", codegen::kind_name(kind));
  } else {
    switch (kind) {
      case Kind::lt: return a < b;
      case Kind::le: return a <= b;
      case Kind::gt: return a > b;
      case Kind::ge: return a >= b;
      case Kind::eq: return a == b;
      case Kind::ne: return a != b;
      case Kind::isnan:
        if constexpr (simd<T>) return a.isNaN();
        else return false;
      case Kind::isinf:
        if constexpr (simd<T>) return a.isInf();
        else return false;
      default: KILN_FAIL("cpu elementwise: {} is not a comparison", codegen::kind_name(kind));
    }
  }
}

template <class T> Flag<T> logic(Kind kind, const Flag<T>& a, const Flag<T>& b) {
  switch (kind) {
    case Kind::logical_and: return a && b;
    case Kind::logical_or: return a || b;
    case Kind::logical_xor: return a != b;
    case Kind::logical_not: return !a;
    default: KILN_FAIL("cpu elementwise: {} is not a logic step", codegen::kind_name(kind));
  }
}

// ---------------------------------------------------------------- formulas and plans
// The catalogue's formulas that span two steps or more, for float programs: each op's
// apply and each gradient formula.
template <class Op, class T> void apply_unary(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = Op::apply(read(in[0], j));
}
// Op over an affine argument, in0 * in1 + in2 (a scale and shift, a bias, before an
// activation): the multiply and add stay in registers instead of taking a step each. GCC
// contracts the two into one FMA here (C++ mode's default -ffp-contract=fast), so a value can
// differ from the unfused ops' by one rounding.
template <class Op, class T> void apply_unary_affine(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = Op::apply(Value<T>(read(in[0], j) * read(in[1], j) + read(in[2], j)));
}
template <class T> void mul_add(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = read(in[0], j) * read(in[1], j) + read(in[2], j);
}
// Two arithmetic steps in a row, (in0 inner in1) outer in2 or, with `inner_left` false,
// in2 outer (in0 inner in1): the inner result stays in a register instead of taking a store
// and a load of its own (on a core that stores one 512-bit register per two cycles, a step's
// store is most of its cost). A multiply followed by an add or sub contracts to one FMA, as
// in mul_add.
template <Kind inner, Kind outer, bool inner_left, class T>
void binary_chain(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) {
    const Value<T> x = number<T>(inner, read(in[0], j), read(in[1], j));
    if constexpr (inner_left) out[j] = number<T>(outer, x, read(in[2], j));
    else out[j] = number<T>(outer, read(in[2], j), x);
  }
}
// exp(in0 - in1): softmax's and log-sum-exp's exponential of the row's shifted values.
template <class T> void exp_sub(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = Value<T>(read(in[0], j) - read(in[1], j)).exp();
}
template <class Op, class T> void apply_binary(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = Op::apply(read(in[0], j), read(in[1], j));
}
template <class Op, class T> void unary_grad(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) out[j] = Op::grad(read(in[0], j), read(in[1], j), read(in[2], j));
}
template <class Op, ops::Operand side, class T>
void binary_grad(const Operand<T>* in, Value<T>* out, std::size_t lanes) {
  for (std::size_t j = 0; j < lanes; ++j) {
    const Value<T> a = read(in[0], j), b = read(in[1], j), y = read(in[2], j), dy = read(in[3], j);
    if constexpr (side == ops::Operand::lhs) out[j] = Op::grad_lhs(a, b, y, dy);
    else out[j] = Op::grad_rhs(a, b, y, dy);
  }
}

// The number of distinct steps a tree computes (inputs, constants and parameters not counted).
inline std::size_t computed_steps(const codegen::NodePtr& root) {
  std::unordered_set<const codegen::Node*> seen;
  std::size_t count = 0;
  auto visit = [&](auto& self, const codegen::Node& n) -> void {
    if (!seen.insert(&n).second) return;
    if (n.kind != Kind::input && n.kind != Kind::constant && n.kind != Kind::param) ++count;
    for (const codegen::NodePtr& a : n.args) self(self, *a);
  };
  visit(visit, *root);
  return count;
}

template <class T> const std::vector<Formula<T>>& formulas() {
  static const std::vector<Formula<T>> table = [] {
    std::vector<Formula<T>> out;
    const codegen::ScalarType t = std::is_same_v<T, float> ? codegen::ScalarType::f32 : codegen::ScalarType::f64;
    auto add = [&](std::string name, codegen::NodePtr tree, int inputs, FormulaKernel<T> run) {
      if (tree->mask) return;
      const std::size_t steps = computed_steps(tree);
      if (steps >= 2) out.push_back({std::move(name), std::move(tree), inputs, steps, run});
    };
    const std::string backward = "_backward";
    using codegen::Kind;
    const codegen::NodePtr affine = codegen::make_node(
        Kind::add, {codegen::make_node(Kind::mul, {codegen::make_input(0), codegen::make_input(1)}), codegen::make_input(2)});
    add("mul_add", affine, 3, mul_add<T>);
    // Chains of two of add, sub and mul (mul_add above is one of them). A division is left
    // out: a row program divides by a uniform divisor through its reciprocal, which a chain
    // would not.
    if constexpr (kChainFormulas) {
      const auto chains = [&]<Kind inner>() {
        const auto both = [&]<Kind outer>() {
          const codegen::NodePtr x = codegen::make_node(inner, {codegen::make_input(0), codegen::make_input(1)});
          const std::string name = std::string(codegen::kind_name(inner)) + "_" + std::string(codegen::kind_name(outer));
          if (!(inner == Kind::mul && outer == Kind::add))
            add(name, codegen::make_node(outer, {x, codegen::make_input(2)}), 3, binary_chain<inner, outer, true, T>);
          add(name + "_right", codegen::make_node(outer, {codegen::make_input(2), x}), 3, binary_chain<inner, outer, false, T>);
        };
        both.template operator()<Kind::add>();
        both.template operator()<Kind::sub>();
        both.template operator()<Kind::mul>();
      };
      chains.template operator()<Kind::add>();
      chains.template operator()<Kind::sub>();
      chains.template operator()<Kind::mul>();
      add("sub_exp",
          codegen::make_node(Kind::exp, {codegen::make_node(Kind::sub, {codegen::make_input(0), codegen::make_input(1)})}),
          2, exp_sub<T>);
    }
    // A unary formula over in0 * in1 + in2.
    const auto of_affine = [&](const codegen::NodePtr& tree) {
      return codegen::rewrite(tree, [&](const codegen::NodePtr& n, auto&&) -> codegen::NodePtr {
        return n->kind == Kind::input ? affine : nullptr;
      });
    };
#define KILN_CPU_UNARY_FORMULA(Op)                                                                           \
  if constexpr (ops::Op::domain != ops::Domain::boolean && !ops::is_predicate<ops::Op>) {                     \
    add(std::string(ops::Op::name), codegen::trace_unary<ops::Op>(t), 1, apply_unary<ops::Op, T>);            \
    add("mul_add_" + std::string(ops::Op::name), of_affine(codegen::trace_unary<ops::Op>(t)), 3,              \
        apply_unary_affine<ops::Op, T>);                                                                      \
    if constexpr (ops::DifferentiableUnary<ops::Op> && kGradientFormulas)                                     \
      add(std::string(ops::Op::name) + backward, codegen::trace_unary_grad<ops::Op>(t), 3,                    \
          unary_grad<ops::Op, T>);                                                                            \
  }
#define KILN_CPU_BINARY_FORMULA(Op)                                                                          \
  if constexpr (ops::Op::domain != ops::Domain::boolean && !ops::is_predicate<ops::Op>) {                     \
    add(std::string(ops::Op::name), codegen::trace_binary<ops::Op>(t), 2, apply_binary<ops::Op, T>);          \
    if constexpr (ops::DifferentiableBinary<ops::Op> && kGradientFormulas) {                                  \
      add(std::string(ops::Op::name) + backward + "_lhs", codegen::trace_binary_grad<ops::Op, ops::Operand::lhs>(t), 4, \
          binary_grad<ops::Op, ops::Operand::lhs, T>);                                                        \
      add(std::string(ops::Op::name) + backward + "_rhs", codegen::trace_binary_grad<ops::Op, ops::Operand::rhs>(t), 4, \
          binary_grad<ops::Op, ops::Operand::rhs, T>);                                                        \
    }                                                                                                         \
  }
    KILN_UNARY_OPS(KILN_CPU_UNARY_FORMULA)
    KILN_BINARY_OPS(KILN_CPU_BINARY_FORMULA)
#undef KILN_CPU_UNARY_FORMULA
#undef KILN_CPU_BINARY_FORMULA
    // Larger formulas first: where two match at one step, the one that spans more wins.
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.steps > b.steps; });
    return out;
  }();
  return table;
}

// Whether the tree `pattern` computes code step `s`, its inputs bound to steps in `bind`
// (-1: not bound yet; an input used twice must bind the same step twice).
// The steps the pattern computes itself (not its inputs) are added to `inside`.
inline bool matches(const codegen::Node& pattern, std::uint32_t s, std::span<const Instruction> code,
                    std::array<std::int64_t, 4>& bind, std::vector<std::uint32_t>& inside) {
  const Instruction& step = code[s];
  if (pattern.kind == Kind::input) {
    if (step.mask != pattern.mask) return false;
    std::int64_t& b = bind[static_cast<std::size_t>(pattern.index)];
    if (b < 0) b = s;
    return b == s;
  }
  if (pattern.kind != step.kind || pattern.mask != step.mask) return false;
  if (pattern.kind == Kind::constant) return std::bit_cast<std::uint64_t>(pattern.value) == std::bit_cast<std::uint64_t>(step.value);
  if (pattern.kind == Kind::param) return false;
  inside.push_back(s);
  for (std::size_t i = 0; i < pattern.args.size(); ++i)
    if (!matches(*pattern.args[i], step.args[i], code, bind, inside)) return false;
  return true;
}

// The largest formula computing each step of `code`, if any (formula == nullptr: none). A
// formula does not take in a step that a formula at least as large computes: `gelu(y) +
// z` is gelu's formula and an add, not a mul_add that would split gelu's.
template <class T> std::vector<PlannedStep<T>> match_formulas(std::span<const Instruction> code) {
  std::vector<PlannedStep<T>> best(code.size());
  for (std::uint32_t s = 0; s < code.size(); ++s) best[s].step = s;
  if constexpr (simd<T>) {
    std::vector<std::uint32_t> inside;
    for (std::uint32_t s = 0; s < code.size(); ++s) {  // arguments before the steps that read them
      if (code[s].mask || codegen::kind_info(code[s].kind).operands == codegen::Operands::none) continue;
      for (const Formula<T>& f : formulas<T>()) {
        if (f.tree->kind != code[s].kind) continue;
        std::array<std::int64_t, 4> bind{-1, -1, -1, -1};
        inside.clear();
        if (!matches(*f.tree, s, code, bind, inside)) continue;
        if (std::any_of(inside.begin(), inside.end(), [&](std::uint32_t t) {
              return t != s && best[t].formula != nullptr && best[t].formula->steps >= f.steps;
            }))
          continue;
        best[s].formula = &f;
        // An input the formula does not read (Exp's gradient ignores x) reads its own result.
        for (std::size_t k = 0; k < bind.size(); ++k) best[s].bind[k] = bind[k] < 0 ? s : static_cast<std::uint32_t>(bind[k]);
        break;
      }
    }
  }
  return best;
}

// Marks the steps that step s needs (itself, and through its formula's inputs where it has
// one, else its arguments) in `needed`.
template <class T>
void mark_needed(std::uint32_t s, std::span<const Instruction> code, std::span<const PlannedStep<T>> best,
                 std::vector<bool>& needed) {
  if (needed[s]) return;
  needed[s] = true;
  if (best[s].formula != nullptr) {
    for (int k = 0; k < best[s].formula->inputs; ++k)
      if (best[s].bind[static_cast<std::size_t>(k)] != s) mark_needed<T>(best[s].bind[static_cast<std::size_t>(k)], code, best, needed);
  } else {
    for (int k = 0; k < codegen::kind_arity(code[s].kind); ++k) mark_needed<T>(code[s].args[static_cast<std::size_t>(k)], code, best, needed);
  }
}


// Executes `steps` on one chunk: the n elements of the run from element `done` (L registers
// per step; inputs[k] at element stride strides[k]). Each step's result is left in its
// registers (or where registers.direct says) and its operand set to read it.
template <class T>
void execute(std::span<const PlannedStep<T>> steps, std::span<const Instruction> code, Registers<T>& registers,
             std::size_t L, const std::byte* const* inputs, const std::int64_t* strides, std::int64_t done,
             std::int64_t n) {
  constexpr std::int64_t W = width<T>();
  Value<T>* values = registers.values.get();
  Flag<T>* flags = registers.flags.get();
  Operand<T>* operands = registers.operands.data();
  const auto lanes = static_cast<std::size_t>((n + W - 1) / W);
  auto lane_count = [&](std::size_t j) { return std::min<std::int64_t>(W, n - static_cast<std::int64_t>(j) * W); };
  for (const PlannedStep<T>& planned : steps) {
    const std::uint32_t s = planned.step;
    const Instruction& step = code[s];
    Value<T>* v = values + s * L;
    if constexpr (simd<T>) {
      if (!step.mask && step.kind != Kind::input) {
        if (registers.direct[s] != nullptr) v = registers.direct[s];
        operands[s] = {elements<T>(v), W};
      }
    }
    if (planned.formula != nullptr) {
      if constexpr (simd<T>) {
        std::array<Operand<T>, 4> in;
        for (int k = 0; k < planned.formula->inputs; ++k) in[k] = operands[planned.bind[k]];
        planned.formula->run(in.data(), v, lanes);
      }
      continue;
    }
    Flag<T>* f = flags + s * L;
    const Operand<T> a = operands[step.args[0]];
    const Operand<T> b = operands[step.args[1]];
    if constexpr (simd<T>) {
      if (planned.reciprocal) {
        const Value<T> r = broadcast<T>(T(1)) / read(b, 0);
        for (std::size_t j = 0; j < lanes; ++j) v[j] = read(a, j) * r;
        continue;
      }
    }
    const Flag<T>* fa = flags + step.args[0] * L;
    const Flag<T>* fb = flags + step.args[1] * L;
    const Flag<T>* fc = flags + step.args[2] * L;
    switch (codegen::kind_info(step.kind).operands) {
      case codegen::Operands::none: {  // an input read where it does not lie as registers
        const auto k = static_cast<std::size_t>(step.index);
        const std::int64_t stride = strides[k];
        if (step.mask) {
          const auto* p = reinterpret_cast<const std::uint8_t*>(inputs[k]);
          for (std::size_t j = 0; j < lanes; ++j)
            f[j] = load_flag<T>(p, stride, done + static_cast<std::int64_t>(j) * W, lane_count(j));
        } else if (stride == 0) {
          break;  // its broadcast register, set for the run
        } else if (stride == 1 && n % W == 0) {  // whole registers: read where it lies
          operands[s] = {reinterpret_cast<const T*>(inputs[k]) + done, W};
        } else {
          const T* p = reinterpret_cast<const T*>(inputs[k]);
          for (std::size_t j = 0; j < lanes; ++j)
            v[j] = load<T>(p, stride, done + static_cast<std::int64_t>(j) * W, lane_count(j));
          operands[s] = {elements<T>(v), W};
        }
        break;
      }
      case codegen::Operands::numbers:
        if (codegen::kind_info(step.kind).result == codegen::Result::mask) {
          const Operand<T> rhs = codegen::kind_arity(step.kind) == 1 ? a : b;
          for (std::size_t j = 0; j < lanes; ++j) f[j] = compare<T>(step.kind, read(a, j), read(rhs, j));
        } else {
          // One switch per step, not per register: the loop below is the kind's own.
          switch (step.kind) {
#define KILN_CPU_PROGRAM_UNARY(kind)                                             \
case Kind::kind:                                                               \
  for (std::size_t j = 0; j < lanes; ++j) {                                    \
    const Value<T> x = read(a, j);                                             \
    v[j] = number<T>(Kind::kind, x, x);                                        \
  }                                                                            \
  break;
#define KILN_CPU_PROGRAM_BINARY(kind)                                                    \
case Kind::kind:                                                                       \
  for (std::size_t j = 0; j < lanes; ++j) v[j] = number<T>(Kind::kind, read(a, j), read(b, j)); \
  break;
            KILN_CPU_PROGRAM_UNARY(neg)
            KILN_CPU_PROGRAM_UNARY(exp)
            KILN_CPU_PROGRAM_UNARY(log)
            KILN_CPU_PROGRAM_UNARY(log1p)
            KILN_CPU_PROGRAM_UNARY(expm1)
            KILN_CPU_PROGRAM_UNARY(sqrt)
            KILN_CPU_PROGRAM_UNARY(abs)
            KILN_CPU_PROGRAM_UNARY(sin)
            KILN_CPU_PROGRAM_UNARY(cos)
            KILN_CPU_PROGRAM_UNARY(tan)
            KILN_CPU_PROGRAM_UNARY(tanh)
            KILN_CPU_PROGRAM_UNARY(erf)
            KILN_CPU_PROGRAM_UNARY(floor)
            KILN_CPU_PROGRAM_UNARY(ceil)
            KILN_CPU_PROGRAM_UNARY(round_even)
            KILN_CPU_PROGRAM_BINARY(add)
            KILN_CPU_PROGRAM_BINARY(sub)
            KILN_CPU_PROGRAM_BINARY(mul)
            KILN_CPU_PROGRAM_BINARY(div)
            KILN_CPU_PROGRAM_BINARY(max)
            KILN_CPU_PROGRAM_BINARY(min)
            KILN_CPU_PROGRAM_BINARY(pow)
            KILN_CPU_PROGRAM_BINARY(atan2)
            KILN_CPU_PROGRAM_BINARY(int_div)
            KILN_CPU_PROGRAM_BINARY(int_rem)
            KILN_CPU_PROGRAM_BINARY(int_pow)
#undef KILN_CPU_PROGRAM_UNARY
#undef KILN_CPU_PROGRAM_BINARY
            default: KILN_FAIL("cpu elementwise: {} is not a numeric step", codegen::kind_name(step.kind));
          }
        }
        break;
      case codegen::Operands::masks:
        for (std::size_t j = 0; j < lanes; ++j) f[j] = logic<T>(step.kind, fa[j], fb[j]);
        break;
      case codegen::Operands::select:
        if (step.mask) {
          for (std::size_t j = 0; j < lanes; ++j) f[j] = select_flags<T>(fa[j], fb[j], fc[j]);
        } else {
          const Operand<T> c = operands[step.args[2]];
          for (std::size_t j = 0; j < lanes; ++j) {
            if constexpr (simd<T>) v[j] = fa[j].select(read(b, j), read(c, j));
            else v[j] = fa[j] ? read(b, j) : read(c, j);
          }
        }
        break;
    }
  }
}

// Writes step s's n elements of a chunk to `base` (an output's memory), unless the step
// computed them there (registers.direct), which it then forgets.
template <class T>
void store_output(Registers<T>& registers, bool mask, std::size_t s, std::size_t L, std::byte* base, std::int64_t n,
                  bool stream) {
  constexpr std::int64_t W = width<T>();
  if (registers.direct[s] != nullptr && reinterpret_cast<std::byte*>(registers.direct[s]) == base) {
    registers.direct[s] = nullptr;  // written in place
    return;
  }
  const auto lanes = static_cast<std::size_t>((n + W - 1) / W);
  auto lane_count = [&](std::size_t j) { return std::min<std::int64_t>(W, n - static_cast<std::int64_t>(j) * W); };
  if (mask) {
    bool* p = reinterpret_cast<bool*>(base);
    for (std::size_t j = 0; j < lanes; ++j) store_flag<T>(registers.flags[s * L + j], p + j * W, lane_count(j));
  } else {
    T* p = reinterpret_cast<T*>(base);
    for (std::size_t j = 0; j < lanes; ++j) store<T>(read(registers.operands[s], j), p + j * W, lane_count(j), stream);
  }
}

template <class T> T first_lane(const Value<T>& v) {
  alignas(64) T lanes[width<T>()];
  v.store(lanes);
  return lanes[0];
}

// Per step of the program's code: the register of its value where it is a constant or a
// parameter (in T).
template <class T>
std::unique_ptr<Value<T>[]> uniform_registers(const Program& program, std::span<const double> params) {
  const std::span<const Instruction> code = program.code();
  auto uniforms = std::make_unique<Value<T>[]>(code.size());
  for (std::size_t s = 0; s < code.size(); ++s) {
    const Instruction& step = code[s];
    T value{};
    if (step.kind == Kind::param) {
      const double p = params[static_cast<std::size_t>(step.index)];
      if constexpr (std::is_same_v<T, bool>) value = p != 0.0;
      else value = fn::constant(T(0), p);
    } else if (step.kind == Kind::constant) {
      if constexpr (!std::is_same_v<T, bool>) value = fn::constant(T(0), step.value);
    } else {
      continue;
    }
    uniforms[s] = broadcast<T>(value);
  }
  return uniforms;
}

// A row program's plan, as Cpu::program_steps describes it (row_program.cpp).
std::vector<std::string> row_program_steps(const Program& program);

// Compiled once, in program.cpp: the formula table (one per process) and the step loop.
extern template const std::vector<Formula<float>>& formulas<float>();
extern template void execute<float>(std::span<const PlannedStep<float>> steps, std::span<const Instruction> code, Registers<float>& registers,
                       std::size_t L, const std::byte* const* inputs, const std::int64_t* strides, std::int64_t done,
                       std::int64_t n);
extern template const std::vector<Formula<double>>& formulas<double>();
extern template void execute<double>(std::span<const PlannedStep<double>> steps, std::span<const Instruction> code, Registers<double>& registers,
                       std::size_t L, const std::byte* const* inputs, const std::int64_t* strides, std::int64_t done,
                       std::int64_t n);

}  // namespace kiln::cpu::program_eval
