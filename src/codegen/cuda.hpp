// The CUDA C++ table of the renderer base (cstyle.hpp), and CUDA's dialect of the
// elementwise kernel generator (kernel.hpp). CUDA's math library has every function of the node kinds in float
// and double with C's meaning (expf / exp, log1pf, erff, tanhf, rintf halves to even,
// powf with negative bases), so its only helpers are the integer Div / Rem / Pow, written
// once for GLSL and CUDA alike (glsl_helpers.hpp), and the f16 / bf16 conversions
// (glsl_half.hpp). Integer add, sub, mul, neg and abs go through the unsigned type, so
// that they wrap as the catalogue's do instead of overflowing (undefined in C++).
// The CUDA backend (backends/cuda) compiles its kernels with NVRTC at run time;
// tests/codegen renders every catalogue op and gradient formula with it and compiles the
// kernels with NVRTC and ptxas for sm_80 and sm_90, without a GPU. Private to Kiln.
#pragma once

#include "codegen/cstyle.hpp"
#include "codegen/glsl_half.hpp"
#include "codegen/glsl_helpers.hpp"
#include "codegen/kernel.hpp"
#include "kiln/core/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

namespace detail {

inline std::string cuda_constant(double v, ScalarType t) {
  switch (t) {
    // Bit patterns: exact for every value, NaN and -0 included.
    case ScalarType::f32: return fmt::format("__uint_as_float({:#x}u)", std::bit_cast<std::uint32_t>(static_cast<float>(v)));
    case ScalarType::f64: return fmt::format("__longlong_as_double({:#x}ull)", std::bit_cast<std::uint64_t>(v));
    default: break;
  }
  KILN_CHECK(is_integer(t), "render_cuda: a {} tree has the numeric constant {}", scalar_type_name(t), v);
  KILN_CHECK(std::isfinite(v) && std::abs(v) < 9.2e18, "render_cuda: the constant {} is no {} value", v,
             scalar_type_name(t));
  const long long n = static_cast<long long>(v);
  switch (t) {
    case ScalarType::i32: return fmt::format("((int){}ll)", static_cast<std::int32_t>(n));
    case ScalarType::i64:
      if (n == std::numeric_limits<long long>::min()) return "(-9223372036854775807ll - 1ll)";
      return fmt::format("{}ll", n);
    default: return fmt::format("((unsigned char){}u)", static_cast<std::uint8_t>(n));
  }
}

// The integer helpers: the GLSL text with __device__ in front (typedefs in the kernel's
// prelude give it GLSL's type names).
inline Helper cuda_helper(Kind kind, ScalarType t) {
  static const std::string sources[] = {
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_DIV(int, i32)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_REM(int, i32)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_POW(int, i32)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_DIV(int64_t, i64)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_REM(int64_t, i64)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_INT_POW(int64_t, i64)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_UINT_DIV(uint8_t, u8)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_UINT_REM(uint8_t, u8)),
      std::string("__device__ ") + KILN_GLSL_SOURCE(KILN_GLSL_UINT_POW(uint8_t, u8)),
  };
  static constexpr std::string_view names[] = {"kiln_int_div_i32", "kiln_int_rem_i32", "kiln_int_pow_i32",
                                               "kiln_int_div_i64", "kiln_int_rem_i64", "kiln_int_pow_i64",
                                               "kiln_int_div_u8",  "kiln_int_rem_u8",  "kiln_int_pow_u8"};
  if (!is_integer(t) || (kind != Kind::int_div && kind != Kind::int_rem && kind != Kind::int_pow)) return {};
  const int op = kind == Kind::int_div ? 0 : kind == Kind::int_rem ? 1 : 2;
  const int type = t == ScalarType::i32 ? 0 : t == ScalarType::i64 ? 1 : 2;
  const auto i = static_cast<std::size_t>(type * 3 + op);
  return {names[i], sources[i]};
}

