// Cpu::row_program: runs row programs (elementwise programs with reductions along the
// rows of their domain, kiln/codegen/program.hpp) with no compiler at run time, row by row
// on the threads, with the element evaluator's steps (program_eval.hpp).
#include "program_eval.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace kiln::cpu {
namespace {

using namespace program_eval;

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
// Elements per chunk of a row: four times the element evaluator's, since a row program's
// steps are fewer and each step's fixed cost is paid once per chunk (a row of up to 1024
// floats, the common width of a norm or softmax, is one chunk: on a 2-core VM, softmax as a
// row program took 1.17-1.32 ms over [4096, 1024] against 1.39-1.59 ms with chunks of 512;
// chunks of 2048 were slower again, their registers no longer in L1).
constexpr std::int64_t kRowChunk = 1024;

template <class T> struct RowPass {
  std::vector<std::uint32_t> finished;    // reductions known from this pass's start
  std::vector<PlannedStep<T>> uniform;    // uniform steps computed at this pass's start
  std::vector<PlannedStep<T>> varying;    // steps computed over the chunks
  std::vector<std::uint32_t> accumulate;  // reductions accumulated over the chunks
  std::vector<std::uint32_t> keep;        // varying steps kept for later passes
  std::vector<std::uint32_t> reread;      // varying steps read from the scratch row
  // Sums of a step that nothing else reads, (a op b) with op add, sub or mul: accumulated
  // from a and b, the step never stored (rms norm's sum of x * x reads x once, as one loop).
  struct FusedSum {
    std::uint32_t reduction, a, b;
    Kind op;
  };
  std::vector<FusedSum> fused_sums;
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
    // (codegen::check_row_program_call has checked that per-row outputs are uniform.)
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
  // Sums whose argument is an arithmetic step that only the sum reads take that step in.
  std::vector<int> readers(code.size(), 0);
  for (std::uint32_t s = 0; s < code.size(); ++s) {
    if (!needed[s]) continue;
    if (best[s].formula != nullptr) {
      for (int k = 0; k < best[s].formula->inputs; ++k)
        if (best[s].bind[static_cast<std::size_t>(k)] != s) ++readers[best[s].bind[static_cast<std::size_t>(k)]];
    } else {
      for (int k = 0; k < codegen::kind_arity(code[s].kind); ++k) ++readers[code[s].args[static_cast<std::size_t>(k)]];
    }
  }
  for (const std::uint32_t s : slots) ++readers[s];
  for (RowPass<T>& pass : plan.passes) {
    std::erase_if(pass.accumulate, [&](std::uint32_t r) {
      const std::uint32_t s = code[r].args[0];
      const Kind op = code[s].kind;
      const auto at = std::find_if(pass.varying.begin(), pass.varying.end(),
                                   [&](const PlannedStep<T>& v) { return v.step == s; });
      if (code[r].kind != Kind::row_sum || (op != Kind::add && op != Kind::sub && op != Kind::mul) || code[s].mask ||
          readers[s] != 1 || plan.slot[s] >= 0 || at == pass.varying.end() || at->formula != nullptr)
        return false;
      pass.fused_sums.push_back({r, code[s].args[0], code[s].args[1], op});
      pass.varying.erase(at);
      return true;
    });
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
  static constexpr int kFold = 8192 / kRowChunk;  // chunks per fold: 8192 elements' partial sums in T
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
    // A tree over the lanes, not a chain: four dependent additions where a chain takes
    // sixteen, paid once a row by every short-row norm; in registers where the ISA has the
    // conversion (the scalar tree's trips through the stack took 6 % of rms norm's rows).
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && width<T>() == 16) {
      if (kind == Kind::row_sum) {
        const __m512 v = lanes.v;
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        value += _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
        lanes = broadcast<T>(T(0));
        chunks = 0;
        return;
      }
    }
#endif
    alignas(64) T l[width<T>()];
    lanes.store(l);
    double d[width<T>()];
    for (std::int64_t i = 0; i < width<T>(); ++i) d[i] = static_cast<double>(l[i]);
    if (kind == Kind::row_sum) {
      for (std::int64_t half = width<T>() / 2; half >= 1; half /= 2)
        for (std::int64_t i = 0; i < half; ++i) d[i] += d[i + half];
      value += d[0];
    } else {
      for (std::int64_t half = width<T>() / 2; half >= 1; half /= 2)
        for (std::int64_t i = 0; i < half; ++i) d[i] = combine(kind, d[i], d[i + half]);
      value = combine(kind, value, d[0]);
    }
    lanes = broadcast<T>(kind == Kind::row_sum ? T(0) : static_cast<T>(value));
    chunks = 0;
  }
  static double combine(Kind kind, double a, double b) {
    return kind == Kind::row_sum ? a + b : kind == Kind::row_max ? std::max(a, b) : std::min(a, b);
  }
  // The row's value: NaN where a NaN was reduced by max / min (a sum has it already).
  T finish(Kind kind) {
    fold(kind);
    if (kind == Kind::row_sum) return static_cast<T>(value);
    alignas(64) T flags[width<T>()];
    Eigen::internal::pstore(flags, nan.v);
    bool seen = tail_nan;
    for (std::int64_t i = 0; i < width<T>(); ++i) seen = seen || std::isnan(flags[i]);  // set lanes read as NaN
    return seen ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(value);
  }
};

