// kiln::Vulkan: the portable GPU backend (any Vulkan 1.1 device; Mesa's lavapipe runs it on
// the CPU for tests). Kernels are GLSL compute shaders: the hand-written ones (matmul,
// reductions, conv, pooling, sort, indexing...) live in kernels/glsl and are compiled to
// SPIR-V at build time and embedded in the library; the elementwise kernels are rendered
// from the op catalogue's formulas (kiln/codegen) and compiled at run time.
//
// Every primitive of the Backend concept exists (static_assert below), for every dtype
// (f16 / bf16 in 16-bit storage, computed in float); the conformance suite, the autodiff
// tests and tests/vulkan (against the CPU backend) run on it. Installed as the find_package
// component `vulkan`. Where kernels are still first, simple versions: docs/backends.md.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/layout.hpp"
#include "kiln/ops/nn.hpp"
#include "kiln/ops/reduce.hpp"
#include "kiln/vulkan/tensor.hpp"

#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

struct Vulkan {
  using Device = VulkanDevice;
  using Primitive = vulkan::VulkanTensor;
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;
  static constexpr std::string_view name = "vulkan";
  // The most buffers one kernel binds; the layout (which carries the parameters, as many as
  // the program has) and the outputs among them.
  static constexpr std::size_t max_kernel_buffers = 8;
  // The most inputs one elementwise program may have: the layout and one output beside them.
  // A program whose outputs do not fit beside its inputs runs a kernel per output.
  static constexpr std::size_t max_program_inputs = max_kernel_buffers - 2;

  // creation and host transfer (backends/vulkan/src/creation.cpp)
  static Primitive from_data(const TensorData& data, const Device& device);
  static TensorData into_data(const Primitive& p);
  static Primitive full(const Shape& shape, double value, DType dtype, const Device& device);
  static Primitive random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                          const Device& device);
  static Shape shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive&) { return {}; }
  static Primitive to_device(const Primitive& p, const Device& device);
  static Primitive cast(const Primitive& p, DType dtype);

  // reductions and scans (backends/vulkan/src/reduce.cpp): the reduced dim is kept with size 1
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim);
  static Primitive reduce_all(const Primitive& x, ops::ReduceOp op);  // shape [1]
  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim);  // i64
  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim);

  // linear algebra (backends/vulkan/src/matmul.cpp): [..., m, k] @ [..., k, n], broadcast batch dims
  static Primitive matmul(const Primitive& a, const Primitive& b);

  // indexing (backends/vulkan/src/indexing.cpp)
  static Primitive gather(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                           ops::ScatterMode mode);
  static Primitive index_select(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive index_add(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& values);

  // convolution (backends/vulkan/src/conv.cpp): NCHW, weight [out, in/groups, kh, kw]; im2col + matmul
  static Primitive conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                         const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                          const ops::Conv2dOptions& options);

  // sorting (backends/vulkan/src/sort.cpp): stable; {values, i64 indices}; NaN last ascending, first descending
  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending);

  // interpolation (backends/vulkan/src/interpolate.cpp): NCHW, nearest / bilinear / bicubic
  static Primitive interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                               const ops::InterpolateOptions& options);
  static Primitive interpolate_backward(const Primitive& x, const Primitive& dy, const ops::InterpolateOptions& options);

  // pooling (backends/vulkan/src/pool.cpp): NCHW; max_pool2d returns {values, i64 flat h * W + w index per plane}
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                       const ops::Pool2dOptions& options);
  static Primitive avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
  static Primitive avg_pool2d_backward(const Primitive& x, const Primitive& dy, const ops::Pool2dOptions& options);
  static Primitive adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size);
  static Primitive adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy);

  // layout (backends/vulkan/src/layout.cpp): views where strides allow, else copies
  static Primitive reshape(const Primitive& x, const Shape& shape);
  static Primitive permute(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive expand(const Primitive& x, const Shape& shape);
  static Primitive slice(const Primitive& x, std::span<const ops::SliceRange> ranges);
  static Primitive slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& value);
  static Primitive flip(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive cat(std::span<const Primitive> xs, std::int64_t dim);

  // elementwise programs, rendered to GLSL and compiled at run time, one kernel per program
  // and output (backends/vulkan/src/elementwise.cpp); the catalogue's ops run as the
  // provided one-op programs
  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);
  // Row programs (RowPrograms; backends/vulkan/src/row_program.cpp): one generated kernel per
  // program and output, one workgroup per row, the reductions through shared memory, so
  // softmax or layer norm with the work around them is one kernel.
  static std::vector<Primitive> row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params, const Shape& domain);
};

static_assert(Backend<Vulkan>, "kiln::Vulkan must satisfy the Backend concept");

// The one-op programs' defaults are instantiated once, in the library, for every op of the
// catalogue, so that user code does not trace formulas in every translation unit.
#define KILN_VULKAN_ELEMENTWISE_DEFAULTS(DECLARE)                                                               \
  KILN_UNARY_OPS(KILN_VULKAN_DEFAULT_UNARY_##DECLARE)                                                           \
  KILN_BINARY_OPS(KILN_VULKAN_DEFAULT_BINARY_##DECLARE)                                                         \
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_VULKAN_DEFAULT_UNARY_BACKWARD_##DECLARE)                                   \
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_VULKAN_DEFAULT_BINARY_BACKWARD_##DECLARE)
#define KILN_VULKAN_DEFAULT_UNARY_extern(Op) \
  extern template Vulkan::Primitive defaults::unary<Vulkan, ops::Op>(const Vulkan::Primitive&);
#define KILN_VULKAN_DEFAULT_BINARY_extern(Op)                                                                  \
  extern template Vulkan::Primitive defaults::binary<Vulkan, ops::Op>(const Vulkan::Primitive&,              \
                                                                      const Vulkan::Primitive&);             \
  extern template Vulkan::Primitive defaults::binary_scalar<Vulkan, ops::Op>(const Vulkan::Primitive&, double);
#define KILN_VULKAN_DEFAULT_UNARY_BACKWARD_extern(Op)                                                         \
  extern template Vulkan::Primitive defaults::unary_backward<Vulkan, ops::Op>(                               \
      const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&);
#define KILN_VULKAN_DEFAULT_BINARY_BACKWARD_extern(Op)                                                        \
  extern template Vulkan::Primitive defaults::binary_backward<Vulkan, ops::Op>(                              \
      const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&, \
      ops::Operand);
KILN_VULKAN_ELEMENTWISE_DEFAULTS(extern)
extern template Vulkan::Primitive defaults::where<Vulkan>(const Vulkan::Primitive&, const Vulkan::Primitive&,
                                                          const Vulkan::Primitive&);

}  // namespace kiln
