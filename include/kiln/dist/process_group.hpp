// The process group of distributed training: this process's rank among the world_size()
// processes started together (mpirun -np N, Slurm's srun), and the collectives on host
// memory (TensorData) that the rest of kiln::dist is built on. Compiled once in
// libkiln_dist over MPI (src/dist/); MPI's headers stay there. docs/distributed.md.
#pragma once

#include "kiln/core/tensor_data.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace kiln::dist {

// How all_reduce and reduce_scatter combine the ranks' values (torch.distributed.ReduceOp's
// SUM, AVG and MAX). Floats reduce in their own type (f16 and bf16 as f32, rounded once at
// the end); ints and u8 take sum and max; bools take sum and max, both meaning "any".
enum class ReduceOp : std::uint8_t { sum, mean, max };

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
  }
  return "?";
}
inline std::string_view to_string(ReduceOp op) { return reduce_op_name(op); }

// Joins the process group of the job this process was started in (MPI_Init; as
// torch.distributed.init_process_group("mpi")). Without a launcher the process is a group
// of its own: rank 0 of world size 1, unless KILN_RANK, KILN_WORLD_SIZE (above 1) and
// KILN_DIST_RENDEZVOUS (a file path every rank sees) name the group it joins, through rank
// 0's ompi-server (docs/distributed.md, "Without a launcher"). Calling it again does nothing. The group is left at
// exit (or by finalize()). Reads KILN_DIST_TIMEOUT: the seconds a collective waits for the
// other ranks before it throws (default 300).
void init();
// Whether init() was called and finalize() was not.
bool is_initialized();
// Leaves the process group (MPI_Finalize, when init() started MPI). After a collective
// timed out, it ends the whole job instead (MPI_Abort): the rank that hangs cannot leave
// in step with the others. Runs at exit by itself; calling it again does nothing.
void finalize();

// This process's rank, 0 .. world_size() - 1, and the number of processes. Both need init().
// Where KILN_RANK and KILN_WORLD_SIZE are set (a job script's own numbering), init() checks
// that the launcher started the processes as they say.
int rank();
int world_size();
// This process's place among the ranks on its own host, and their number (the ranks that
// share this machine's cores: divide the threads among them).
int local_rank();
int local_size();
// The seconds a collective waits for the other ranks (KILN_DIST_TIMEOUT, default 300).
double timeout_seconds();

// Returns when every rank has called it (torch.distributed.barrier).
void barrier();

// Every collective below is called by every rank, in the same order, with tensors of the
// same shape and dtype (checked: a kiln::Error naming the op on every rank otherwise).

// Replaces `data` on every rank with the ranks' values combined by `op`.
void all_reduce(TensorData& data, ReduceOp op = ReduceOp::sum);
// Replaces `data` on every rank with root's.
void broadcast(TensorData& data, int root = 0);
// The ranks' tensors concatenated along dimension 0 in rank order: [world_size() * n, ...]
// from [n, ...] (torch.distributed.all_gather_into_tensor).
TensorData all_gather(const TensorData& data);
// The ranks' tensors combined by `op`, then split along dimension 0 into world_size()
// equal parts, of which this rank keeps part rank() (torch's reduce_scatter_tensor).
// Dimension 0 must divide by world_size().
TensorData reduce_scatter(const TensorData& data, ReduceOp op = ReduceOp::sum);

namespace detail {
// Runs all_reduces on a thread of its own, one after the other in the order they were
// queued, while the caller goes on computing (DataParallel's gradient buckets during
// backward). Each `data` must stay where it is until wait_all() returned; every rank queues
// the same ones in the same order, and the calling thread makes no other collective call
// until wait_all(). Where MPI allows no second thread, queue() reduces at once.
class BackgroundReducer {
 public:
  BackgroundReducer();
  ~BackgroundReducer();
  BackgroundReducer(const BackgroundReducer&) = delete;
  BackgroundReducer& operator=(const BackgroundReducer&) = delete;
  void queue(TensorData& data, ReduceOp op);
  // Returns when every queued all_reduce is done; throws the first one's error (a timeout
  // naming the missing ranks), after which the process group cannot be used again.
  void wait_all();

 private:
  struct Queue;
  std::unique_ptr<Queue> queue_;
};

// all_reduce without the check that the ranks' shapes agree: for callers that checked
// once for many calls (DataParallel's gradient buckets).
void all_reduce_unchecked(TensorData& data, ReduceOp op);
// Returns when every rank has called it with the same `op` and `bytes`, or throws (a
// mismatch, or KILN_DIST_TIMEOUT naming the ranks missing): what every collective begins
// with, for collectives that move their data by other means (NCCL).
void arrive(std::string_view op, std::size_t bytes);
// broadcast of raw bytes whose size every rank already knows.
void broadcast_bytes(std::span<std::byte> bytes, int root);
// The index of the first of `values` that is not the same on every rank, or -1 when all
// are: the same answer on every rank (one small all_reduce). Every rank passes as many.
std::int64_t first_disagreement(std::span<const std::int64_t> values);
}  // namespace detail

}  // namespace kiln::dist
