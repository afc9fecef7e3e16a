// Linear regression by gradient descent, the smallest real training loop: fit y = w x + b
// to noisy samples of y = 3x + 2, with Autodiff computing the gradients. The training code
// is compiled once, for kiln::Dispatch, the backend chosen at run time: `--backend vulkan`
// runs it on a Vulkan device, `--backend fusion_cpu` on Fusion<Cpu>.
//
//   linear_regression [--backend cpu|vulkan|cuda|rocm|fusion_cpu|fusion_vulkan|fusion_cuda|fusion_rocm]     (default: cpu)
//
// `linear_regression --help` lists the flags. Exits with 1 if the fit does not land near
// w = 3, b = 2 (or a backend fails), 2 on a bad command line, 77 when a GPU backend (Vulkan, CUDA,
// ROCm) was asked for but no device can be created.
#include "../common/flags.hpp"

#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#include <kiln/kiln.hpp>

#include <fmt/format.h>

#include <cmath>
#include <string>

int train() {
  // Autodiff records the ops on tensors that require grad; rank 2: [samples, features]. Every
  // tensor lands on Dispatch's default device, the backend main() chose.
  using Tensor = kiln::Tensor<kiln::Autodiff<kiln::Dispatch>, 2>;
  kiln::manual_seed(42);  // the same data and result on every run and every backend

  // 256 samples: x uniform in [-1, 1), y = 3x + 2 plus Gaussian noise (std 0.1).
  const std::int64_t n = 256;
  const Tensor x = Tensor::random({n, 1}, kiln::Distribution::uniform(-1.0, 1.0));
  const Tensor noise = Tensor::random({n, 1}, kiln::Distribution::normal(0.0, 0.1));
  const Tensor y = x * 3.0 + 2.0 + noise;

  // Parameters, shape [1, 1] so that they broadcast over the samples.
  Tensor w = Tensor::zeros({1, 1}).require_grad();
  Tensor b = Tensor::zeros({1, 1}).require_grad();
  const double lr = 0.1;

  for (int step = 0; step <= 200; ++step) {
    const Tensor loss = (x * w + b - y).square().mean_dim(0);  // mean squared error, [1, 1]
    if (step % 20 == 0) fmt::print("step {:3d}  loss {:.6f}\n", step, loss.item());
    const auto grads = loss.backward();
    // Plain SGD on the inner (Dispatch) tensors; the updated values become fresh leaves.
    w = Tensor::from_inner(w.inner() - *w.grad(grads) * lr).require_grad();
    b = Tensor::from_inner(b.inner() - *b.grad(grads) * lr).require_grad();
  }

  const double w_fit = w.item(), b_fit = b.item();
  fmt::print("fitted on {}: w = {:.4f}, b = {:.4f} (true: w = 3, b = 2)\n",
             kiln::dispatch::target_name(*kiln::Dispatch::default_device().target), w_fit, b_fit);
  if (std::abs(w_fit - 3.0) > 0.05 || std::abs(b_fit - 2.0) > 0.05) {
    fmt::print(stderr, "linear_regression: did not converge near w = 3, b = 2\n");
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  std::string backend = "cpu";
  examples::Flags flags("linear_regression", "Fits y = w x + b to noisy samples of y = 3x + 2 by gradient descent.");
  flags.add("--backend", backend, "cpu|vulkan|cuda|rocm|fusion_cpu|fusion_vulkan|fusion_cuda|fusion_rocm", "the backend to train on");
  if (auto exit_code = flags.parse(argc, argv)) return *exit_code;

  kiln::DispatchDevice device;
  try {
    device = kiln::DispatchDevice::parse(backend);
    if (!device.target) throw kiln::Error("name a backend");
  } catch (const kiln::Error& e) {
    fmt::print(stderr, "linear_regression: --backend {}: {}\n", backend, e.what());
    return 2;
  }
  // A GPU backend finds its device at first use; ask first, so that "no device" is told
  // apart from a failure while training (ctest counts 77 as skipped).
  if (const std::string reason = kiln::dispatch::unavailable_reason(device); !reason.empty()) {
    fmt::print(stderr, "linear_regression: {}\n", reason);
    return 77;
  }
  kiln::Dispatch::set_default_device(device);
  try {
    return train();
  } catch (const kiln::Error& e) {
    fmt::print(stderr, "linear_regression: {}\n", e.what());
    return 1;
  }
}