// Adds the n elements of a chunk, register j being x(j), to the sum acc: four independent
// chains of registers.
template <class T, class X> KILN_INLINE void sum_chunk(X x, std::int64_t n, RowAccumulator<T>& acc) {
  constexpr std::int64_t W = width<T>();
  const std::int64_t full = n / W;
  Value<T> a0 = broadcast<T>(T(0)), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t j = 0;
  for (; j + 4 <= full; j += 4) {
    a0 = a0 + x(static_cast<std::size_t>(j));
    a1 = a1 + x(static_cast<std::size_t>(j + 1));
    a2 = a2 + x(static_cast<std::size_t>(j + 2));
    a3 = a3 + x(static_cast<std::size_t>(j + 3));
  }
  for (; j < full; ++j) a0 = a0 + x(static_cast<std::size_t>(j));
  acc.lanes = acc.lanes + ((a0 + a1) + (a2 + a3));
  if (n > full * W) {
    alignas(64) T tail[W];
    x(static_cast<std::size_t>(full)).store(tail);
    for (std::int64_t l = 0; l < n - full * W; ++l) acc.value += static_cast<double>(tail[l]);
  }
  if (++acc.chunks == RowAccumulator<T>::kFold) acc.fold(Kind::row_sum);
}

// A sum of (a op b) over a chunk, the products never stored.
template <class T>
void sum_fused_chunk(Kind op, const Operand<T>& a, const Operand<T>& b, std::int64_t n, RowAccumulator<T>& acc) {
  switch (op) {
    case Kind::add: return sum_chunk<T>([&](std::size_t j) KILN_INLINE_LAMBDA { return Value<T>(read(a, j) + read(b, j)); }, n, acc);
    case Kind::sub: return sum_chunk<T>([&](std::size_t j) KILN_INLINE_LAMBDA { return Value<T>(read(a, j) - read(b, j)); }, n, acc);
    case Kind::mul:
      if (a.base == b.base && a.step == b.step)  // a square: one load a register
        return sum_chunk<T>([&](std::size_t j) KILN_INLINE_LAMBDA { const Value<T> v = read(a, j); return Value<T>(v * v); }, n, acc);
      return sum_chunk<T>([&](std::size_t j) KILN_INLINE_LAMBDA { return Value<T>(read(a, j) * read(b, j)); }, n, acc);
    default: KILN_FAIL("row_program: {} is not a fused sum's step", codegen::kind_name(op));
  }
}

