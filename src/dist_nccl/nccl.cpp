// kiln::dist's collectives on CUDA tensors over NCCL (kiln/dist/nccl.hpp). NCCL runs on the
// CUDA backend's stream of the tensors' device, in order with the backend's kernels; the
// host does not wait for it. Every rank first meets the others through MPI
// (detail::arrive), so that a rank that died or hangs is named within KILN_DIST_TIMEOUT
// instead of leaving NCCL waiting on the GPU.
#include "kiln/dist/nccl.hpp"

#include <nccl.h>

#include <cstring>
#include <map>
#include <mutex>
#include <span>
#include <string_view>

namespace kiln::dist::detail {

namespace {

void check_nccl(ncclResult_t result, std::string_view op) {
  KILN_CHECK(result == ncclSuccess, "{}: NCCL failed: {}", op, ncclGetErrorString(result));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8:
    case DType::boolean: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(std::string_view name, ReduceOp op, DType dtype) {
  KILN_CHECK(op != ReduceOp::mean || is_float(dtype),
             "{}: mean needs a float tensor, got {} (use sum and divide where integer division is meant)", name, dtype);
  if (dtype == DType::boolean) return ncclMax;  // sum and max of bools: any
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::mean: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

// This process's communicator for `device`, made at its first use: rank 0's unique id
// reaches the others over MPI. Every rank makes its communicators in the same order.
ncclComm_t communicator(int device, std::string_view op) {
  static std::mutex mutex;
  static std::map<int, ncclComm_t> made;  // kept until the process ends
  const std::lock_guard lock(mutex);
  if (const auto it = made.find(device); it != made.end()) return it->second;
  ncclUniqueId id{};
  if (rank() == 0) check_nccl(ncclGetUniqueId(&id), op);
  broadcast_bytes(std::span<std::byte>(reinterpret_cast<std::byte*>(&id), sizeof id), 0);
  (void)cuda::device_stream(device);  // the device current on this thread, as ncclCommInitRank wants
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size(), id, rank()), op);
  made.emplace(device, comm);
  return comm;
}

std::string_view name_of(NcclCollective kind) {
  switch (kind) {
    case NcclCollective::all_reduce: return "all_reduce";
    case NcclCollective::broadcast: return "broadcast";
    case NcclCollective::all_gather: return "all_gather";
    case NcclCollective::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

}  // namespace

void nccl_run(NcclCollective kind, const cuda::CudaTensor& in, const cuda::CudaTensor& out, ReduceOp op, int root) {
  const std::string_view name = name_of(kind);
  KILN_CHECK(in.device == out.device, "{}: input on cuda:{} and output on cuda:{}", name, in.device, out.device);
  KILN_CHECK(in.is_contiguous() && out.is_contiguous(), "{}: NCCL needs contiguous tensors", name);
  KILN_CHECK(root >= 0 && root < world_size(), "{}: root {} is not a rank of this group of {} (0 to {})", name, root,
             world_size(), world_size() - 1);
  const ncclDataType_t type = nccl_type(in.dtype);
  const ncclRedOp_t reduce = nccl_op(name, op, in.dtype);
  const std::size_t count = static_cast<std::size_t>(in.numel());
  arrive(name, count * dtype_size(in.dtype));
  if (count == 0) return;
  const ncclComm_t comm = communicator(in.device, name);
  const auto stream = static_cast<cudaStream_t>(cuda::device_stream(in.device));
  const void* from = cuda::device_address(in);
  void* to = cuda::device_address(out);
  switch (kind) {
    case NcclCollective::all_reduce: check_nccl(ncclAllReduce(from, to, count, type, reduce, comm, stream), name); break;
    case NcclCollective::broadcast: check_nccl(ncclBroadcast(from, to, count, type, root, comm, stream), name); break;
    case NcclCollective::all_gather: check_nccl(ncclAllGather(from, to, count, type, comm, stream), name); break;
    case NcclCollective::reduce_scatter:
      check_nccl(ncclReduceScatter(from, to, count / static_cast<std::size_t>(world_size()), type, reduce, comm, stream),
                 name);
      break;
  }
}

}  // namespace kiln::dist::detail