// Columns: f32, f64, i32, i64, u8, bool.
inline constexpr Language cuda_language = [] {
  Language l = c_operators("cuda");
  auto row = [&](Kind k, std::array<Spelling, 6> spellings) { l.spellings[static_cast<std::size_t>(k)] = spellings; };
  constexpr Spelling none{};
  constexpr Spelling h = call_helper;
  // The float and double names of a math function.
  auto math = [&](Kind k, std::string_view f32, std::string_view f64) {
    row(k, {Spelling{f32}, Spelling{f64}, none, none, none, none});
  };
  // Integer arithmetic through the unsigned types: wraps like the catalogue's.
  auto arithmetic = [&](Kind k, std::string_view floats, std::string_view i32, std::string_view i64,
                        std::string_view u8) {
    row(k, {Spelling{floats}, Spelling{floats}, Spelling{i32}, Spelling{i64}, Spelling{u8}, none});
  };
  arithmetic(Kind::neg, "(-{0})", "((int)(0u - (unsigned)({0})))", "((long long)(0ull - (unsigned long long)({0})))",
             "((unsigned char)(0u - (unsigned)({0})))");
  row(Kind::abs, {Spelling{"fabsf({0})"}, Spelling{"fabs({0})"},
                  Spelling{"(({0}) < 0 ? (int)(0u - (unsigned)({0})) : ({0}))"},
                  Spelling{"(({0}) < 0 ? (long long)(0ull - (unsigned long long)({0})) : ({0}))"}, Spelling{"{0}"},
                  none});
  math(Kind::exp, "expf({0})", "exp({0})");
  math(Kind::log, "logf({0})", "log({0})");
  math(Kind::log1p, "log1pf({0})", "log1p({0})");
  math(Kind::expm1, "expm1f({0})", "expm1({0})");
  math(Kind::sqrt, "sqrtf({0})", "sqrt({0})");
  math(Kind::sin, "sinf({0})", "sin({0})");
  math(Kind::cos, "cosf({0})", "cos({0})");
  math(Kind::tan, "tanf({0})", "tan({0})");
  math(Kind::tanh, "tanhf({0})", "tanh({0})");
  math(Kind::erf, "erff({0})", "erf({0})");
  math(Kind::floor, "floorf({0})", "floor({0})");
  math(Kind::ceil, "ceilf({0})", "ceil({0})");
  math(Kind::round_even, "rintf({0})", "rint({0})");
  math(Kind::pow, "powf({0}, {1})", "pow({0}, {1})");
  math(Kind::atan2, "atan2f({0}, {1})", "atan2({0}, {1})");
  arithmetic(Kind::add, "({0} + {1})", "((int)((unsigned)({0}) + (unsigned)({1})))",
             "((long long)((unsigned long long)({0}) + (unsigned long long)({1})))",
             "((unsigned char)((unsigned)({0}) + (unsigned)({1})))");
  arithmetic(Kind::sub, "({0} - {1})", "((int)((unsigned)({0}) - (unsigned)({1})))",
             "((long long)((unsigned long long)({0}) - (unsigned long long)({1})))",
             "((unsigned char)((unsigned)({0}) - (unsigned)({1})))");
  arithmetic(Kind::mul, "({0} * {1})", "((int)((unsigned)({0}) * (unsigned)({1})))",
             "((long long)((unsigned long long)({0}) * (unsigned long long)({1})))",
             "((unsigned char)((unsigned)({0}) * (unsigned)({1})))");
  arithmetic(Kind::div, "({0} / {1})", "({0} / {1})", "({0} / {1})", "((unsigned char)({0} / {1}))");
  // max / min need not handle NaN (kiln::fn::max checks isnan first).
  arithmetic(Kind::max, "(({0}) > ({1}) ? ({0}) : ({1}))", "(({0}) > ({1}) ? ({0}) : ({1}))",
             "(({0}) > ({1}) ? ({0}) : ({1}))", "(({0}) > ({1}) ? ({0}) : ({1}))");
  arithmetic(Kind::min, "(({0}) < ({1}) ? ({0}) : ({1}))", "(({0}) < ({1}) ? ({0}) : ({1}))",
             "(({0}) < ({1}) ? ({0}) : ({1}))", "(({0}) < ({1}) ? ({0}) : ({1}))");
  for (Kind k : {Kind::int_div, Kind::int_rem, Kind::int_pow}) row(k, {none, none, h, h, h, none});
  row(Kind::isnan, every_type({"(({0}) != ({0}))"}));
  row(Kind::isinf, {Spelling{"(fabsf({0}) == __uint_as_float(0x7f800000u))"},
                    Spelling{"(fabs({0}) == __longlong_as_double(0x7ff0000000000000ll))"}, none, none, none, none});
  l.constant = cuda_constant;
  l.helper = cuda_helper;
  return l;
}();

