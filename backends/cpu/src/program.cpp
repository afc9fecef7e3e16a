// Cpu::elementwise: runs any elementwise program (kiln/codegen/program.hpp) with no compiler
// at run time. The program's code is evaluated one instruction at a time over chunks of
// kChunk elements, each instruction a tight loop over SIMD registers (the Simd<T> of
// elementwise_kernels.hpp, so every function has the same vectorized math as the per-op
// kernels); the chunk's registers stay in L1, so a multi-op program reads its inputs and
// writes its outputs once (with streaming stores when they are larger than half the
// last-level cache, as the per-op kernels write theirs). Integer and bool programs run the same loops on plain values.
// The catalogue's single ops keep their compile-time kernels (Cpu::unary<Op>...).
#include "program_eval.hpp"

#include <mutex>
#include <unordered_map>

namespace kiln::cpu {
namespace {

using namespace program_eval;

struct Outputs {
  const std::byte* first = nullptr;  // output 0's base, to find the run's element offset
  std::vector<std::byte*> base;
  std::vector<std::int64_t> element_size;
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
  Registers<T>& registers = thread_local_object<Registers<T>, struct RunProgram>();
  registers.reserve(code.size(), L);
  Value<T>* values = registers.values.get();
  Operand<T>* operands = registers.operands.data();
  const std::int64_t first = (out - ctx.outputs.first) / ctx.outputs.element_size[0];
  // Inputs are prefetched only when the data is too large to stay in the last-level cache (as
  // the caller says by asking for streaming stores): in cache, the prefetches only cost issue slots.
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

namespace kiln::cpu::program_eval {
template const std::vector<Formula<float>>& formulas<float>();
template void execute<float>(std::span<const PlannedStep<float>> steps, std::span<const Instruction> code, Registers<float>& registers,
                       std::size_t L, const std::byte* const* inputs, const std::int64_t* strides, std::int64_t done,
                       std::int64_t n);
template const std::vector<Formula<double>>& formulas<double>();
template void execute<double>(std::span<const PlannedStep<double>> steps, std::span<const Instruction> code, Registers<double>& registers,
                       std::size_t L, const std::byte* const* inputs, const std::int64_t* strides, std::int64_t done,
                       std::int64_t n);
}  // namespace kiln::cpu::program_eval

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

std::vector<std::string> Cpu::program_steps(const codegen::Program& program) {
  if (program.reduces_rows()) return cpu::program_eval::row_program_steps(program);
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
