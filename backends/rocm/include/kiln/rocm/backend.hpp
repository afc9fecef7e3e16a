// kiln::Rocm: the AMD GPU backend, the CUDA backend's sources (backends/cuda/src) built
// against HIP (backends/rocm): the same hand-written kernels (kernels/cuda) and generated
// programs, compiled at run time by hiprtc for the device's target (gfx90a, gfx1030...) and
// cached in memory and on disk (KILN_CACHE_DIR); GEMM is Kiln's own kernel (kernels/cuda/
// gemm.cu: Debian has no rocBLAS). One stream per device, a caching allocator; the library
// starts without a GPU and its first op throws "no ROCm device". Every member has the meaning
// of kiln::Cuda's (kiln/cuda/backend.hpp), and the file comments there name the sources.
// Installed as the find_package component `rocm`.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/rocm/tensor.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/layout.hpp"
#include "kiln/ops/nn.hpp"
#include "kiln/ops/reduce.hpp"

#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

struct Rocm {
  using Device = RocmDevice;
  using Primitive = rocm::RocmTensor;
  using FloatTensor = Primitive;
  using IntTensor = Primitive;
  using BoolTensor = Primitive;
  static constexpr std::string_view name = "rocm";
  // The most inputs one elementwise program may have (its layout, pointers and scalars are
  // kernel arguments, which fit 4 KiB up to here); row programs take up to 64.
  static constexpr std::size_t max_program_inputs = 32;
  static constexpr std::size_t max_row_program_inputs = 64;

  // creation and host transfer (backends/cuda/src/creation.cpp)
  static Primitive from_data(const TensorData& data, const Device& device);
  static TensorData into_data(const Primitive& p);
  static Primitive full(const Shape& shape, double value, DType dtype, const Device& device);
  static Shape shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p) { return {p.device}; }
  static Primitive to_device(const Primitive& p, const Device& device);
  static Primitive cast(const Primitive& p, DType dtype);

  // elementwise and row programs, rendered to HIP C++ and compiled by hiprtc
  // (backends/cuda/src/elementwise.cpp): one kernel per program, writing every output
  static std::vector<Primitive> elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params);
  // one block per row, the reductions through shared memory (RowPrograms): softmax and
  // layer norm with the elementwise work around them are one kernel
  static std::vector<Primitive> row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                            std::span<const double> params, const Shape& domain);

  // reductions and scans (backends/cuda/src/reduce.cpp, kernels/cuda/reduce.cu): the
  // reduced dim is kept with size 1
  static Primitive reduce(const Primitive& x, ops::ReduceOp op, std::int64_t dim);
  static Primitive arg_reduce(const Primitive& x, ops::ArgReduceOp op, std::int64_t dim);  // i64
  static Primitive cumulative(const Primitive& x, ops::CumulativeOp op, std::int64_t dim);
  // sorting (backends/cuda/src/sort.cpp, kernels/cuda/sort.cu): stable; {values, i64 indices}
  static std::pair<Primitive, Primitive> sort(const Primitive& x, std::int64_t dim, bool descending);

  // linear algebra (backends/cuda/src/matmul.cpp, kernels/cuda/gemm.cu); [..., m, k] @ [..., k, n]
  static Primitive matmul(const Primitive& a, const Primitive& b);

  // layout (backends/cuda/src/layout.cpp): views where strides allow, else copies
  static Primitive reshape(const Primitive& x, const Shape& shape);
  static Primitive permute(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive expand(const Primitive& x, const Shape& shape);
  static Primitive slice(const Primitive& x, std::span<const ops::SliceRange> ranges);
  static Primitive slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges, const Primitive& value);
  static Primitive flip(const Primitive& x, std::span<const std::int64_t> dims);
  static Primitive cat(std::span<const Primitive> xs, std::int64_t dim);

  // indexing (backends/cuda/src/indexing.cpp, kernels/cuda/indexing.cu)
  static Primitive gather(const Primitive& x, std::int64_t dim, const Primitive& index);
  static Primitive scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                           ops::ScatterMode mode);

  // convolution and pooling (backends/cuda/src/conv.cpp, kernels/cuda/conv.cu): NCHW,
  // weight [out, in/groups, kh, kw]; im2col + GEMM
  static Primitive conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                          const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                         const ops::Conv2dOptions& options);
  static Primitive conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                          const ops::Conv2dOptions& options);
  // {values, i64 flat h * W + w index per plane}
  static std::pair<Primitive, Primitive> max_pool2d(const Primitive& x, const ops::Pool2dOptions& options);
};

static_assert(Backend<Rocm>, "kiln::Rocm must satisfy the Backend concept");
static_assert(RowPrograms<Rocm>, "kiln::Rocm runs row programs");

}  // namespace kiln
