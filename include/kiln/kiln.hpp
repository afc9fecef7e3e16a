// Kiln's umbrella header, like torch/torch.h: the whole library. Tensors, autodiff and
// every installed backend (kiln/tensor.hpp), modules, layers and losses (kiln/nn.hpp),
// optimizers and schedulers (kiln/optim.hpp), weights I/O (kiln/store.hpp), datasets and
// the data loader (kiln/data.hpp) and the training loop (kiln/train.hpp). Linking
// kiln::cpu (or kiln::kiln, every installed backend) brings the libraries all of these need.
// Each of those headers may be included alone for a faster build.
#pragma once

#include "kiln/data.hpp"
#include "kiln/nn.hpp"
#include "kiln/optim.hpp"
#include "kiln/store.hpp"
#include "kiln/tensor.hpp"
#include "kiln/tensor/bitwise.hpp"
#include "kiln/tensor/einsum.hpp"
#include "kiln/tensor/linalg.hpp"
#include "kiln/tensor/numeric.hpp"
#include "kiln/tensor/order.hpp"
#include "kiln/tensor/rearrange.hpp"
#include "kiln/tensor/select.hpp"
#include "kiln/tensor/unfold.hpp"
#include "kiln/train.hpp"

// Autodiff over each installed backend, and the nn layers' building blocks (conv, pooling,
// linear, initialization) on it, come compiled in libkiln_<backend>_instances, which
// kiln::<backend> links: these declare them extern, so that a program compiles calls to
// them instead of their bodies.
#if __has_include("kiln/cpu/instances.hpp")
#include "kiln/cpu/instances.hpp"
#endif
#if __has_include("kiln/vulkan/instances.hpp")
#include "kiln/vulkan/instances.hpp"
#endif
