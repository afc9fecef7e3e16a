// DataParallel: data-parallel training of one module on every rank, like PyTorch's
// DistributedDataParallel. Each rank runs the same model on its own part of the batch; at
// construction the parameters and buffers are checked to agree across ranks and set to rank
// 0's; after each backward, sync() averages the gradients across ranks, so that every rank's
// optimizer takes the same step (the one of the whole batch on one process).
//
//   dist::init();
//   Mlp<Autodiff<Cpu>> model(...);
//   dist::DataParallel parallel(model);              // rank 0's weights everywhere
//   auto grads = optim::GradientsParams<Cpu>::from(model, loss.backward());
//   parallel.sync(grads);                            // the mean over the ranks
//   optimizer.step(lr, model, grads);
//
// Gradient accumulation without communication (torch's no_sync): accumulate the steps'
// GradientsParams locally (accumulate), and sync() once, before the optimizer step.
#pragma once

#include "kiln/dist/process_group.hpp"
#include "kiln/nn/module.hpp"
#include "kiln/optim/gradients.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kiln::dist {

struct DataParallelOptions {
  // The gradients are averaged in flat buckets of about this many bytes: one all_reduce per
  // bucket, not one per parameter (torch DDP's bucket_cap_mb, 25 MiB).
  std::size_t bucket_bytes = std::size_t{25} << 20;
};

namespace detail {
// One trainable parameter's gradient on the host; `grad` is empty where this rank's backward
// did not reach the parameter. `shape` and `dtype` are the parameter's.
struct GradientSlot {
  Shape shape;
  DType dtype = DType::f32;
  std::optional<TensorData> grad;
};
// Checks that every rank's module has the same parameters and buffers (paths, shapes,
// dtypes), then gives each rank rank 0's values, in one broadcast (src/dist/data_parallel.cpp).
void check_and_broadcast(const nn::ModuleState& state);
// Averages the gradients across ranks in buckets of about `bucket_bytes`; a gradient that
// some rank has and this one lacks counts as zeros here, and is present afterwards.
void average_gradients(std::vector<GradientSlot>& slots, std::size_t bucket_bytes);
}  // namespace detail

template <nn::Module M> class DataParallel {
 public:
  // Every rank constructs it at the same point, with its own copy of the module.
  explicit DataParallel(M& module, DataParallelOptions options = {}) : module_(&module), options_(options) {
    detail::check_and_broadcast(nn::detail::state_of(module));
  }

  M& module() const { return *module_; }
  const DataParallelOptions& options() const { return options_; }

  // Replaces `grads` with their mean over the ranks. Every rank calls it, after its backward
  // and before its optimizer step; frozen parameters are left out.
  template <Backend B> void sync(optim::GradientsParams<B>& grads) const {
    if (world_size() == 1) return;  // the mean over one rank: the gradients as they are, no copies
    std::vector<detail::GradientSlot> slots;
    std::vector<nn::ParamId> ids;
    std::vector<typename B::Device> devices;
    nn::for_each_param(*module_, [&](const std::string&, const auto& p) {
      if (!p.trainable()) return;
      detail::GradientSlot slot{p->shape(), p->dtype(), std::nullopt};
      if (const auto g = grads.get(p.id())) slot.grad = B::into_data(*g);
      slots.push_back(std::move(slot));
      ids.push_back(p.id());
      devices.push_back(p->device());
    });
    detail::average_gradients(slots, options_.bucket_bytes);
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (slots[i].grad) grads.set(ids[i], B::from_data(*slots[i].grad, devices[i]));
  }

 private:
  M* module_;
  DataParallelOptions options_;
};

}  // namespace kiln::dist
