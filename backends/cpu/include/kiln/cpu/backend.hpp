// kiln::Cpu: the CPU backend, the default one. Declarations only: the kernels are
// compiled in the kiln_cpu library (oneDNN for GEMM, convolution and pooling;
// Eigen-vectorized elementwise loops; OpenMP threads), once per instruction set
// (kiln::cpu::capability()), and in kiln::cpu_embedded, the static build for embedded
// inference (docs/embedded.md).
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/cpu/tensor.hpp"
#include "kiln/ops/optim.hpp"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

struct Cpu {
  using Device = CpuDevice;
  using Primitive = cpu::CpuTensor;
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;
  static constexpr std::string_view name = "cpu";
  // The most inputs one elementwise program may have (Fusion<Cpu> keeps to it); parameters
  // are uniform registers, as many as the program has.
  static constexpr std::size_t max_program_inputs = 8;

  // creation and host transfer (backends/cpu/src/creation.cpp)
  static Primitive from_data(const TensorData& data, const Device& device);
  static TensorData into_data(const Primitive& p);
  static Primitive full(const Shape& shape, double value, DType dtype, const Device& device);
  static Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                          const Device& device);
  static Shape shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive&) { return {}; }
  static Primitive to_device(const Primitive& p, const Device&) { return p; }
  static Primitive cast(const Primitive& p, DType dtype);

  // elementwise programs (backends/cpu/src/program.cpp): any program, evaluated over
  // L1-sized chunks with the SIMD math of the per-op kernels
  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);
  // The steps elementwise() executes for a program of f32 / f64, in order: a subtree that is
  // a catalogue formula runs as one compiled step, named by its op ("gelu", "sigmoid",
  // "tanh_backward", "div_backward_lhs"), the others by their node kind ("mul", "input").
  // A row program's steps come pass by pass, as planned for inputs that all vary along the
  // row: "pass 0", the steps computed once per row ("per row: mul_add_rsqrt"), the steps
  // over the row's chunks, then its reductions ("row_max", or "row_sum(mul)" for a sum that
  // accumulates a product it never stores). For tests and logs.
  static std::vector<std::string> program_steps(const codegen::Program& program);
  // Row programs (RowPrograms; backends/cpu/src/row_program.cpp): f32 / f64 programs with
  // reductions along the domain's rows, run row by row on the threads, each row in passes
  // over L1-sized chunks, so softmax or layer norm with the work around them is one kernel.
  static std::vector<Primitive> row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params, const Shape& domain);
  // A matmul with an elementwise program as its epilogue (MatmulPrograms;
  // backends/cpu/src/matmul_program.cpp): f32 programs that are a chain of steps from the
  // product (a bias or residual add, a scaling, relu, gelu, sigmoid...) run as oneDNN
  // post-ops inside the GEMM; others return nothing.
  static std::vector<Primitive> matmul_program(const Primitive& a, const Primitive& b, const codegen::Program& program,
                                               std::span<const Primitive> inputs, std::span<const double> params);
  // A linear layer, activation(x @ weightᵀ + bias) (the provided primitive's override;
  // backends/cpu/src/linear.cpp): f32 as one GEMM with the bias and the activation inside it
  // (matmul_program), other dtypes as the provided default.
  static Primitive linear(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          ops::LinearActivation activation);
  // A convolution with an elementwise program as its epilogue (ConvPrograms; conv.cpp): f32
  // chains of eltwise steps from the output (relu, gelu, a scaling...) run as oneDNN
  // post-ops inside the convolution; others return nothing.
  static std::vector<Primitive> conv2d_program(const Primitive& x, const Primitive& weight,
                                               const std::optional<Primitive>& bias, const ops::Conv2dOptions& options,
                                               const codegen::Program& program, std::span<const Primitive> inputs,
                                               std::span<const double> params);
  // the catalogue's ops as compile-time SIMD kernels, instantiated for every op
  // (backends/cpu/src/elementwise*.cpp): overrides of the provided one-op programs
  template <class Op> static Primitive unary(const Primitive& x);
  template <class Op> static Primitive binary(const Primitive& a, const Primitive& b);
  template <class Op> static Primitive binary_scalar(const Primitive& a, double b);
  // The same on operands the caller gave up (provided::unary and its siblings on rvalues):
  // the result is written over a given-up operand's buffer where nothing else holds it and
  // it has the result's shape, dtype and a dense layout, else into a fresh one.
  template <class Op> static Primitive unary(Primitive&& x);
  template <class Op> static Primitive binary(Primitive&& a, Primitive&& b);
  template <class Op> static Primitive binary_scalar(Primitive&& a, double b);
  static Primitive where(const Primitive& cond, const Primitive& a, const Primitive& b);
  // gradient formulas of the catalogue (backends/cpu/src/elementwise_backward.cpp)
  template <class Op> static Primitive unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy);
  template <class Op>
  static Primitive binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
                                   ops::Operand operand);
  // The same on a dy the caller gave up (provided::unary_backward and binary_backward on an
  // rvalue dy): the gradient is written over dy's buffer where nothing else holds it and it
  // is dense, else into a fresh one.
  template <class Op> static Primitive unary_backward(const Primitive& x, const Primitive& y, Primitive&& dy);
  template <class Op>
  static Primitive binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, Primitive&& dy,
                                   ops::Operand operand);

  // reductions, scans, sorting (backends/cpu/src/reduce.cpp, sort.cpp)
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim);
  static Primitive reduce_all(const Primitive& x, ops::ReduceOp op);
  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim);
  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim);
  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending);

  // linear algebra (backends/cpu/src/matmul.cpp)
  static Primitive matmul(const Primitive& a, const Primitive& b);

  // layout (backends/cpu/src/layout.cpp, indexing.cpp)
  static Primitive reshape(const Primitive& x, const Shape& shape);
  static Primitive permute(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive expand(const Primitive& x, const Shape& shape);
  static Primitive slice(const Primitive& x, std::span<const ops::SliceRange> ranges);
  static Primitive slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& value);
  static Primitive flip(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive cat(std::span<const Primitive> xs, std::int64_t dim);
  static Primitive gather(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                           ops::ScatterMode mode);
  static Primitive index_select(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive index_add(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& values);

  // fused optimizer steps (backends/cpu/src/optim.cpp): {param, m, v} after one Adam/AdamW
  // update. param, m and v are given up: a result goes over its input's buffer where nothing
  // else holds that buffer. On an error they are left as they were.
  static std::array<Primitive, 3> adam_step(Primitive&& param, const Primitive& grad, Primitive&& m, Primitive&& v,
                                            const ops::AdamStep& options);

  // neural-network ops (backends/cpu/src/conv.cpp, pool.cpp, interpolate.cpp)
  static Primitive conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                         const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                          const ops::Conv2dOptions& options);
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  // max_pool2d's maxima without the indices (inference: kiln::onnx's MaxPool takes it where a
  // backend has it).
  static Primitive max_pool2d_values(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                       const ops::Pool2dOptions& options);
  static Primitive avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& options);
  static Primitive adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size);
  static Primitive adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy);
  static Primitive interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                               const ops::InterpolateOptions& options);
  static Primitive interpolate_backward(const Primitive& x, const Primitive& dy,
                                        const ops::InterpolateOptions& options);

  // fused composites (backends/cpu/src/fused.cpp): softmax and layer norm in one pass over
  // each row instead of a chain of elementwise ops and reductions
  static Primitive softmax(const Primitive& x, std::int64_t dim, bool log);
  static Primitive softmax_backward(const Primitive& y, const Primitive& dy, std::int64_t dim, bool log);
  static Primitive layer_norm(const Primitive& x, std::int64_t dims, double eps);
  static Primitive layer_norm_backward(const Primitive& x, const Primitive& dy, std::int64_t dims, double eps);
  // layer norm with its weight and bias in the same pass (the provided primitives' overrides)
  static Primitive layer_norm_affine(const Primitive& x, const std::optional<Primitive>& weight,
                                     const std::optional<Primitive>& bias, std::int64_t dims, double eps);
  static LayerNormGradients<Primitive> layer_norm_affine_backward(const Primitive& x,
                                                                  const std::optional<Primitive>& weight,
                                                                  const Primitive& dy, std::int64_t dims, double eps,
                                                                  bool bias);
  // scaled-dot-product attention in flash-attention form (backends/cpu/src/attention.cpp):
  // tiles of queries and keys with an online softmax, never the [L, S] weights; the backward
  // recomputes the tiles from q, k, v and the saved row log-sum-exp
  static std::pair<Primitive, Primitive> attention(const Primitive& q, const Primitive& k, const Primitive& v,
                                                   const std::optional<Primitive>& mask, bool causal, double scale);
  static std::array<Primitive, 3> attention_backward(const Primitive& q, const Primitive& k, const Primitive& v,
                                                     const std::optional<Primitive>& mask, const Primitive& out,
                                                     const Primitive& lse, const Primitive& dout, bool causal,
                                                     double scale);
};

