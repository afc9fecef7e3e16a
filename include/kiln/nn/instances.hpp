// The building blocks the nn layers run on (convolution, pooling, linear, the initializers
// and the layers' weight set-up) and the common losses (cross entropy, NLL, MSE, L1, binary
// cross entropy),
// listed once for explicit instantiation. libkiln_<name>_instances compiles them for each
// built backend and for Autodiff over it (src/instances/), and <kiln/<name>/instances.hpp>
// declares them extern: a file that includes it compiles calls to them, not their bodies
// (and not the Autodiff rules and checks they pull in). That is what keeps the rebuild of a
// model file short (bench/compile_time.sh). Without that header everything still works: the
// templates are instantiated in place, as for any other backend.
//
//   KILN_NN_INSTANCES(extern, kiln::Cpu)   declarations
//   KILN_NN_INSTANCES(, kiln::Cpu)         definitions (in libkiln_cpu_instances)
#pragma once

#include "kiln/nn/conv.hpp"
#include "kiln/nn/init.hpp"
#include "kiln/nn/linear.hpp"
#include "kiln/nn/loss.hpp"
#include "kiln/tensor/conv.hpp"
#include "kiln/tensor/pool.hpp"

#define KILN_NN_INSTANCES_RANK(EXTERN, B, D)                                                                      \
  EXTERN template ::kiln::Tensor<B, D> kiln::nn::Init::make<B, D>(const ::kiln::Tensor<B, D>::Dims&,              \
                                                                  const B::Device&) const;                        \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::linear<B, D>(                                            \
      const ::kiln::Tensor<B, D>&, const ::kiln::Tensor<B, 2>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      ::kiln::ops::LinearActivation);

#define KILN_NN_INSTANCES_POOL2D(EXTERN, B, D)                                                                    \
  EXTERN template std::pair<::kiln::Tensor<B, D>, ::kiln::Tensor<B, D, ::kiln::Int>>                              \
  kiln::functional::max_pool2d_with_indices<B, D>(const ::kiln::Tensor<B, D>&, const ::kiln::ops::Pool2dOptions&); \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::max_pool2d<B, D>(const ::kiln::Tensor<B, D>&,            \
                                                                         const ::kiln::ops::Pool2dOptions&);      \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::avg_pool2d<B, D>(const ::kiln::Tensor<B, D>&,            \
                                                                         const ::kiln::ops::Pool2dOptions&);      \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::adaptive_avg_pool2d<B, D>(                               \
      const ::kiln::Tensor<B, D>&, const std::array<std::int64_t, 2>&);

#define KILN_NN_INSTANCES_POOL1D(EXTERN, B, D)                                                                    \
  EXTERN template std::pair<::kiln::Tensor<B, D>, ::kiln::Tensor<B, D, ::kiln::Int>>                              \
  kiln::functional::max_pool1d_with_indices<B, D>(const ::kiln::Tensor<B, D>&, const ::kiln::ops::Pool1dOptions&); \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::max_pool1d<B, D>(const ::kiln::Tensor<B, D>&,            \
                                                                         const ::kiln::ops::Pool1dOptions&);      \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::avg_pool1d<B, D>(const ::kiln::Tensor<B, D>&,            \
                                                                         const ::kiln::ops::Pool1dOptions&);      \
  EXTERN template ::kiln::Tensor<B, D> kiln::functional::adaptive_avg_pool1d<B, D>(const ::kiln::Tensor<B, D>&,   \
                                                                                  std::int64_t);

#define KILN_NN_INSTANCES_LOSS_RANK(EXTERN, B, D)                                                                 \
  EXTERN template ::kiln::Tensor<B, D> kiln::nn::mse_loss<B, D>(const ::kiln::Tensor<B, D>&,                      \
                                                               const ::kiln::Tensor<B, D>&, ::kiln::nn::Reduction); \
  EXTERN template ::kiln::Tensor<B, D> kiln::nn::l1_loss<B, D>(const ::kiln::Tensor<B, D>&,                       \
                                                              const ::kiln::Tensor<B, D>&, ::kiln::nn::Reduction); \
  EXTERN template ::kiln::Tensor<B, D> kiln::nn::binary_cross_entropy<B, D>(                                      \
      const ::kiln::Tensor<B, D>&, const ::kiln::Tensor<B, D>&, const std::optional<::kiln::Tensor<B, D>>&,       \
      ::kiln::nn::Reduction);                                                                                     \
  EXTERN template ::kiln::Tensor<B, D> kiln::nn::binary_cross_entropy_with_logits<B, D>(                          \
      const ::kiln::Tensor<B, D>&, const ::kiln::Tensor<B, D>&, const std::optional<::kiln::Tensor<B, D>>&,       \
      const std::optional<::kiln::Tensor<B, 1>>&, ::kiln::nn::Reduction);

