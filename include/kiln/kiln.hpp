// Kiln's umbrella header: the core types, the op catalogue, the Backend concept, the
// Tensor API, the Autodiff decorator and every backend this installation was built with.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/backend/backend.hpp"
#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/rng.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/optim/adam.hpp"
#include "kiln/optim/scheduler.hpp"
#include "kiln/tensor/module_ops.hpp"
#include "kiln/tensor/print.hpp"
#include "kiln/tensor/tensor.hpp"

#if __has_include("kiln/cpu/backend.hpp")
#include "kiln/cpu/backend.hpp"
#endif
