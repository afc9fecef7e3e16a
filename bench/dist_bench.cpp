// Data-parallel training speed (kiln::dist): one step of the MLP of compare_torch.py
// (784-1024-1024-10, ReLU, cross-entropy, Adam) on a global batch of 256, split evenly
// across the ranks, its gradients averaged by DataParallel::sync. Run it as one process
// (KILN_NUM_THREADS=2 build/bench/kiln_dist_bench) and under mpirun
// (mpirun -np 2 -x KILN_NUM_THREADS=1 build/bench/kiln_dist_bench) to compare 1 rank x 2
// threads with 2 ranks x 1 thread on one machine. Rank 0 prints the median step time and
// the median time of sync (the all-reduce of 2.9 M gradients), over 30 timed steps after 5
// warm-up ones.
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

}  // namespace

int main() {
  dist::init();
  const std::int64_t ranks = dist::world_size(), batch = 256 / ranks;
  manual_seed(1 + static_cast<std::uint64_t>(dist::rank()));
  Mlp model{nn::Linear<AD>(784, 1024), nn::Linear<AD>(1024, 1024), nn::Linear<AD>(1024, 10)};
  dist::DataParallel parallel(model);
  optim::Adam<Cpu> adam;
  const auto x = Tensor<AD, 2>::random({batch, 784}, Distribution::normal(0, 1));
  const auto y = Tensor<AD, 1>::random({batch}, Distribution::uniform(0, 10)).floor().to_int();
  std::vector<double> steps, syncs;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 35; ++i) {
    dist::barrier();
    const auto start = Clock::now();
    auto backward = nn::cross_entropy(model.forward(x), y).backward();
    auto grads = optim::GradientsParams<Cpu>::from(model, backward);
    const auto before_sync = Clock::now();
    parallel.sync(grads);
    const auto after_sync = Clock::now();
    adam.step(1e-3, model, grads);
    (void)model.fc1.weight->inner().sum().item();  // the step's work is done
    const auto end = Clock::now();
    if (i < 5) continue;
    steps.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    syncs.push_back(std::chrono::duration<double, std::milli>(after_sync - before_sync).count());
  }
  if (dist::rank() == 0)
    std::printf("kiln_dist_bench: %lld rank(s) x %d thread(s), batch %lld per rank: step %.3f ms, sync %.3f ms\n",
                static_cast<long long>(ranks), cpu::num_threads(), static_cast<long long>(batch), median(steps),
                median(syncs));
  return 0;
}
