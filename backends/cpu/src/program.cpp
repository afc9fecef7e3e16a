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

#include <memory>
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

template <class T> struct Context {
  const Program* program;
  std::vector<T> params;  // the parameters in T
  Outputs outputs;
};

// The registers of one thread: one run of values and one of flags per instruction.
// (Arrays, not vectors: Flag<int> is bool, and a vector<bool> holds no bools.)
template <class T> struct Registers {
  std::unique_ptr<Value<T>[]> values;
  std::unique_ptr<Flag<T>[]> flags;
  std::size_t size = 0;
  void reserve(std::size_t steps, std::size_t lanes) {
    if (size >= steps * lanes) return;
    size = steps * lanes;
    values = std::make_unique<Value<T>[]>(size);
    flags = std::make_unique<Flag<T>[]>(size);
  }
};

template <class T> Value<T> broadcast(T v) {
  if constexpr (simd<T>) return Simd<T>::broadcast(v);
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
  Flag<T>* flags = registers.flags.get();
  const std::int64_t first = (out - ctx.outputs.first) / ctx.outputs.element_size[0];
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

  for (std::int64_t done = 0; done < count; done += kChunk) {
    const std::int64_t n = std::min(kChunk, count - done);
    // A chunk kPrefetch ahead of each contiguous input is fetched while this one computes:
    // the compute of a long program between two chunks' loads would otherwise leave the
    // memory idle, and the loads waiting on it.
    if (done + kPrefetch * kChunk < count) {
      for (std::size_t k = 0; k < input_dtypes.size(); ++k) {
        if (strides[k] != 1) continue;
        const auto size = static_cast<std::int64_t>(dtype_size(input_dtypes[k]));
        const std::byte* p = inputs[k] + (done + kPrefetch * kChunk) * size;
        for (std::int64_t b = 0; b < kChunk * size; b += 64) __builtin_prefetch(p + b);
      }
    }
    const auto lanes = static_cast<std::size_t>((n + W - 1) / W);
    auto lane_count = [&](std::size_t j) { return std::min<std::int64_t>(W, n - static_cast<std::int64_t>(j) * W); };
    for (std::size_t s = 0; s < code.size(); ++s) {
      const Instruction& step = code[s];
      Value<T>* v = values + s * L;
      Flag<T>* f = flags + s * L;
      const Value<T>* a = values + step.args[0] * L;
      const Value<T>* b = values + step.args[1] * L;
      const Flag<T>* fa = flags + step.args[0] * L;
      const Flag<T>* fb = flags + step.args[1] * L;
      const Flag<T>* fc = flags + step.args[2] * L;
      switch (codegen::kind_info(step.kind).operands) {
        case codegen::Operands::none:
          if (step.kind == Kind::input) {
            const auto k = static_cast<std::size_t>(step.index);
            const std::int64_t stride = strides[k];
            if (step.mask) {
              const auto* p = reinterpret_cast<const std::uint8_t*>(inputs[k]);
              for (std::size_t j = 0; j < lanes; ++j)
                f[j] = load_flag<T>(p, stride, done + static_cast<std::int64_t>(j) * W, lane_count(j));
            } else {
              const T* p = reinterpret_cast<const T*>(inputs[k]);
              for (std::size_t j = 0; j < lanes; ++j)
                v[j] = load<T>(p, stride, done + static_cast<std::int64_t>(j) * W, lane_count(j));
            }
          } else {
            T value{};
            if (step.kind == Kind::param) value = ctx.params[static_cast<std::size_t>(step.index)];
            else if constexpr (!std::is_same_v<T, bool>) value = fn::constant(T(0), step.value);
            const Value<T> r = broadcast<T>(value);
            for (std::size_t j = 0; j < lanes; ++j) v[j] = r;
          }
          break;
        case codegen::Operands::numbers:
          if (codegen::kind_info(step.kind).result == codegen::Result::mask) {
            for (std::size_t j = 0; j < lanes; ++j) f[j] = compare<T>(step.kind, a[j], b[j]);
          } else {
            // One switch per step, not per register: the loop below is the kind's own.
            switch (step.kind) {
#define KILN_CPU_PROGRAM_CASE(kind)                                                   \
  case Kind::kind:                                                                    \
    for (std::size_t j = 0; j < lanes; ++j) v[j] = number<T>(Kind::kind, a[j], b[j]); \
    break;
              KILN_CPU_PROGRAM_CASE(neg)
              KILN_CPU_PROGRAM_CASE(exp)
              KILN_CPU_PROGRAM_CASE(log)
              KILN_CPU_PROGRAM_CASE(log1p)
              KILN_CPU_PROGRAM_CASE(expm1)
              KILN_CPU_PROGRAM_CASE(sqrt)
              KILN_CPU_PROGRAM_CASE(abs)
              KILN_CPU_PROGRAM_CASE(sin)
              KILN_CPU_PROGRAM_CASE(cos)
              KILN_CPU_PROGRAM_CASE(tan)
              KILN_CPU_PROGRAM_CASE(tanh)
              KILN_CPU_PROGRAM_CASE(erf)
              KILN_CPU_PROGRAM_CASE(floor)
              KILN_CPU_PROGRAM_CASE(ceil)
              KILN_CPU_PROGRAM_CASE(round_even)
              KILN_CPU_PROGRAM_CASE(add)
              KILN_CPU_PROGRAM_CASE(sub)
              KILN_CPU_PROGRAM_CASE(mul)
              KILN_CPU_PROGRAM_CASE(div)
              KILN_CPU_PROGRAM_CASE(max)
              KILN_CPU_PROGRAM_CASE(min)
              KILN_CPU_PROGRAM_CASE(pow)
              KILN_CPU_PROGRAM_CASE(atan2)
              KILN_CPU_PROGRAM_CASE(int_div)
              KILN_CPU_PROGRAM_CASE(int_rem)
              KILN_CPU_PROGRAM_CASE(int_pow)
#undef KILN_CPU_PROGRAM_CASE
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
            const Value<T>* c = values + step.args[2] * L;
            for (std::size_t j = 0; j < lanes; ++j) {
              if constexpr (simd<T>) v[j] = fa[j].select(b[j], c[j]);
              else v[j] = fa[j] ? b[j] : c[j];
            }
          }
          break;
      }
    }
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const std::size_t s = slots[k];
      std::byte* base = ctx.outputs.base[k] + (first + done) * ctx.outputs.element_size[k];
      if (code[s].mask) {
        bool* p = reinterpret_cast<bool*>(base);
        for (std::size_t j = 0; j < lanes; ++j) store_flag<T>(flags[s * L + j], p + j * W, lane_count(j));
      } else {
        T* p = reinterpret_cast<T*>(base);
        for (std::size_t j = 0; j < lanes; ++j) store<T>(values[s * L + j], p + j * W, lane_count(j), stream);
      }
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
    cpu::Context<T> context{&program, {}, {}};
    for (double p : params) {
      if constexpr (std::is_same_v<T, bool>) context.params.push_back(p != 0.0);
      else context.params.push_back(fn::constant(T(0), p));
    }
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

}  // namespace kiln
