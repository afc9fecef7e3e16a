// Codegen: the CUDA C++ table and kernel dialect (src/codegen/cuda.hpp). Every catalogue op
// in every dtype of its domain (f16 and bf16 included, through their conversions) and every
// gradient formula in every float dtype becomes an elementwise kernel, as do strided,
// single-element and parameter kernels; all of them, in one source, are
// compiled to PTX by NVRTC for compute_80 and the PTX to SASS by ptxas for sm_80 and sm_90. No GPU
// is needed; without the CUDA toolkit at configure time the test reports itself skipped.
#include "codegen/cuda.hpp"
#include "codegen/glsl.hpp"
#include "codegen/row_kernel.hpp"
#include "kiln/codegen/program.hpp"

#include <gtest/gtest.h>

#ifdef KILN_HAVE_NVRTC
#include <nvrtc.h>
#endif
#ifdef KILN_HAVE_HIPRTC
#include <hip/hiprtc.h>
#endif

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace codegen = kiln::codegen;
namespace ops = kiln::ops;
using kiln::DType;

std::vector<DType> dtypes_of(ops::Domain d) {
  if (d == ops::Domain::boolean) return {DType::boolean};
  std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};
  if (d == ops::Domain::float_only) return floats;
  floats.insert(floats.end(), {DType::i32, DType::i64, DType::u8});
  return floats;
}

struct Kernels {
  const codegen::KernelDialect* dialect = &codegen::cuda_kernels();
  std::string source = codegen::cuda_prelude();
  std::vector<std::string> helpers;
  int count = 0;

  // A kernel of `tree` over `inputs` operands of `dtype` (and `params` scalar parameters),
  // in `layout`.
  void add(const std::string& what, DType dtype, const codegen::NodePtr& tree, int inputs, DType out,
           const codegen::KernelLayout& layout = {}, int params = 0) {
    const auto type = codegen::scalar_type_of(dtype);
    const codegen::Expression e = codegen::render_cuda(tree, type);
    codegen::ElementwiseKernel k;
    k.name = fmt::format("k{}_{}_{}", count++, what, kiln::dtype_name(dtype));
    k.inputs.assign(static_cast<std::size_t>(inputs), dtype);
    k.outputs = {{out, e.value, out == DType::boolean, e.lets}};
    k.helpers = codegen::cuda_new_helpers(e, helpers);
    k.params = params;
    k.param_type = type;
    source += codegen::elementwise_kernel(*dialect, k, layout);
  }
};

