// Data-parallel training speed (kiln::dist): one step of the MLP of compare_torch.py
// (784-1024-1024-10, ReLU, cross-entropy, Adam) on a global batch of 256, split evenly
// across the ranks. Run it as one process (KILN_NUM_THREADS=2 build/bench/kiln_dist_bench)
// and under mpirun (mpirun -np 2 -x KILN_NUM_THREADS=1 build/bench/kiln_dist_bench) to
// compare 1 rank x 2 threads with 2 ranks x 1 thread on one machine. Rank 0 prints the
// median step time over 30 timed steps after 5 warm-up ones, three ways: the gradients
// averaged by DataParallel::sync after backward (with the median time of sync, the
// all-reduce of 2.9 M gradients), and by DataParallel::backward during it, in buckets of
// 25 MiB (one bucket here) and of 4 MiB (three, the first sent while backward goes on).
#include <kiln/dist.hpp>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

using namespace kiln;
using AD = Autodiff<Cpu>;

struct Mlp {
  nn::Linear<AD> fc1, fc2, fc3;
  KILN_MODULE(fc1, fc2, fc3)
  Tensor<AD, 2> forward(const Tensor<AD, 2>& x) const {
    return fc3.forward(fc2.forward(fc1.forward(x).relu()).relu());
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One step's times: all of it, and the part spent averaging gradients after backward.
struct StepTimes {
  std::vector<double> steps, syncs;
};

// 35 steps (5 warm-up): the gradients averaged during backward (`overlap`, buckets of
// `bucket_bytes`) or by sync() after it.
template <class M> StepTimes run(M& model, bool overlap, std::size_t bucket_bytes) {
  const std::int64_t batch = 256 / dist::world_size();
  dist::DataParallel parallel(model, {.bucket_bytes = bucket_bytes});
  optim::Adam<Cpu> adam;
  const auto x = Tensor<AD, 2>::random({batch, 784}, Distribution::normal(0, 1));
  const auto y = Tensor<AD, 1>::random({batch}, Distribution::uniform(0, 10)).floor().to_int();
  StepTimes times;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 35; ++i) {
    dist::barrier();
    const auto start = Clock::now();
    const auto loss = nn::cross_entropy(model.forward(x), y);
    optim::GradientsParams<Cpu> grads;
    auto before_sync = Clock::now(), after_sync = before_sync;
    if (overlap) {
      grads = parallel.backward(loss);
    } else {
      auto backward = loss.backward();
      grads = optim::GradientsParams<Cpu>::from(model, backward);
      before_sync = Clock::now();
      parallel.sync(grads);
      after_sync = Clock::now();
    }
    adam.step(1e-3, model, grads);
    (void)model.fc1.weight->inner().sum().item();  // the step's work is done
    const auto end = Clock::now();
    if (i < 5) continue;
    times.steps.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    times.syncs.push_back(std::chrono::duration<double, std::milli>(after_sync - before_sync).count());
  }
  return times;
}

}  // namespace

int main() {
  dist::init();
  const std::int64_t ranks = dist::world_size(), batch = 256 / ranks;
  manual_seed(1 + static_cast<std::uint64_t>(dist::rank()));
  Mlp model{nn::Linear<AD>(784, 1024), nn::Linear<AD>(1024, 1024), nn::Linear<AD>(1024, 10)};
  const auto after = run(model, false, std::size_t{25} << 20);
  const auto during = run(model, true, std::size_t{25} << 20);
  const auto small = run(model, true, std::size_t{4} << 20);
  if (dist::rank() == 0) {
    std::printf("kiln_dist_bench: %lld rank(s) x %d thread(s), batch %lld per rank (medians of 30 steps):\n",
                static_cast<long long>(ranks), cpu::num_threads(), static_cast<long long>(batch));
    std::printf("  averaged after backward (sync):            step %.3f ms, of which sync %.3f ms\n",
                median(after.steps), median(after.syncs));
    std::printf("  averaged during backward (25 MiB buckets): step %.3f ms\n", median(during.steps));
    std::printf("  averaged during backward (4 MiB buckets):  step %.3f ms\n", median(small.steps));
  }
  return 0;
}
