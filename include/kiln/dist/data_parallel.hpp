// DataParallel: data-parallel training of one module on every rank, like PyTorch's
// DistributedDataParallel. Each rank runs the same model on its own part of the batch; at
// construction the parameters and buffers are checked to agree across ranks and set to rank
// 0's; backward(loss) runs the backward pass and averages the gradients across ranks while
// it runs, so that every rank's optimizer takes the same step (the one of the whole batch on
// one process).
//
//   dist::init();
//   Mlp<Autodiff<Cpu>> model(...);
//   dist::DataParallel parallel(model);              // rank 0's weights everywhere
//   auto grads = parallel.backward(loss);            // GradientsParams<Cpu>: the mean over the ranks
//   optimizer.step(lr, model, grads);
//
// The gradients travel in flat buckets of about options.bucket_bytes, filled in the order
// backward finishes the parameters (the last layer first); a bucket's all-reduce starts as
// soon as its last gradient is final and runs while backward goes on through the layers
// before it (PyTorch DDP's buckets and hooks; autodiff::BackwardObserver).
//
// Gradient accumulation without communication (torch's no_sync): accumulate the steps'
// GradientsParams locally (GradientsParams::from(model, loss.backward()), accumulate), and
// sync() them once, before the optimizer step.
#pragma once

#include "kiln/autodiff/graph.hpp"
#include "kiln/dist/process_group.hpp"
#include "kiln/nn/module.hpp"
#include "kiln/optim/gradients.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::dist {

struct DataParallelOptions {
  // The gradients are averaged in flat buckets of about this many bytes: one all_reduce per
  // bucket, not one per parameter (torch DDP's bucket_cap_mb, 25 MiB).
  std::size_t bucket_bytes = std::size_t{25} << 20;
  // After each step's gradients, every rank takes rank 0's buffers (BatchNorm's running
  // statistics), so that the ranks evaluate alike (torch DDP's broadcast_buffers). Off: each
  // rank keeps its own, from its own batches.
  bool broadcast_buffers = true;
};