// Every forward op in every dtype of its domain; every gradient in every float dtype; in
// CUDA's dialect, or HIP's.
Kernels every_kernel(bool hip = false) {
  Kernels k;
  if (hip) {
    k.dialect = &codegen::hip_kernels();
    k.source = codegen::hip_prelude();
  }
#define KILN_ADD(Op)                                                                              \
  for (DType d : dtypes_of(ops::Op::domain))                                                      \
    k.add(std::string(ops::Op::name), d, codegen::trace_unary<ops::Op>(codegen::scalar_type_of(d)), 1, \
          ops::is_predicate<ops::Op> ? DType::boolean : d);
  KILN_UNARY_OPS(KILN_ADD)
#undef KILN_ADD
#define KILN_ADD(Op)                                                                               \
  for (DType d : dtypes_of(ops::Op::domain))                                                       \
    k.add(std::string(ops::Op::name), d, codegen::trace_binary<ops::Op>(codegen::scalar_type_of(d)), 2, \
          ops::is_predicate<ops::Op> ? DType::boolean : d);
  KILN_BINARY_OPS(KILN_ADD)
#undef KILN_ADD
  for (DType d : dtypes_of(ops::Domain::float_only)) {
    const auto t = codegen::scalar_type_of(d);
#define KILN_ADD(Op) k.add(std::string(ops::Op::name) + "_grad", d, codegen::trace_unary_grad<ops::Op>(t), 3, d);
    KILN_DIFFERENTIABLE_UNARY_OPS(KILN_ADD)
#undef KILN_ADD
#define KILN_ADD(Op)                                                                                      \
  k.add(std::string(ops::Op::name) + "_grad_lhs", d, codegen::trace_binary_grad<ops::Op, ops::Operand::lhs>(t), 4, d); \
  k.add(std::string(ops::Op::name) + "_grad_rhs", d, codegen::trace_binary_grad<ops::Op, ops::Operand::rhs>(t), 4, d);
    KILN_DIFFERENTIABLE_BINARY_OPS(KILN_ADD)
#undef KILN_ADD
  }
  // Every layout, in every dtype: strided inputs and output (views), a single-element input.
  for (DType d : dtypes_of(ops::Domain::numeric)) {
    const auto tree = codegen::trace_binary<ops::Add>(codegen::scalar_type_of(d));
    k.add("add_strided", d, tree, 2, d, {.strided = true, .out_strided = true});
    k.add("add_scalar_rhs", d, tree, 2, d, {.scalar = {false, true}});
  }
  // Scalar parameters as kernel arguments: x * p0 is one kernel for every scalar.
  for (DType d : dtypes_of(ops::Domain::float_only)) {
    const codegen::Program program = codegen::binary_program<ops::Mul>(d, true);
    k.add("mul_param", d, program.outputs()[0].root, 1, d, {}, program.param_count());
  }
  // Several outputs of one kernel (a fused program writing an intermediate beside its result).
  {
    const auto type = codegen::ScalarType::f32;
    const codegen::Expression sum = codegen::render_cuda(codegen::trace_binary<ops::Add>(type), type);
    const codegen::Expression product = codegen::render_cuda(codegen::trace_binary<ops::Mul>(type), type);
    codegen::ElementwiseKernel kernel;
    kernel.name = fmt::format("k{}_two_outputs", k.count++);
    kernel.inputs = {DType::f32, DType::f32};
    kernel.outputs = {{DType::bf16, sum.value}, {DType::f32, product.value}};
    k.source += codegen::elementwise_kernel(*k.dialect, kernel, {.strided = true});
  }
  // A row kernel (one block per row, reductions through shared memory): softmax's shape, the
  // row's max and the sum of exponentials, then each element.
  {
    codegen::RowKernel row;
    row.kernel.name = fmt::format("k{}_softmax_rows", k.count++);
    row.kernel.inputs = {DType::f32};
    row.kernel.outputs = {{DType::f32, "(expf(in0 - in1) / in2)"}};
    row.kernel.workgroup_size = 256;
    row.reductions = {{codegen::Kind::row_max, "in0"}, {codegen::Kind::row_sum, "expf(in0 - in1)"}};
    k.source += codegen::row_kernel(codegen::cuda(), *k.dialect, row);
  }
  return k;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

// The renderings themselves, without a compiler: exact spellings of a few kinds.
TEST(CodegenCuda, SpellsOpsWithCudasMathLibraryAndWrappingIntegers) {
  using codegen::ScalarType;
  EXPECT_EQ(codegen::render_cuda(codegen::trace_unary<ops::Exp>(ScalarType::f32), ScalarType::f32).value, "expf(in0)");
  EXPECT_EQ(codegen::render_cuda(codegen::trace_unary<ops::Erf>(ScalarType::f64), ScalarType::f64).value, "erf(in0)");
  EXPECT_EQ(codegen::render_cuda(codegen::trace_binary<ops::Add>(ScalarType::i32), ScalarType::i32).value,
            "((int)((unsigned)(in0) + (unsigned)(in1)))");
  const auto div = codegen::render_cuda(codegen::trace_binary<ops::Div>(ScalarType::i64), ScalarType::i64);
  EXPECT_EQ(div.value, "kiln_int_div_i64(in0, in1)");
  EXPECT_EQ(div.helpers.rfind("__device__ int64_t kiln_int_div_i64(int64_t a, int64_t b)", 0), 0u) << div.helpers;
  // Constants are bit patterns: 0.5f, and -0.0 keeps its sign.
  EXPECT_EQ(codegen::detail::cuda_constant(0.5, ScalarType::f32), "__uint_as_float(0x3f000000u)");
  EXPECT_EQ(codegen::detail::cuda_constant(-0.0, ScalarType::f64), "__longlong_as_double(0x8000000000000000ull)");
  EXPECT_THROW(codegen::render_cuda(codegen::make_node(codegen::Kind::exp, {codegen::make_input(0)}), ScalarType::i32),
               kiln::Error);
}

// The kernel around a rendering comes from the same generator as Vulkan's shaders
// (codegen/kernel.hpp), with CUDA's dialect: a __global__ function whose arguments are the
// layout, the buffers and the parameters.
TEST(CodegenCuda, KernelsComeFromTheSharedGeneratorWithCudasDialect) {
  using codegen::ScalarType;
  const codegen::Program program = codegen::binary_program<ops::Mul>(DType::f16, true);
  const codegen::Expression e = codegen::render_cuda(program.outputs()[0].root, ScalarType::f32);
  codegen::ElementwiseKernel k;
  k.name = "scale";
  k.inputs = {DType::f16};
  k.outputs = {{DType::f16, e.value}};
  k.params = program.param_count();
  const std::string flat = codegen::elementwise_kernel(codegen::cuda_kernels(), k, {});
  EXPECT_NE(flat.find("extern \"C\" __global__ void scale(const __grid_constant__ kiln_layout_28 layout, const unsigned short* "
                      "__restrict__ in0_data, unsigned short* __restrict__ out0_data, const float p0) {"),
            std::string::npos)
      << flat;
  EXPECT_NE(flat.find("const float in0 = kiln_f16_to_f32(((uint)(in0_data[layout.v[10] + i])));"), std::string::npos)
      << flat;
  EXPECT_NE(flat.find("(in0 * p0)"), std::string::npos) << flat;
  EXPECT_EQ(flat.find("% size"), std::string::npos) << "a flat kernel computes no strided index";
  const std::string strided = codegen::elementwise_kernel(codegen::cuda_kernels(), k, {.strided = true, .out_strided = true});
  EXPECT_NE(strided.find("long long at0 = layout.v[10];"), std::string::npos) << strided;
  EXPECT_NE(strided.find("long long at_out = layout.v[19];"), std::string::npos) << strided;
  // One walk over the coordinates for the input and the output, in 32 bits where n fits.
  EXPECT_NE(strided.find("if (layout.v[0] <= 4294967295ll) {"), std::string::npos) << strided;
  EXPECT_NE(strided.find("const unsigned int size = ((unsigned int)(layout.v[2 + d]));"), std::string::npos) << strided;
  EXPECT_NE(strided.find("at0 += c * layout.v[11 + d];"), std::string::npos) << strided;
  EXPECT_NE(strided.find("at_out += c * layout.v[20 + d];"), std::string::npos) << strided;
  EXPECT_EQ(occurrences(strided, "rest % size"), 2u) << "one walk per index width, not per operand";
  EXPECT_EQ(occurrences(codegen::elementwise_kernel(codegen::glsl_kernels(), k, {.strided = true, .out_strided = true}),
                        "rest % size"),
            1u);
  EXPECT_NE(strided.find("out0_data[at_out] = "), std::string::npos) << strided;
  // GLSL has no scalar arguments: a shader reads its parameters from the layout buffer,
  // after the input's and the output's layouts.
  const std::string glsl = codegen::elementwise_kernel(codegen::glsl_kernels(), k, {});
  EXPECT_EQ(codegen::param_layout(1), 28);
  EXPECT_NE(glsl.find("const float p0 = intBitsToFloat(params[28]);"), std::string::npos) << glsl;
  EXPECT_EQ(codegen::param_words(0.5, ScalarType::f32)[0], 0x3f000000);
  EXPECT_EQ(codegen::param_words(-2.0, ScalarType::f64)[1], static_cast<std::int32_t>(0xc0000000u));
  EXPECT_EQ(codegen::param_words(-3.0, ScalarType::i64)[1], -1);
}

TEST(CodegenCuda, EveryOpAndGradientCompilesWithNvrtcAndPtxas) {
#ifndef KILN_HAVE_NVRTC
  GTEST_SKIP() << "the CUDA toolkit (NVRTC, ptxas) was not found when Kiln was configured";
#else
  const Kernels kernels = every_kernel();
  nvrtcProgram program;
  ASSERT_EQ(nvrtcCreateProgram(&program, kernels.source.c_str(), "kiln_elementwise.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  // PTX for the oldest architecture Kiln targets; ptxas then makes machine code for each.
  const char* options[] = {"--gpu-architecture=compute_80", "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 2, options);
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(program, log.data());
  // The errors first: NVRTC's log also warns of every unused input (a gradient formula
  // need not read all four).
  std::string errors;
  for (std::size_t at = log.find("error"); at != std::string::npos && errors.size() < 20000;
       at = log.find("error", at + 1)) {
    const std::size_t line = log.rfind('\n', at) + 1;
    errors += log.substr(line, log.find('\n', log.find('\n', at) + 1) - line) + "\n";
  }
  ASSERT_EQ(compiled, NVRTC_SUCCESS) << errors;
  std::size_t ptx_size = 0;
  nvrtcGetPTXSize(program, &ptx_size);
  std::string ptx(ptx_size, '\0');
  nvrtcGetPTX(program, ptx.data());
  nvrtcDestroyProgram(&program);
  ptx.resize(ptx.find('\0') == std::string::npos ? ptx.size() : ptx.find('\0'));
  EXPECT_EQ(occurrences(ptx, ".entry "), static_cast<std::size_t>(kernels.count)) << "one PTX entry per kernel";

  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln_cuda_{}", ::getpid());
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "kernels.ptx") << ptx; }
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto cubin = dir / fmt::format("kernels_{}.cubin", arch);
    const std::string command = fmt::format("\"{}\" -arch={} \"{}\" -o \"{}\" 2>&1", KILN_PTXAS, arch,
                                            (dir / "kernels.ptx").string(), cubin.string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    EXPECT_GT(std::filesystem::file_size(cubin), 0u);
  }
  std::filesystem::remove_all(dir);
  std::printf("CUDA: %d elementwise kernels (every catalogue op and gradient formula in every dtype, every layout, "
              "parameters, several outputs, a row kernel) compiled for sm_80 and sm_90\n",
              kernels.count);
#endif
}

#ifdef KILN_HAVE_HIPRTC
namespace {
// hiprtc's verdict on `source` for `arch`: empty when it compiled to a code object.
std::string hiprtc_compile(const std::string& source, const char* arch) {
  hiprtcProgram program = nullptr;
  if (hiprtcCreateProgram(&program, source.c_str(), "kiln.hip", 0, nullptr, nullptr) != HIPRTC_SUCCESS)
    return "hiprtcCreateProgram failed";
  const std::string option = std::string("--offload-arch=") + arch;
  const char* options[] = {option.c_str(), "-std=c++17", "-ffp-contract=off"};
  const hiprtcResult result = hiprtcCompileProgram(program, 3, options);
  std::string verdict;
  if (result != HIPRTC_SUCCESS) {
    std::size_t size = 0;
    hiprtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    hiprtcGetProgramLog(program, log.data());
    verdict = std::string(hiprtcGetErrorString(result)) + "\n" + log.substr(0, 20000);
  } else {
    std::size_t size = 0;
    hiprtcGetCodeSize(program, &size);
    if (size == 0) verdict = "no code object";
  }
  hiprtcDestroyProgram(&program);
  return verdict;
}
}  // namespace
#endif

// The same renderings in HIP's dialect, and the hand-written kernels, compile for AMD GPUs
// (gfx90a: CDNA2, warps of 64; gfx1030: RDNA2, warps of 32) with Debian's hiprtc.
TEST(CodegenHip, EveryOpGradientAndKernelFileCompilesWithHiprtc) {
#ifndef KILN_HAVE_HIPRTC
  GTEST_SKIP() << "hiprtc was not found when Kiln was configured (apt-get install libamdhip64-dev)";
#else
  const Kernels kernels = every_kernel(true);
  EXPECT_EQ(kernels.source.find("__grid_constant__"), std::string::npos) << "HIP has no __grid_constant__";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_CUDA_KERNELS_DIR))
    if (entry.path().extension() == ".cu") files.push_back(entry.path());
  ASSERT_FALSE(files.empty());
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    EXPECT_EQ(hiprtc_compile(kernels.source, arch), "") << "the generated kernels for " << arch;
    for (const auto& file : files) {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      EXPECT_EQ(hiprtc_compile(codegen::hip_prelude() + text.str(), arch), "") << file << " for " << arch;
    }
  }
  std::printf("HIP: %d elementwise kernels and %zu kernels/cuda files compiled for gfx90a and gfx1030\n", kernels.count,
              files.size());
#endif
}