// Adds the n elements of a chunk (operand x) to acc: a sum through sum_chunk, a max or min
// here, keeping whether a NaN went by.
template <class T> KILN_INLINE void accumulate_chunk(Kind kind, const Operand<T>& x, std::int64_t n, RowAccumulator<T>& acc) {
  if (kind == Kind::row_sum) return sum_chunk<T>([&](std::size_t j) KILN_INLINE_LAMBDA { return read(x, j); }, n, acc);
  constexpr std::int64_t W = width<T>();
  const std::int64_t full = n / W;
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
  std::vector<Strides> strides;  // per input: its element strides over the domain
  std::vector<std::byte*> outputs;               // per output: its first element
  std::vector<std::int64_t> output_sizes;        // per output: its element size
  Shape domain;
  // Whether the outputs are written with streaming stores (use_streaming_stores): where they
  // are too large to stay in the last-level cache, a store that first reads its line back
  // doubles the output's traffic and evicts the inputs that a later pass reads again.
  bool stream = false;
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
  Registers<T>& registers = thread_local_object<Registers<T>, struct RowProgram>();
  std::vector<Value<T>>& scratch = thread_local_object<std::vector<Value<T>>, struct RowProgram>();
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
  // Per input whose rows lie at one stride over the domain's leading dims (a contiguous
  // tensor, a broadcast one, a 2-D view): that stride in bytes, which spares a division per
  // dim and row; -1 for others.
  std::vector<std::int64_t> row_step(inputs, -1);
  for (std::size_t k = 0; k < inputs && rank >= 2; ++k) {
    bool linear = true;
    for (std::size_t d = 0; d + 2 < rank; ++d) linear = linear && ctx.strides[k][d] == ctx.strides[k][d + 1] * ctx.domain[d + 1];
    if (linear) row_step[k] = ctx.strides[k][rank - 2] * static_cast<std::int64_t>(dtype_size(program.inputs()[k]));
  }
  std::vector<RowAccumulator<T>> acc(code.size());
  for (std::int64_t row = begin; row < end; ++row) {
    // Each input's first element of this row.
    for (std::size_t k = 0; k < inputs; ++k) {
      if (row_step[k] >= 0) {
        row_inputs[k] = ctx.inputs[k] + row * row_step[k];
        continue;
      }
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
      for (const typename RowPass<T>::FusedSum& f : pass.fused_sums) acc[f.reduction].reset(Kind::row_sum);
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
        // output where it is aligned as a register is (not when streaming: those stores are
        // the copy below).
        if (last && count == kRowChunk && !ctx.stream) {
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
        for (const typename RowPass<T>::FusedSum& f : pass.fused_sums)
          sum_fused_chunk<T>(f.op, operands[f.a], operands[f.b], count, acc[f.reduction]);
        if (!last) continue;
        for (std::size_t k = 0; k < slots.size(); ++k) {
          if (program.outputs()[k].per_row) continue;
          const std::uint32_t s = slots[k];
          std::byte* base = ctx.outputs[k] + (row * n + done) * ctx.output_sizes[k];
          // A row that does not start on a register boundary takes ordinary stores.
          const bool stream = ctx.stream && !code[s].mask &&
                              reinterpret_cast<std::uintptr_t>(base) % sizeof(typename Simd<T>::Packet) == 0;
          store_output<T>(registers, code[s].mask, s, L, base, count, stream);
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
  if (ctx.stream) stream_fence();
}

}  // namespace

namespace program_eval {

std::vector<std::string> row_program_steps(const Program& program) {
  std::vector<std::string> names;
  auto describe = [&]<class T>() {
    const std::span<const Instruction> code = program.code();
    const auto name = [&](const PlannedStep<T>& step) {
      return step.formula != nullptr ? step.formula->name : std::string(codegen::kind_name(code[step.step].kind));
    };
    const RowPlan<T>& plan = row_plan_of<T>(program, 0);
    for (std::size_t p = 0; p < plan.passes.size(); ++p) {
      const RowPass<T>& pass = plan.passes[p];
      names.push_back(fmt::format("pass {}", p));
      for (const PlannedStep<T>& step : pass.uniform) names.push_back("per row: " + name(step));
      for (const PlannedStep<T>& step : pass.varying) names.push_back(name(step));
      for (const std::uint32_t r : pass.accumulate) names.emplace_back(codegen::kind_name(code[r].kind));
      for (const typename RowPass<T>::FusedSum& f : pass.fused_sums)
        names.push_back(fmt::format("row_sum({})", codegen::kind_name(f.op)));
    }
  };
  if (program.type() == codegen::ScalarType::f64) describe.template operator()<double>();
  else if (program.type() == codegen::ScalarType::f32) describe.template operator()<float>();
  else KILN_FAIL("program_steps: the CPU plans f32 and f64 programs, got {}", codegen::scalar_type_name(program.type()));
  return names;
}

}  // namespace program_eval
}  // namespace kiln::cpu

namespace kiln {

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
    std::int64_t written = 0;
    for (const Primitive& out : outputs) {
      context.outputs.push_back(out.bytes());
      context.output_sizes.push_back(static_cast<std::int64_t>(dtype_size(out.dtype)));
      written += out.shape.numel() * context.output_sizes.back();
    }
    std::int64_t touched = written;
    for (const Primitive& operand : operands)
      touched += operand.shape.numel() * static_cast<std::int64_t>(dtype_size(operand.dtype));
    context.stream = cpu::use_streaming_stores(written, touched);
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

}  // namespace kiln