#define KILN_NN_INSTANCES_LOSS(EXTERN, B)                                                                         \
  EXTERN template ::kiln::Tensor<B, 1> kiln::nn::cross_entropy<B>(                                                \
      const ::kiln::Tensor<B, 2>&, const ::kiln::Tensor<B, 1, ::kiln::Int>&,                                      \
      const std::optional<::kiln::Tensor<B, 1>>&, const ::kiln::nn::CrossEntropyOptions&);                        \
  EXTERN template ::kiln::Tensor<B, 1> kiln::nn::cross_entropy<B>(                                                \
      const ::kiln::Tensor<B, 2>&, const ::kiln::Tensor<B, 2>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      const ::kiln::nn::CrossEntropyOptions&);                                                                    \
  EXTERN template ::kiln::Tensor<B, 1> kiln::nn::nll_loss<B>(                                                     \
      const ::kiln::Tensor<B, 2>&, const ::kiln::Tensor<B, 1, ::kiln::Int>&,                                      \
      const std::optional<::kiln::Tensor<B, 1>>&, const ::kiln::nn::CrossEntropyOptions&);                        \
  KILN_NN_INSTANCES_LOSS_RANK(EXTERN, B, 1)                                                                       \
  KILN_NN_INSTANCES_LOSS_RANK(EXTERN, B, 2)

#define KILN_NN_INSTANCES(EXTERN, B)                                                                              \
  KILN_NN_INSTANCES_LOSS(EXTERN, B)                                                                               \
  KILN_NN_INSTANCES_RANK(EXTERN, B, 2)                                                                            \
  KILN_NN_INSTANCES_RANK(EXTERN, B, 3)                                                                            \
  KILN_NN_INSTANCES_RANK(EXTERN, B, 4)                                                                            \
  EXTERN template ::kiln::Tensor<B, 1> kiln::nn::Init::make<B, 1>(const ::kiln::Tensor<B, 1>::Dims&,              \
                                                                  const B::Device&) const;                        \
  EXTERN template void kiln::nn::detail::init_linear<B>(::kiln::nn::Param<::kiln::Tensor<B, 2>>&,                 \
                                                       std::optional<::kiln::nn::Param<::kiln::Tensor<B, 1>>>&,  \
                                                       std::int64_t, std::int64_t, const ::kiln::nn::LinearOptions&, \
                                                       const B::Device&);                                        \
  EXTERN template void kiln::nn::detail::init_conv<B, 3>(                                                         \
      ::kiln::nn::Param<::kiln::Tensor<B, 3>>&, std::optional<::kiln::nn::Param<::kiln::Tensor<B, 1>>>&,          \
      const std::array<std::int64_t, 3>&, std::int64_t, bool, const B::Device&);                                  \
  EXTERN template void kiln::nn::detail::init_conv<B, 4>(                                                         \
      ::kiln::nn::Param<::kiln::Tensor<B, 4>>&, std::optional<::kiln::nn::Param<::kiln::Tensor<B, 1>>>&,          \
      const std::array<std::int64_t, 4>&, std::int64_t, bool, const B::Device&);                                 \
  EXTERN template ::kiln::Tensor<B, 4> kiln::functional::conv2d<B>(                                               \
      const ::kiln::Tensor<B, 4>&, const ::kiln::Tensor<B, 4>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      const ::kiln::ops::Conv2dOptions&);                                                                         \
  EXTERN template ::kiln::Tensor<B, 3> kiln::functional::conv1d<B>(                                               \
      const ::kiln::Tensor<B, 3>&, const ::kiln::Tensor<B, 3>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      const ::kiln::ops::Conv1dOptions&);                                                                         \
  EXTERN template ::kiln::Tensor<B, 4> kiln::functional::conv_transpose2d<B>(                                     \
      const ::kiln::Tensor<B, 4>&, const ::kiln::Tensor<B, 4>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      const ::kiln::ops::ConvTranspose2dOptions&);                                                                \
  EXTERN template ::kiln::Tensor<B, 3> kiln::functional::conv_transpose1d<B>(                                     \
      const ::kiln::Tensor<B, 3>&, const ::kiln::Tensor<B, 3>&, const std::optional<::kiln::Tensor<B, 1>>&,       \
      const ::kiln::ops::ConvTranspose1dOptions&);                                                                \
  KILN_NN_INSTANCES_POOL2D(EXTERN, B, 3)                                                                          \
  KILN_NN_INSTANCES_POOL2D(EXTERN, B, 4)                                                                          \
  KILN_NN_INSTANCES_POOL1D(EXTERN, B, 2)                                                                          \
  KILN_NN_INSTANCES_POOL1D(EXTERN, B, 3)