// CUDA spelling of a dtype in memory (f16 / bf16 as their bits, bool as a byte) and in
// arithmetic (16-bit floats compute in float, as on every backend).
inline std::string_view cuda_storage_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16:
    case DType::bf16: return "unsigned short";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::u8:
    case DType::boolean: return "unsigned char";
  }
  return "?";
}
inline std::string_view cuda_value_type(DType d) {
  if (d == DType::f16 || d == DType::bf16) return "float";
  return d == DType::boolean ? "bool" : cuda_storage_type(d);
}

}  // namespace detail

inline const Language& cuda() { return detail::cuda_language; }

// `root`, a tree computing in type t, as one CUDA C++ expression and the helpers it calls.
inline Expression render_cuda(const NodePtr& root, ScalarType t) { return render(cuda(), root, t); }

namespace detail {
// The prelude's functions: GLSL's bit-cast names for the shared helpers, and the f16 / bf16
// conversions, the same in CUDA and HIP.
inline std::string gpu_prelude_functions() {
  std::string s =
      "__device__ inline float uintBitsToFloat(uint u) { return __uint_as_float(u); }\n"
      "__device__ inline uint floatBitsToUint(float f) { return __float_as_uint(f); }\n";
  s += "__device__ inline " KILN_GLSL_SOURCE(KILN_GLSL_F16_TO_F32) "\n";
  s += "__device__ inline " KILN_GLSL_SOURCE(KILN_GLSL_F32_TO_F16) "\n";
  s += "__device__ inline " KILN_GLSL_SOURCE(KILN_GLSL_BF16_TO_F32) "\n";
  s += "__device__ inline " KILN_GLSL_SOURCE(KILN_GLSL_F32_TO_BF16) "\n";
  return s;
}
}  // namespace detail

// What every kernel source needs once, before the kernels: GLSL's type names for the shared
// helpers (NVRTC has no standard headers), then the functions above.
inline std::string cuda_prelude() {
  return "typedef unsigned int uint;\n"
         "typedef long long int64_t;\n"
         "typedef unsigned char uint8_t;\n" +
         detail::gpu_prelude_functions();
}

// The same for HIP (the ROCm backend's hiprtc and hipcc): HIP's runtime header brings the
// thread indices, the bit casts and the fixed-width types. The kernels of kernels/cuda and the
// generated ones compile unchanged after it.
inline std::string hip_prelude() {
  // hiprtc's header has no <stdint.h> types; hipcc's does (int64_t is long there).
  return "#include <hip/hip_runtime.h>\n"
         "typedef unsigned int uint;\n"
         "#if defined(__HIPCC_RTC__)\n"
         "typedef long long int64_t;\n"
         "typedef unsigned char uint8_t;\n"
         "#endif\n" +
         detail::gpu_prelude_functions();
}

