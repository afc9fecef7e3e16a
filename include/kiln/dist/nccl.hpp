// kiln::dist's collectives on tensors of the CUDA backend, over NCCL: the data moves between
// the GPUs (NVLink, PCIe, InfiniBand with GPUDirect) and never through host memory. These
// overloads for Tensor<Cuda, D, K> take the place of the host path of
// kiln/dist/collectives.hpp wherever this header is included; they need the process group
// (dist::init(), MPI), which also hands NCCL its unique id. Each rank uses one GPU (usually
// device dist::local_rank()); one NCCL communicator per device is made at the first
// collective on it. Built where the CUDA backend and NCCL are (/usr/local/cuda ships NCCL):
// link kiln::dist_nccl. docs/distributed.md.
#pragma once

#include "kiln/cuda/backend.hpp"
#include "kiln/cuda/interop.hpp"
#include "kiln/dist/collectives.hpp"

#include <cstddef>

namespace kiln::dist {

namespace detail {
enum class NcclCollective { all_reduce, broadcast, all_gather, reduce_scatter };
// Runs one collective from `in` into `out` (contiguous tensors on one device, `out` of the
// collective's result shape), queued on the CUDA backend's stream of that device. Every rank
// first meets the others as every collective does (detail::arrive: KILN_DIST_TIMEOUT).
void nccl_run(NcclCollective kind, const cuda::CudaTensor& in, const cuda::CudaTensor& out, ReduceOp op, int root);

// `t` itself where it is a dense view, else a contiguous copy (through the host).
template <std::size_t D, TensorKind K> Tensor<Cuda, D, K> dense(const Tensor<Cuda, D, K>& t) {
  if (t.primitive().is_contiguous()) return t;
  return Tensor<Cuda, D, K>::from_data(t.into_data(), t.device());
}

template <std::size_t D, TensorKind K>
Tensor<Cuda, D, K> nccl(NcclCollective kind, const Tensor<Cuda, D, K>& t, const Shape& result, ReduceOp op, int root) {
  const Tensor<Cuda, D, K> in = dense(t);
  Tensor<Cuda, D, K> out(Cuda::full(result, 0.0, t.dtype(), t.device()));
  nccl_run(kind, in.primitive(), out.primitive(), op, root);
  return out;
}
}  // namespace detail

template <std::size_t D, TensorKind K>
Tensor<Cuda, D, K> all_reduce(const Tensor<Cuda, D, K>& tensor, ReduceOp op = ReduceOp::sum) {
  return detail::nccl(detail::NcclCollective::all_reduce, tensor, tensor.shape(), op, 0);
}

template <std::size_t D, TensorKind K> Tensor<Cuda, D, K> broadcast(const Tensor<Cuda, D, K>& tensor, int root = 0) {
  return detail::nccl(detail::NcclCollective::broadcast, tensor, tensor.shape(), ReduceOp::sum, root);
}

template <std::size_t D, TensorKind K>
  requires(D >= 1)
Tensor<Cuda, D, K> all_gather(const Tensor<Cuda, D, K>& tensor) {
  std::vector<std::int64_t> dims(tensor.shape().begin(), tensor.shape().end());
  dims[0] *= world_size();
  return detail::nccl(detail::NcclCollective::all_gather, tensor, Shape(dims), ReduceOp::sum, 0);
}

template <std::size_t D, TensorKind K>
  requires(D >= 1)
Tensor<Cuda, D, K> reduce_scatter(const Tensor<Cuda, D, K>& tensor, ReduceOp op = ReduceOp::sum) {
  std::vector<std::int64_t> dims(tensor.shape().begin(), tensor.shape().end());
  KILN_CHECK(dims[0] % world_size() == 0, "reduce_scatter: dimension 0 of shape {} does not divide into {} ranks",
             tensor.shape(), world_size());
  dims[0] /= world_size();
  return detail::nccl(detail::NcclCollective::reduce_scatter, tensor, Shape(dims), op, 0);
}

}  // namespace kiln::dist
