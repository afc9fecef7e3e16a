// Kiln's tensors: the core types, the op catalogue, the Backend concept, the Tensor API
// with kiln::functional (conv, pooling, interpolation), the Autodiff and Fusion decorators
// and every backend this installation has (the CPU backend, and Vulkan where it was built). The
// lighter umbrella: <kiln/kiln.hpp> adds nn, optim, store, data and train on top.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/backend/backend.hpp"
#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/fusion/backend.hpp"
#include "kiln/tensor/module_ops.hpp"
#include "kiln/tensor/print.hpp"
#include "kiln/tensor/tensor.hpp"

// Each backend's headers are installed where its library is: an installation built with
// Vulkan has kiln/vulkan/backend.hpp, and in Kiln's own build tree a target sees a
// backend's headers when it links that backend. Including a backend's header costs
// nothing at link time: its library is needed only by a program that uses it.
#if __has_include("kiln/cpu/backend.hpp")
#include "kiln/cpu/backend.hpp"
#endif
#if __has_include("kiln/vulkan/backend.hpp")
#include "kiln/vulkan/backend.hpp"
#endif
