// Linear regression by gradient descent, the smallest real training loop: fit y = w x + b
// to noisy samples of y = 3x + 2, with Autodiff<Cpu> computing the gradients.
// Exits with status 1 if the fit does not land near w = 3, b = 2.
#include <kiln/kiln.hpp>

#include <fmt/format.h>

#include <cmath>

// Autodiff<Cpu> records the ops on tensors that require grad; rank 2: [samples, features].
using Tensor = kiln::Tensor<kiln::Autodiff<kiln::Cpu>, 2>;

int main() {
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
    // Plain SGD on the inner (CPU) tensors; the updated values become fresh leaves.
    w = Tensor::from_inner(w.inner() - *w.grad(grads) * lr).require_grad();
    b = Tensor::from_inner(b.inner() - *b.grad(grads) * lr).require_grad();
  }

  const double w_fit = w.item(), b_fit = b.item();
  fmt::print("fitted: w = {:.4f}, b = {:.4f} (true: w = 3, b = 2)\n", w_fit, b_fit);
  if (std::abs(w_fit - 3.0) > 0.05 || std::abs(b_fit - 2.0) > 0.05) {
    fmt::print(stderr, "linear_regression: did not converge near w = 3, b = 2\n");
    return 1;
  }
  return 0;
}
