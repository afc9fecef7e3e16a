// Cpu::elementwise: runs any elementwise program (kiln/codegen/program.hpp) with no compiler
// at run time. The program's code is evaluated one instruction at a time over chunks of
// kChunk elements, each instruction a tight loop over SIMD registers (the Simd<T> of
// elementwise_kernels.hpp, so every function has the same vectorized math as the per-op
// kernels); the chunk's registers stay in L1, so a multi-op program reads its inputs and
// writes its outputs once (with streaming stores when they are larger than the last-level
// cache, as the per-op kernels write theirs). Integer and bool programs run the same loops on plain values.
// The catalogue's single ops keep their compile-time kernels (Cpu::unary<Op>...).
#include "elementwise_kernels.hpp"

#include "kiln/codegen/program.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::cpu {
namespace {

using codegen::Instruction;
using codegen::Kind;
using codegen::Program;

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

struct Outputs {
  const std::byte* first = nullptr;  // output 0's base, to find the run's element offset
  std::vector<std::byte*> base;
  std::vector<std::int64_t> element_size;
};

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

// How a program runs on the CPU, made once per program (cached by its id): the steps to
// execute, in order. Subtrees that are catalogue formulas (gelu, sigmoid, a gradient...) run
// as one compiled step each, whose intermediates stay in registers; steps that no output
// needs, and the steps inside a formula that nothing else reads, are not executed.
template <class T> struct Plan {
  std::vector<PlannedStep<T>> steps;
};

template <class T> struct Context {
  const Program* program;
  Outputs outputs;
  // Per step of the code: its uniform value (a constant or a parameter in T, as a full
  // register).
  std::unique_ptr<Value<T>[]> uniforms;  // (not a vector: Value<bool> is bool)
  const Plan<T>* plan = nullptr;
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
  std::size_t size = 0;
  void reserve(std::size_t steps, std::size_t lanes) {
    operands.resize(steps);
    direct.assign(steps, nullptr);
    if (size >= steps * lanes) return;
    size = steps * lanes;
    values = std::make_unique<Value<T>[]>(size);
    flags = std::make_unique<Flag<T>[]>(size);
    broadcasts = std::make_unique<Value<T>[]>(steps);
  }
};

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
#define KILN_CPU_UNARY_FORMULA(Op)                                                                           \
  if constexpr (ops::Op::domain != ops::Domain::boolean && !ops::is_predicate<ops::Op>) {                     \
    add(std::string(ops::Op::name), codegen::trace_unary<ops::Op>(t), 1, apply_unary<ops::Op, T>);            \
    if constexpr (ops::DifferentiableUnary<ops::Op>)                                                          \
      add(std::string(ops::Op::name) + backward, codegen::trace_unary_grad<ops::Op>(t), 3,                    \
          unary_grad<ops::Op, T>);                                                                            \
  }
#define KILN_CPU_BINARY_FORMULA(Op)                                                                          \
  if constexpr (ops::Op::domain != ops::Domain::boolean && !ops::is_predicate<ops::Op>) {                     \
    add(std::string(ops::Op::name), codegen::trace_binary<ops::Op>(t), 2, apply_binary<ops::Op, T>);          \
    if constexpr (ops::DifferentiableBinary<ops::Op>) {                                                       \
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
inline bool matches(const codegen::Node& pattern, std::uint32_t s, std::span<const Instruction> code,
                    std::array<std::int64_t, 4>& bind) {
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
  for (std::size_t i = 0; i < pattern.args.size(); ++i)
    if (!matches(*pattern.args[i], step.args[i], code, bind)) return false;
  return true;
}

// The largest formula computing each step of `code`, if any (formula == nullptr: none).
template <class T> std::vector<PlannedStep<T>> match_formulas(std::span<const Instruction> code) {
  std::vector<PlannedStep<T>> best(code.size());
  for (std::uint32_t s = 0; s < code.size(); ++s) best[s].step = s;
  if constexpr (simd<T>) {
    for (std::uint32_t s = 0; s < code.size(); ++s) {
      if (code[s].mask || codegen::kind_info(code[s].kind).operands == codegen::Operands::none) continue;
      for (const Formula<T>& f : formulas<T>()) {
        if (f.tree->kind != code[s].kind) continue;
        std::array<std::int64_t, 4> bind{-1, -1, -1, -1};
        if (!matches(*f.tree, s, code, bind)) continue;
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

template <class T> Plan<T> make_plan(const Program& program) {
  const std::span<const Instruction> code = program.code();
  std::vector<PlannedStep<T>> best = match_formulas<T>(code);
  // The steps the outputs need, through formulas where they match.
  std::vector<bool> needed(code.size(), false);
  for (const std::uint32_t s : program.output_slots()) mark_needed<T>(s, code, best, needed);
  Plan<T> plan;
  for (std::uint32_t s = 0; s < code.size(); ++s) {
    if (!needed[s] || code[s].kind == Kind::constant || code[s].kind == Kind::param) continue;
    best[s].step = s;
    plan.steps.push_back(best[s]);
  }
  return plan;
}

// The plan of a program, made on its first run and kept for the process.
template <class T> const Plan<T>& plan_of(const Program& program) {
  static std::mutex mutex;
  static std::unordered_map<std::uint64_t, std::unique_ptr<const Plan<T>>> plans;
  const std::lock_guard lock(mutex);
  auto& plan = plans[program.id()];
  if (!plan) plan = std::make_unique<const Plan<T>>(make_plan<T>(program));
  return *plan;
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

// Runs the program over `count` elements: inputs[k] at element stride strides[k], outputs
// contiguous from the element of output 0 that `out` points at.
template <class T>
void run_program(const void* context, const std::byte* const* inputs, const std::int64_t* strides, std::byte* out,
                 std::int64_t count, bool stream) {
  const auto& ctx = *static_cast<const Context<T>*>(context);
  const Program& program = *ctx.program;
  const std::span<const Instruction> code = program.code();
  const std::span<const std::uint32_t> slots = program.output_slots();
  constexpr std::int64_t W = width<T>();
  constexpr auto L = static_cast<std::size_t>((kChunk + W - 1) / W);  // registers per step
  static thread_local Registers<T> registers;
  registers.reserve(code.size(), L);
  Value<T>* values = registers.values.get();
  Operand<T>* operands = registers.operands.data();
  const std::int64_t first = (out - ctx.outputs.first) / ctx.outputs.element_size[0];
  // Inputs are prefetched only when the data is larger than the last-level cache (as the
  // caller says by asking for streaming stores): in cache, the prefetches only cost issue slots.
  const bool prefetch = stream;
  // Streaming stores need every full register of every output aligned: they are when the
  // outputs' runs start on a register boundary (the threads split the work at 64 bytes).
  if constexpr (simd<T>) {
    constexpr auto align = static_cast<std::int64_t>(sizeof(typename Simd<T>::Packet));
    for (std::size_t k = 0; k < slots.size() && stream; ++k)
      stream = !code[slots[k]].mask &&
               reinterpret_cast<std::uintptr_t>(ctx.outputs.base[k] + first * ctx.outputs.element_size[k]) % align == 0;
  } else {
    stream = false;
  }
  const std::span<const DType> input_dtypes = program.inputs();
  // Operands that stay put for the whole run: computed steps read their own registers,
  // constants and parameters their uniform register, inputs at stride 0 a register
  // broadcast from their one element.
  for (std::size_t s = 0; s < code.size(); ++s) {
    const Instruction& step = code[s];
    if (step.mask) continue;
    if (step.kind == Kind::constant || step.kind == Kind::param) {
      operands[s] = {elements<T>(&ctx.uniforms[s]), 0};
    } else if (step.kind == Kind::input && strides[step.index] == 0) {
      registers.broadcasts[s] = broadcast<T>(*reinterpret_cast<const T*>(inputs[step.index]));
      operands[s] = {elements<T>(&registers.broadcasts[s]), 0};
    } else {
      operands[s] = {elements<T>(values + s * L), W};
    }
  }

  for (std::int64_t done = 0; done < count; done += kChunk) {
    const std::int64_t n = std::min(kChunk, count - done);
    // A chunk kPrefetch ahead of each contiguous input is fetched while this one computes:
    // the compute of a long program between two chunks' loads would otherwise leave the
    // memory idle, and the loads waiting on it.
    if (prefetch && done + kPrefetch * kChunk < count) {
      for (std::size_t k = 0; k < input_dtypes.size(); ++k) {
        if (strides[k] != 1) continue;
        const auto size = static_cast<std::int64_t>(dtype_size(input_dtypes[k]));
        const std::byte* p = inputs[k] + (done + kPrefetch * kChunk) * size;
        for (std::int64_t b = 0; b < kChunk * size; b += 64) __builtin_prefetch(p + b);
      }
    }
    // A full chunk of an output that a step computes is written by that step straight into
    // the output's memory where it is aligned as a register is (not when streaming: those
    // stores are the copy below), instead of into its registers and then copied.
    if constexpr (simd<T>) {
      if (!stream && n == kChunk) {
        for (std::size_t k = 0; k < slots.size(); ++k) {
          const std::uint32_t s = slots[k];
          const Kind kind = code[s].kind;
          if (code[s].mask || kind == Kind::input || kind == Kind::constant || kind == Kind::param ||
              registers.direct[s] != nullptr)
            continue;
          std::byte* base = ctx.outputs.base[k] + (first + done) * ctx.outputs.element_size[k];
          if (reinterpret_cast<std::uintptr_t>(base) % alignof(Value<T>) == 0)
            registers.direct[s] = reinterpret_cast<Value<T>*>(base);
        }
      }
    }
    execute<T>(ctx.plan->steps, code, registers, L, inputs, strides, done, n);
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const std::size_t s = slots[k];
      std::byte* base = ctx.outputs.base[k] + (first + done) * ctx.outputs.element_size[k];
      store_output<T>(registers, code[s].mask, s, L, base, n, stream);
    }
  }
  if (stream) stream_fence();
}

template <class T> T first_lane(const Value<T>& v) {
  alignas(64) T lanes[width<T>()];
  v.store(lanes);
  return lanes[0];
}

// ---------------------------------------------------------------- row programs
// A row program (Program::reduces_rows) runs row by row over its domain [..., n]: each row
// in passes over its chunks, pass p accumulating the reductions whose arguments are known
// in it (a reduction's level is one more than its argument's), the last pass writing the
// outputs. A step that does not vary along the row (a reduction, a parameter, an input at
// stride 0 along the row, and anything computed from those alone) is uniform: it is
// computed once per row, at the start of the first pass where its arguments are known, and
// read by the chunks as one register. A varying step that a later pass reads again is kept
// in a per-thread scratch row when first computed (softmax's exp(x - max) is computed once),
// so a row is read from memory once and re-read from L1 / L2.
// Elements per chunk of a row: twice the element evaluator's, since a row program's steps
// are fewer and each step's fixed cost is paid once per chunk.
constexpr std::int64_t kRowChunk = 512;

template <class T> struct RowPass {
  std::vector<std::uint32_t> finished;    // reductions known from this pass's start
  std::vector<PlannedStep<T>> uniform;    // uniform steps computed at this pass's start
  std::vector<PlannedStep<T>> varying;    // steps computed over the chunks
  std::vector<std::uint32_t> accumulate;  // reductions accumulated over the chunks
  std::vector<std::uint32_t> keep;        // varying steps kept for later passes
  std::vector<std::uint32_t> reread;      // varying steps read from the scratch row
  bool chunks = false;                    // whether the pass walks the row
};
template <class T> struct RowPlan {
  std::vector<RowPass<T>> passes;
  std::vector<bool> uniform;       // per step
  std::vector<int> slot;           // per step: its row of the scratch, or -1
  std::size_t slots = 0;
  std::vector<std::uint32_t> uniform_inputs;  // numeric input steps read once per row
};

// `uniform_inputs` has bit k set where input k does not vary along the rows.
template <class T> RowPlan<T> make_row_plan(const Program& program, std::uint64_t uniform_inputs) {
  const std::span<const Instruction> code = program.code();
  const std::vector<PlannedStep<T>> best = match_formulas<T>(code);
  RowPlan<T> plan;
  plan.uniform.assign(code.size(), false);
  plan.slot.assign(code.size(), -1);
  std::vector<int> level(code.size(), 0);
  for (std::uint32_t s = 0; s < code.size(); ++s) {
    const Instruction& step = code[s];
    bool uniform = true;
    int l = 0;
    for (int k = 0; k < codegen::kind_arity(step.kind); ++k) {
      uniform = uniform && plan.uniform[step.args[static_cast<std::size_t>(k)]];
      l = std::max(l, level[step.args[static_cast<std::size_t>(k)]]);
    }
    if (step.kind == Kind::input) uniform = ((uniform_inputs >> step.index) & 1u) != 0;
    if (codegen::is_row_reduction(step.kind)) {
      uniform = true;
      ++l;
    }
    plan.uniform[s] = uniform;
    level[s] = l;
  }
  std::vector<bool> needed(code.size(), false);
  const std::span<const std::uint32_t> slots = program.output_slots();
  int last = 0;
  for (std::size_t k = 0; k < slots.size(); ++k) {
    KILN_CHECK(!program.outputs()[k].per_row || plan.uniform[slots[k]],
               "row_program: output {} is stored per row but varies along the row ({})", k, program.key());
    mark_needed<T>(slots[k], code, best, needed);
    last = std::max(last, level[slots[k]]);
  }
  plan.passes.resize(static_cast<std::size_t>(last) + 1);
  // Uniform steps and finished reductions, by the pass where they become known.
  for (std::uint32_t s = 0; s < code.size(); ++s) {
    if (!needed[s] || !plan.uniform[s] || code[s].kind == Kind::constant || code[s].kind == Kind::param) continue;
    RowPass<T>& pass = plan.passes[static_cast<std::size_t>(level[s])];
    if (codegen::is_row_reduction(code[s].kind)) pass.finished.push_back(s);
    else if (code[s].kind == Kind::input && !code[s].mask) plan.uniform_inputs.push_back(s);
    else pass.uniform.push_back(best[s]);
  }
  // Varying steps, pass by pass: what each pass's reductions and (in the last) the outputs
  // read. A numeric step computed in an earlier pass is kept from there; inputs and masks
  // are computed again.
  std::vector<int> computed(code.size(), -1);
  for (std::size_t p = 0; p < plan.passes.size(); ++p) {
    RowPass<T>& pass = plan.passes[p];
    std::vector<std::uint32_t> roots;
    for (std::uint32_t s = 0; s < code.size(); ++s)
      if (needed[s] && codegen::is_row_reduction(code[s].kind) && static_cast<std::size_t>(level[s]) == p + 1 &&
          !plan.uniform[code[s].args[0]]) {
        pass.accumulate.push_back(s);
        roots.push_back(code[s].args[0]);
      }
    if (p + 1 == plan.passes.size())
      for (std::size_t k = 0; k < slots.size(); ++k)
        if (!program.outputs()[k].per_row) {
          pass.chunks = true;
          roots.push_back(slots[k]);
        }
    std::vector<std::uint32_t> varying;
    auto visit = [&](auto& self, std::uint32_t s) -> void {
      if (plan.uniform[s] || computed[s] == static_cast<int>(p)) return;
      const bool input = code[s].kind == Kind::input;
      if (computed[s] >= 0 && !input && !code[s].mask) {
        if (plan.slot[s] < 0) {
          plan.slot[s] = static_cast<int>(plan.slots++);
          plan.passes[static_cast<std::size_t>(computed[s])].keep.push_back(s);
        }
        if (std::find(pass.reread.begin(), pass.reread.end(), s) == pass.reread.end()) pass.reread.push_back(s);
        return;
      }
      computed[s] = static_cast<int>(p);
      if (best[s].formula != nullptr) {
        for (int k = 0; k < best[s].formula->inputs; ++k)
          if (best[s].bind[static_cast<std::size_t>(k)] != s) self(self, best[s].bind[static_cast<std::size_t>(k)]);
      } else {
        for (int k = 0; k < codegen::kind_arity(code[s].kind); ++k) self(self, code[s].args[static_cast<std::size_t>(k)]);
      }
      varying.push_back(s);
    };
    for (const std::uint32_t r : roots) visit(visit, r);
    std::sort(varying.begin(), varying.end());  // the code's order: arguments first
    for (const std::uint32_t s : varying) {
      pass.varying.push_back(best[s]);
      pass.varying.back().reciprocal = best[s].formula == nullptr && code[s].kind == Kind::div && plan.uniform[code[s].args[1]];
    }
    pass.chunks = pass.chunks || !roots.empty();
  }
  return plan;
}

template <class T> const RowPlan<T>& row_plan_of(const Program& program, std::uint64_t uniform_inputs) {
  static std::mutex mutex;
  static std::map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<const RowPlan<T>>> plans;
  const std::lock_guard lock(mutex);
  auto& plan = plans[{program.id(), uniform_inputs}];
  if (!plan) plan = std::make_unique<const RowPlan<T>>(make_row_plan<T>(program, uniform_inputs));
  return *plan;
}

// A reduction's running value over a row: a register of lane-wise partial sums (maxima,
// minima) and whether a NaN was seen, folded into `value` (in double, as the CPU's
// reductions sum f32) every kFold chunks and at the row's end. The partial tail of a row
// goes straight into `value`.
template <class T> struct RowAccumulator {
  static constexpr int kFold = 16;  // chunks per fold: 4096 elements' partial sums in T
  Value<T> lanes;
  SimdMask<T> nan;
  double value = 0;
  bool tail_nan = false;
  int chunks = 0;

  void reset(Kind kind) {
    value = kind == Kind::row_max ? -std::numeric_limits<double>::infinity()
            : kind == Kind::row_min ? std::numeric_limits<double>::infinity()
                                    : 0.0;
    lanes = broadcast<T>(static_cast<T>(value));
    nan = broadcast<T>(T(0)).isNaN();
    tail_nan = false;
    chunks = 0;
  }
  void fold(Kind kind) {
    alignas(64) T l[width<T>()];
    lanes.store(l);
    for (std::int64_t i = 0; i < width<T>(); ++i) value = combine(kind, value, static_cast<double>(l[i]));
    lanes = broadcast<T>(kind == Kind::row_sum ? T(0) : static_cast<T>(value));
    chunks = 0;
  }
  static double combine(Kind kind, double a, double b) {
    return kind == Kind::row_sum ? a + b : kind == Kind::row_max ? std::max(a, b) : std::min(a, b);
  }
  // The row's value: NaN where a NaN was reduced by max / min (a sum has it already).
  T finish(Kind kind) {
    fold(kind);
    alignas(64) T flags[width<T>()];
    Eigen::internal::pstore(flags, nan.v);
    bool seen = tail_nan;
    for (std::int64_t i = 0; i < width<T>(); ++i) seen = seen || std::isnan(flags[i]);  // set lanes read as NaN
    return seen && kind != Kind::row_sum ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(value);
  }
};

// Adds the n elements of a chunk (operand x) to acc: four independent chains of registers.
template <class T> KILN_INLINE void accumulate_chunk(Kind kind, const Operand<T>& x, std::int64_t n, RowAccumulator<T>& acc) {
  constexpr std::int64_t W = width<T>();
  const std::int64_t full = n / W;
  if (kind == Kind::row_sum) {
    Value<T> a0 = broadcast<T>(T(0)), a1 = a0, a2 = a0, a3 = a0;
    std::int64_t j = 0;
    for (; j + 4 <= full; j += 4) {
      a0 = a0 + read(x, static_cast<std::size_t>(j));
      a1 = a1 + read(x, static_cast<std::size_t>(j + 1));
      a2 = a2 + read(x, static_cast<std::size_t>(j + 2));
      a3 = a3 + read(x, static_cast<std::size_t>(j + 3));
    }
    for (; j < full; ++j) a0 = a0 + read(x, static_cast<std::size_t>(j));
    acc.lanes = acc.lanes + ((a0 + a1) + (a2 + a3));
  } else {
    const bool is_max = kind == Kind::row_max;
    auto pick = [is_max](const Value<T>& a, const Value<T>& b) { return is_max ? a.max(b) : a.min(b); };
    Value<T> b0 = acc.lanes, b1 = b0;
    SimdMask<T> n0 = acc.nan, n1 = n0;
    std::int64_t j = 0;
    for (; j + 2 <= full; j += 2) {
      const Value<T> v0 = read(x, static_cast<std::size_t>(j)), v1 = read(x, static_cast<std::size_t>(j + 1));
      b0 = pick(b0, v0);
      b1 = pick(b1, v1);
      n0 = n0 || v0.isNaN();
      n1 = n1 || v1.isNaN();
    }
    for (; j < full; ++j) {
      const Value<T> v = read(x, static_cast<std::size_t>(j));
      b0 = pick(b0, v);
      n0 = n0 || v.isNaN();
    }
    acc.lanes = pick(b0, b1);
    acc.nan = n0 || n1;
  }
  if (n > full * W) {
    alignas(64) T tail[W];
    read(x, static_cast<std::size_t>(full)).store(tail);
    for (std::int64_t l = 0; l < n - full * W; ++l) {
      acc.tail_nan = acc.tail_nan || std::isnan(tail[l]);
      acc.value = RowAccumulator<T>::combine(kind, acc.value, static_cast<double>(tail[l]));
    }
  }
  if (++acc.chunks == RowAccumulator<T>::kFold) acc.fold(kind);
}

template <class T> struct RowContext {
  const Program* program = nullptr;
  const RowPlan<T>* plan = nullptr;
  std::unique_ptr<Value<T>[]> uniforms;          // per step: a constant's or parameter's register
  std::vector<const std::byte*> inputs;          // per input: its first element
  std::vector<std::vector<std::int64_t>> strides;  // per input: its element strides over the domain
  std::vector<std::byte*> outputs;               // per output: its first element
  std::vector<std::int64_t> output_sizes;        // per output: its element size
  Shape domain;
};

template <class T> void run_rows(const RowContext<T>& ctx, std::int64_t begin, std::int64_t end) {
  const Program& program = *ctx.program;
  const RowPlan<T>& plan = *ctx.plan;
  const std::span<const Instruction> code = program.code();
  const std::span<const std::uint32_t> slots = program.output_slots();
  constexpr std::int64_t W = width<T>();
  constexpr auto L = static_cast<std::size_t>((kRowChunk + W - 1) / W);
  const std::size_t rank = ctx.domain.rank();
  const std::int64_t n = ctx.domain[rank - 1];
  const std::int64_t padded = (n + kRowChunk - 1) / kRowChunk * kRowChunk;
  static thread_local Registers<T> registers;
  static thread_local std::vector<Value<T>> scratch;
  registers.reserve(code.size(), L);
  if (scratch.size() < plan.slots * static_cast<std::size_t>(padded / W))
    scratch.resize(plan.slots * static_cast<std::size_t>(padded / W));
  Value<T>* values = registers.values.get();
  Flag<T>* flags = registers.flags.get();
  Operand<T>* operands = registers.operands.data();
  for (std::size_t s = 0; s < code.size(); ++s)
    if (code[s].kind == Kind::constant || code[s].kind == Kind::param) operands[s] = {elements<T>(&ctx.uniforms[s]), 0};
  const std::size_t inputs = ctx.inputs.size();
  std::vector<const std::byte*> row_inputs(inputs);
  std::vector<std::int64_t> row_strides(inputs);
  // A row of one element reads every input as uniform (at stride 0).
  for (std::size_t k = 0; k < inputs; ++k) row_strides[k] = n == 1 ? 0 : ctx.strides[k][rank - 1];
  std::vector<RowAccumulator<T>> acc(code.size());
  for (std::int64_t row = begin; row < end; ++row) {
    // Each input's first element of this row.
    for (std::size_t k = 0; k < inputs; ++k) {
      std::int64_t offset = 0, rest = row;
      for (std::size_t d = rank - 1; d-- > 0;) {
        offset += (rest % ctx.domain[d]) * ctx.strides[k][d];
        rest /= ctx.domain[d];
      }
      row_inputs[k] = ctx.inputs[k] + offset * static_cast<std::int64_t>(dtype_size(program.inputs()[k]));
    }
    for (const std::uint32_t s : plan.uniform_inputs) {
      registers.broadcasts[s] = broadcast<T>(*reinterpret_cast<const T*>(row_inputs[static_cast<std::size_t>(code[s].index)]));
      operands[s] = {elements<T>(&registers.broadcasts[s]), 0};
    }
    for (std::size_t p = 0; p < plan.passes.size(); ++p) {
      const RowPass<T>& pass = plan.passes[p];
      for (const std::uint32_t r : pass.finished) {
        const std::uint32_t a = code[r].args[0];
        T value;
        if (plan.uniform[a]) {  // a reduction of a value the row does not vary in
          value = first_lane<T>(read(operands[a], 0));
          if (code[r].kind == Kind::row_sum) value = static_cast<T>(value * static_cast<T>(n));
        } else {
          value = acc[r].finish(code[r].kind);
        }
        values[r * L] = broadcast<T>(value);
        operands[r] = {elements<T>(values + r * L), 0};
      }
      execute<T>(pass.uniform, code, registers, L, row_inputs.data(), row_strides.data(), 0, W);
      for (const PlannedStep<T>& u : pass.uniform) {
        const std::uint32_t s = u.step;
        if (code[s].mask) std::fill(flags + s * L + 1, flags + (s + 1) * L, flags[s * L]);
        else operands[s].step = 0;
      }
      if (!pass.chunks) continue;
      for (const std::uint32_t r : pass.accumulate) acc[r].reset(code[r].kind);
      const bool last = p + 1 == plan.passes.size();
      for (std::int64_t done = 0; done < n; done += kRowChunk) {
        const std::int64_t count = std::min(kRowChunk, n - done);
        Value<T>* row_scratch = scratch.data() + done / W;
        for (const std::uint32_t s : pass.reread)
          operands[s] = {elements<T>(row_scratch + static_cast<std::size_t>(plan.slot[s]) * static_cast<std::size_t>(padded / W)), W};
        // A step kept for later passes computes straight into its scratch row.
        for (const std::uint32_t s : pass.keep)
          registers.direct[s] = row_scratch + static_cast<std::size_t>(plan.slot[s]) * static_cast<std::size_t>(padded / W);
        // ... and an output a step of this pass computes over a full chunk, straight into the
        // output where it is aligned as a register is.
        if (last && count == kRowChunk) {
          for (std::size_t k = 0; k < slots.size(); ++k) {
            const std::uint32_t s = slots[k];
            if (program.outputs()[k].per_row || code[s].mask || code[s].kind == Kind::input || plan.uniform[s] ||
                plan.slot[s] >= 0 || registers.direct[s] != nullptr)
              continue;
            std::byte* base = ctx.outputs[k] + (row * n + done) * ctx.output_sizes[k];
            if (reinterpret_cast<std::uintptr_t>(base) % alignof(Value<T>) == 0)
              registers.direct[s] = reinterpret_cast<Value<T>*>(base);
          }
        }
        execute<T>(pass.varying, code, registers, L, row_inputs.data(), row_strides.data(), done, count);
        for (const std::uint32_t s : pass.keep) registers.direct[s] = nullptr;
        for (const std::uint32_t r : pass.accumulate) accumulate_chunk<T>(code[r].kind, operands[code[r].args[0]], count, acc[r]);
        if (!last) continue;
        for (std::size_t k = 0; k < slots.size(); ++k) {
          if (program.outputs()[k].per_row) continue;
          const std::uint32_t s = slots[k];
          std::byte* base = ctx.outputs[k] + (row * n + done) * ctx.output_sizes[k];
          store_output<T>(registers, code[s].mask, s, L, base, count, false);
        }
      }
    }
    for (std::size_t k = 0; k < slots.size(); ++k) {
      if (!program.outputs()[k].per_row) continue;
      const std::uint32_t s = slots[k];
      std::byte* base = ctx.outputs[k] + row * ctx.output_sizes[k];
      if (code[s].mask) store_flag<T>(flags[s * L], reinterpret_cast<bool*>(base), 1);
      else store<T>(read(operands[s], 0), reinterpret_cast<T*>(base), 1, false);
    }
  }
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

template <class F> void dispatch_program_type(codegen::ScalarType t, F&& fn) {
  switch (t) {
    case codegen::ScalarType::f32: return fn.template operator()<float>();
    case codegen::ScalarType::f64: return fn.template operator()<double>();
    case codegen::ScalarType::i32: return fn.template operator()<std::int32_t>();
    case codegen::ScalarType::i64: return fn.template operator()<std::int64_t>();
    case codegen::ScalarType::u8: return fn.template operator()<std::uint8_t>();
    case codegen::ScalarType::boolean: return fn.template operator()<bool>();
  }
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

std::vector<Cpu::Primitive> Cpu::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                             std::span<const double> params) {
  const Shape shape = codegen::check_elementwise_call<Cpu>(program, inputs, params);
  KILN_CHECK(inputs.size() <= cpu::kMaxElementwiseInputs, "elementwise: the CPU runs programs of up to {} inputs, got {}",
             cpu::kMaxElementwiseInputs, inputs.size());
  // f16 and bf16 compute in f32: their inputs are widened first and outputs rounded last.
  std::vector<Primitive> operands(inputs.begin(), inputs.end());
  for (Primitive& operand : operands)
    if (cpu::is_half(operand.dtype)) operand = cast(operand, DType::f32);
  const std::span<const codegen::ProgramOutput> declared_outputs = program.outputs();
  std::vector<Primitive> outputs;
  outputs.reserve(declared_outputs.size());
  for (const codegen::ProgramOutput& out : declared_outputs)
    outputs.push_back(cpu::empty(shape, cpu::is_half(out.dtype) ? DType::f32 : out.dtype));

  std::array<const cpu::CpuTensor*, cpu::kMaxElementwiseInputs> pointers{};
  for (std::size_t k = 0; k < operands.size(); ++k) pointers[k] = &operands[k];
  cpu::dispatch_program_type(program.type(), [&]<class T>() {
    cpu::Context<T> context{&program, {}, cpu::uniform_registers<T>(program, params), {}};
    context.plan = &cpu::plan_of<T>(program);
    context.outputs.first = outputs[0].bytes();
    for (const Primitive& out : outputs) {
      context.outputs.base.push_back(out.bytes());
      context.outputs.element_size.push_back(static_cast<std::int64_t>(dtype_size(out.dtype)));
    }
    cpu::run_elementwise(std::span(pointers.data(), operands.size()), outputs[0], cpu::run_program<T>, &context);
  });
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (cpu::is_half(declared_outputs[k].dtype)) outputs[k] = cast(outputs[k], declared_outputs[k].dtype);
  return outputs;
}

std::vector<Cpu::Primitive> Cpu::row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                             std::span<const double> params, const Shape& domain) {
  codegen::check_row_program_call<Cpu>(program, inputs, params, domain);
  KILN_CHECK(codegen::is_float(program.type()), "row_program: the CPU runs row programs in f32 and f64, got {} ({})",
             codegen::scalar_type_name(program.type()), program.key());
  KILN_CHECK(inputs.size() <= 64, "row_program: the CPU runs row programs of up to 64 inputs, got {}", inputs.size());
  std::vector<Primitive> operands(inputs.begin(), inputs.end());
  for (Primitive& operand : operands)
    if (cpu::is_half(operand.dtype)) operand = cast(operand, DType::f32);
  const std::size_t rank = domain.rank();
  const std::int64_t n = domain[rank - 1];
  const std::span<const codegen::ProgramOutput> declared_outputs = program.outputs();
  std::vector<Primitive> outputs;
  for (const codegen::ProgramOutput& out : declared_outputs)
    outputs.push_back(cpu::empty(out.per_row ? ops::keep_dim(domain, rank - 1) : domain,
                                 cpu::is_half(out.dtype) ? DType::f32 : out.dtype));
  auto run = [&]<class T>() {
    cpu::RowContext<T> context;
    context.program = &program;
    context.uniforms = cpu::uniform_registers<T>(program, params);
    context.domain = domain;
    std::uint64_t uniform_inputs = 0;
    for (std::size_t k = 0; k < operands.size(); ++k) {
      const cpu::CpuTensor view = cpu::broadcast_view(operands[k], domain);
      context.inputs.push_back(view.bytes());
      context.strides.push_back(view.strides);
      if (n == 1 || view.strides[rank - 1] == 0) uniform_inputs |= std::uint64_t{1} << k;
    }
    for (const Primitive& out : outputs) {
      context.outputs.push_back(out.bytes());
      context.output_sizes.push_back(static_cast<std::int64_t>(dtype_size(out.dtype)));
    }
    context.plan = &cpu::row_plan_of<T>(program, uniform_inputs);
    cpu::parallel_for(domain.numel() / n, std::max<std::int64_t>(1, 16384 / n),
                      [&](std::int64_t begin, std::int64_t end) { cpu::run_rows<T>(context, begin, end); });
  };
  if (program.type() == codegen::ScalarType::f64) run.template operator()<double>();
  else run.template operator()<float>();
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (cpu::is_half(declared_outputs[k].dtype)) outputs[k] = cast(outputs[k], declared_outputs[k].dtype);
  return outputs;
}

std::vector<std::string> Cpu::program_steps(const codegen::Program& program) {
  std::vector<std::string> names;
  auto describe = [&]<class T>() {
    for (const cpu::PlannedStep<T>& step : cpu::plan_of<T>(program).steps)
      names.emplace_back(step.formula != nullptr ? step.formula->name
                                                 : std::string(codegen::kind_name(program.code()[step.step].kind)));
  };
  if (program.type() == codegen::ScalarType::f64) describe.template operator()<double>();
  else if (program.type() == codegen::ScalarType::f32) describe.template operator()<float>();
  else KILN_FAIL("program_steps: the CPU plans f32 and f64 programs, got {}", codegen::scalar_type_name(program.type()));
  return names;
}

}  // namespace kiln