namespace detail {

// One trainable parameter, as the gradient buckets see it.
struct SlotLayout {
  Shape shape;
  DType dtype = DType::f32;
};

// Checks that every rank's module has the same parameters and buffers (paths, shapes,
// dtypes), then gives each rank rank 0's values, in one broadcast (src/dist/data_parallel.cpp).
void check_and_broadcast(const nn::ModuleState& state);
// Gives every rank rank 0's buffers (and with `params`, its parameters too), in one broadcast.
void broadcast_slots(const nn::ModuleState& state, bool params);

// Averages one step's gradients across ranks in buckets: begin() with the trainable
// parameters (module order), add() each gradient as it is final (a bucket whose gradients
// are all there starts its all-reduce on a thread of its own, detail::BackgroundReducer,
// buckets in a fixed order on every rank), finish(), then result(). A gradient some rank has and this one lacks counts as zeros here; one that
// no rank has stays absent. The buckets' memory is kept from one step to the next.
class GradientReducer {
 public:
  explicit GradientReducer(std::size_t bucket_bytes);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // `op` names the caller in the error when the ranks' parameters differ (checked with one
  // small collective).
  void begin(std::vector<SlotLayout> layout, std::string_view op);
  void add(std::size_t slot, const TensorData& grad);
  void finish();
  std::optional<TensorData> result(std::size_t slot) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Tells the reducer each parameter's gradient as backward finishes it.
template <Backend B> class ReducingObserver final : public autodiff::BackwardObserver<typename B::Primitive> {
 public:
  ReducingObserver(GradientReducer& reducer, std::unordered_map<std::uint64_t, std::size_t> slot_of_leaf)
      : reducer_(reducer), slot_of_leaf_(std::move(slot_of_leaf)) {}
  void leaf_ready(std::uint64_t leaf, const typename B::Primitive& grad) override {
    const auto it = slot_of_leaf_.find(leaf);
    if (it != slot_of_leaf_.end()) reducer_.add(it->second, B::into_data(grad));
  }

 private:
  GradientReducer& reducer_;
  std::unordered_map<std::uint64_t, std::size_t> slot_of_leaf_;
};

// The same values on every rank: the ranks' values combined by `op`, as rank 0 computed
// them (so that decisions taken from them, like early stopping, agree everywhere).
void agree(std::span<double> values, ReduceOp op);

}  // namespace detail

template <nn::Module M> class DataParallel {
 public:
  // Every rank constructs it at the same point, with its own copy of the module.
  explicit DataParallel(M& module, DataParallelOptions options = {})
      : module_(&module), options_(options), reducer_(std::make_shared<detail::GradientReducer>(options.bucket_bytes)) {
    detail::check_and_broadcast(nn::detail::state_of(module));
  }

  M& module() const { return *module_; }
  const DataParallelOptions& options() const { return options_; }
  int rank() const { return dist::rank(); }
  int world_size() const { return dist::world_size(); }

  // Runs loss.backward() and returns the trainable parameters' gradients averaged over the
  // ranks, the all-reduces overlapped with the backward pass. Every rank calls it, once per
  // step; frozen parameters are left out.
  template <class Loss> optim::GradientsParams<typename Loss::InnerBackend> backward(const Loss& loss) const {
    return backward<typename Loss::InnerBackend>([&loss] { return loss.backward(); });
  }
  // The same, for a backward pass that `run()` runs (it returns the kiln::Gradients of the
  // model's Autodiff<B> graph).
  template <Backend B, class Run> optim::GradientsParams<B> backward(Run&& run) const {
    if (world_size() == 1) {
      auto grads = run();
      return optim::GradientsParams<B>::from(*module_, grads);
    }
    Trainable<B> params = trainable<B>();
    reducer_->begin(params.layout, "DataParallel::backward");
    std::unordered_map<std::uint64_t, std::size_t> slot_of_leaf;
    for (std::size_t i = 0; i < params.leaves.size(); ++i)
      if (params.leaves[i] != 0) slot_of_leaf.emplace(params.leaves[i], i);
    detail::ReducingObserver<B> observer(*reducer_, std::move(slot_of_leaf));
    {
      autodiff::BackwardObserverScope<typename B::Primitive> scope(observer);
      (void)run();  // the parameters' gradients were taken as they became final
    }
    reducer_->finish();
    after_step();
    return params.results(*reducer_);
  }

  // Replaces `grads` with their mean over the ranks: for gradients accumulated over several
  // local backward passes (no_sync), synced once before the optimizer step. Both this and
  // backward() then give every rank rank 0's buffers (options.broadcast_buffers).
  template <Backend B> void sync(optim::GradientsParams<B>& grads) const {
    if (world_size() == 1) return;  // the mean over one rank: the gradients as they are, no copies
    Trainable<B> params = trainable<B>();
    reducer_->begin(params.layout, "DataParallel::sync");
    for (std::size_t i = params.ids.size(); i-- > 0;)
      if (const auto g = grads.get(params.ids[i])) reducer_->add(i, B::into_data(*g));
    reducer_->finish();
    after_step();
    grads = params.results(*reducer_);
  }

  // Sums or takes the maximum of `values` across ranks, in place, the same result on every
  // rank (what a Learner reduces its epoch metrics with).
  void sum_across_ranks(std::span<double> values) const { detail::agree(values, ReduceOp::sum); }
  void max_across_ranks(std::span<double> values) const { detail::agree(values, ReduceOp::max); }

 private:
  // The trainable parameters in module order: their ids, layouts, devices and leaf nodes (0
  // where a parameter does not require grad).
  template <Backend B> struct Trainable {
    std::vector<nn::ParamId> ids;
    std::vector<detail::SlotLayout> layout;
    std::vector<typename B::Device> devices;
    std::vector<std::uint64_t> leaves;

    optim::GradientsParams<B> results(const detail::GradientReducer& reducer) const {
      optim::GradientsParams<B> out;
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (const auto data = reducer.result(i)) out.set(ids[i], B::from_data(*data, devices[i]));
      return out;
    }
  };
  template <Backend B> Trainable<B> trainable() const {
    Trainable<B> out;
    nn::for_each_param(*module_, [&](const std::string&, const auto& p) {
      if (!p.trainable()) return;
      out.ids.push_back(p.id());
      out.layout.push_back({p->shape(), p->dtype()});
      out.devices.push_back(p->device());
      const auto& node = p->primitive().node;
      out.leaves.push_back(node ? node->id : 0);
    });
    return out;
  }

  void after_step() const {
    if (options_.broadcast_buffers) detail::broadcast_slots(nn::detail::state_of(*module_), false);
  }

  M* module_;
  DataParallelOptions options_;
  std::shared_ptr<detail::GradientReducer> reducer_;  // its buckets are reused step after step
};

}  // namespace kiln::dist
