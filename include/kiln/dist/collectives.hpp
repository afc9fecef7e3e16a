// The collectives on tensors of any backend: each goes through host memory (into_data, the
// MPI collective of kiln/dist/process_group.hpp, from_data on the tensor's device). The
// result is a new tensor; on an autodiff backend it is a leaf (no gradient flows through a
// collective). Every rank calls the same collectives in the same order.
//
//   dist::init();
//   auto total = dist::all_reduce(loss_sum, dist::ReduceOp::sum);
#pragma once

#include "kiln/dist/process_group.hpp"
#include "kiln/tensor.hpp"

#include <cstddef>

namespace kiln::dist {

// The ranks' tensors combined by `op`, on every rank (torch.distributed.all_reduce).
template <Backend B, std::size_t D, TensorKind K>
Tensor<B, D, K> all_reduce(const Tensor<B, D, K>& tensor, ReduceOp op = ReduceOp::sum) {
  TensorData data = tensor.into_data();
  all_reduce(data, op);
  return Tensor<B, D, K>::from_data(data, tensor.device());
}

// Root's tensor, on every rank (torch.distributed.broadcast); the others pass a tensor of
// the same shape and dtype, whose values are not read.
template <Backend B, std::size_t D, TensorKind K>
Tensor<B, D, K> broadcast(const Tensor<B, D, K>& tensor, int root = 0) {
  TensorData data = tensor.into_data();
  broadcast(data, root);
  return Tensor<B, D, K>::from_data(data, tensor.device());
}

// The ranks' tensors concatenated along dimension 0 in rank order (all_gather_into_tensor).
template <Backend B, std::size_t D, TensorKind K>
  requires(D >= 1)
Tensor<B, D, K> all_gather(const Tensor<B, D, K>& tensor) {
  return Tensor<B, D, K>::from_data(all_gather(tensor.into_data()), tensor.device());
}

// Part rank() of the ranks' tensors combined by `op` and split along dimension 0 into
// world_size() parts (reduce_scatter_tensor).
template <Backend B, std::size_t D, TensorKind K>
  requires(D >= 1)
Tensor<B, D, K> reduce_scatter(const Tensor<B, D, K>& tensor, ReduceOp op = ReduceOp::sum) {
  return Tensor<B, D, K>::from_data(reduce_scatter(tensor.into_data(), op), tensor.device());
}

}  // namespace kiln::dist
