// The Fashion-MNIST CNN of model.hpp: its layers' sizes and its forward pass, compiled for
// the backends the examples run it on. examples/CMakeLists.txt compiles this file once per
// backend, into objects that build in parallel: FASHION_MODEL_DISPATCH picks kiln::Dispatch
// (fashion_mnist: the backend chosen at run time), the CPU otherwise (custom_training_loop,
// infer), and FASHION_MODEL_AUTODIFF Autodiff over it, for training (the backend itself,
// for testing and inference, otherwise). The layers' convolution, pooling, linear and
// initialization code comes compiled in libkiln_<backend>_instances (kiln/<backend>/instances.hpp),
// so this file holds little more than the model itself and rebuilds in seconds.
#include "model.hpp"

#if defined(FASHION_MODEL_DISPATCH)
#include <kiln/dispatch/instances.hpp>
using Inner = kiln::Dispatch;
#else
#include <kiln/cpu/instances.hpp>
using Inner = kiln::Cpu;
#endif
#ifdef FASHION_MODEL_AUTODIFF
using Backend = kiln::Autodiff<Inner>;
#else
using Backend = Inner;
#endif

namespace fashion {

template <class B>
Cnn<B>::Cnn(const typename B::Device& device)
    : conv1(1, 32, {3, 3}, {.padding = {1, 1}}, device),
      conv2(32, 64, {3, 3}, {.padding = {1, 1}}, device),
      pool({2, 2}),
      fc1(64 * 7 * 7, 128, {}, device),
      fc2(128, 10, {}, device) {}

template <class B> kiln::Tensor<B, 2> Cnn<B>::forward(const kiln::Tensor<B, 4>& images) const {
  const auto x = pool.forward(conv1.forward(images).relu());
  const auto y = pool.forward(conv2.forward(x).relu());
  return fc2.forward(fc1.forward(y.template reshape<2>({images.dim(0), -1})).relu());
}

template struct Cnn<Backend>;

}  // namespace fashion