namespace detail {
inline std::string_view cuda_scalar_type(ScalarType t) {
  constexpr std::string_view names[] = {"float", "double", "int", "long long", "unsigned char", "bool"};
  return names[static_cast<std::size_t>(t)];
}

// A kernel function: the layout integers, the inputs, the outputs, then the parameters.
// The layout travels by value, as a __grid_constant__ argument: every thread reads it from
// the constant bank, indexed at run time, with no copy and no buffer to upload per launch.
// Its length covers the inputs' layouts and a strided output's (kernel.hpp).
// HIP has no __grid_constant__: there the layout is a plain by-value argument, which AMD GPUs
// read from the kernel-argument segment in memory, indexed at run time as well.
inline std::string gpu_entry(const ElementwiseKernel& k, std::string_view layout_qualifier) {
  const int words = param_layout(k.inputs.size());
  // Defined once per source, which may hold several kernels.
  std::string s = fmt::format("#ifndef KILN_LAYOUT_{0}\n#define KILN_LAYOUT_{0}\nstruct kiln_layout_{0} {{ long long v[{0}]; }};\n#endif\n", words);
  s += fmt::format("extern \"C\" __global__ void {}({}kiln_layout_{} layout", k.name, layout_qualifier, words);
  for (std::size_t n = 0; n < k.inputs.size(); ++n)
    s += fmt::format(", const {}* __restrict__ in{}_data", cuda_storage_type(k.inputs[n]), n);
  for (std::size_t o = 0; o < k.outputs.size(); ++o)
    s += fmt::format(", {}* __restrict__ out{}_data", cuda_storage_type(k.outputs[o].dtype), o);
  for (int n = 0; n < k.params; ++n) s += fmt::format(", const {} p{}", cuda_scalar_type(k.param_type), n);
  return s + ") {\n";
}
inline std::string cuda_entry(const ElementwiseKernel& k) { return gpu_entry(k, "const __grid_constant__ "); }
inline std::string hip_entry(const ElementwiseKernel& k) { return gpu_entry(k, "const "); }

inline constexpr KernelDialect cuda_dialect{
    .name = "cuda",
    .index_type = "long long",
    .storage_type = cuda_storage_type,
    .value_type = cuda_value_type,
    .scalar_type = cuda_scalar_type,
    .cast = [](std::string_view type, std::string_view value) { return fmt::format("(({})({}))", type, value); },
    .declarations = [](const ElementwiseKernel&, const KernelLayout&) { return std::string(); },  // cuda_prelude()
    .entry = cuda_entry,
    .thread_index = "(long long)blockIdx.x * blockDim.x + threadIdx.x",
    .layout_at = "layout.v[{}]",
    .input_at = "in{0}_data[{1}]",
    .output_at = "out{0}_data[{1}]",
    .group_index = "(long long)blockIdx.x",
    .local_index = "(long long)threadIdx.x",
    .shared_array = "__shared__ {0} {1}[{2}];\n",
    .barrier = "__syncthreads();",
    .narrow_index_type = "unsigned int",
    .narrow_index_limit = "4294967295ll",
};
inline constexpr KernelDialect hip_dialect = [] {
  KernelDialect d = cuda_dialect;
  d.name = "hip";
  d.entry = hip_entry;
  return d;
}();
}  // namespace detail

// The elementwise kernel function around a CUDA rendering (kernel.hpp); parameters are
// kernel arguments. Several kernels share one source after cuda_prelude(), each helper
// defined once (cuda_new_helpers).
inline const KernelDialect& cuda_kernels() { return detail::cuda_dialect; }
// The same kernels for HIP (after hip_prelude()): the CUDA table renders HIP too.
inline const KernelDialect& hip_kernels() { return detail::hip_dialect; }

// The helper definitions of `e` that `seen` does not hold yet (then added to it): what a
// kernel must define before it, in a source where other kernels defined the rest.
inline std::string cuda_new_helpers(const Expression& e, std::vector<std::string>& seen) {
  std::string s;
  std::size_t start = 0;
  while (start < e.helpers.size()) {
    const std::size_t end = e.helpers.find('\n', start);
    std::string helper = e.helpers.substr(start, end - start);
    if (!helper.empty() && std::find(seen.begin(), seen.end(), helper) == seen.end()) {
      s += helper + "\n";
      seen.push_back(std::move(helper));
    }
    start = end == std::string::npos ? e.helpers.size() : end + 1;
  }
  return s;
}

}  // namespace kiln::codegen