static_assert(Backend<Cpu>, "kiln::Cpu must satisfy the Backend concept");
static_assert(FusedSoftmax<Cpu> && FusedLayerNorm<Cpu> && FusedAttention<Cpu> && RowPrograms<Cpu>,
              "kiln::Cpu provides fused softmax, layer norm and attention, and row programs");

// The kernels are instantiated once, in the library, for every op of the catalogue.
#define KILN_CPU_EXTERN_UNARY(Op)                                                 \
  extern template Cpu::Primitive Cpu::unary<ops::Op>(const Cpu::Primitive&); \
  extern template Cpu::Primitive Cpu::unary<ops::Op>(Cpu::Primitive&&);
#define KILN_CPU_EXTERN_BINARY(Op)                                                                   \
  extern template Cpu::Primitive Cpu::binary<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&); \
  extern template Cpu::Primitive Cpu::binary<ops::Op>(Cpu::Primitive&&, Cpu::Primitive&&);           \
  extern template Cpu::Primitive Cpu::binary_scalar<ops::Op>(const Cpu::Primitive&, double);         \
  extern template Cpu::Primitive Cpu::binary_scalar<ops::Op>(Cpu::Primitive&&, double);
#define KILN_CPU_EXTERN_UNARY_BACKWARD(Op)                                                                \
  extern template Cpu::Primitive Cpu::unary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&, \
                                                              const Cpu::Primitive&);                     \
  extern template Cpu::Primitive Cpu::unary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&, \
                                                              Cpu::Primitive&&);
#define KILN_CPU_EXTERN_BINARY_BACKWARD(Op)                                                                \
  extern template Cpu::Primitive Cpu::binary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&, \
                                                               const Cpu::Primitive&, const Cpu::Primitive&, \
                                                               ops::Operand);                                \
  extern template Cpu::Primitive Cpu::binary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&, \
                                                               const Cpu::Primitive&, Cpu::Primitive&&,      \
                                                               ops::Operand);
KILN_UNARY_OPS(KILN_CPU_EXTERN_UNARY)
KILN_BINARY_OPS(KILN_CPU_EXTERN_BINARY)
KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CPU_EXTERN_UNARY_BACKWARD)
KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CPU_EXTERN_BINARY_BACKWARD)
#undef KILN_CPU_EXTERN_UNARY
#undef KILN_CPU_EXTERN_BINARY
#undef KILN_CPU_EXTERN_UNARY_BACKWARD
#undef KILN_CPU_EXTERN_BINARY_BACKWARD

}  // namespace kiln
