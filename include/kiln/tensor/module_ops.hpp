// Neural-network ops on tensors (kiln::functional): convolution, pooling and
// interpolation, 1-d and 2-d. The 1-d ops run as 2-d ops with a height of 1.
#pragma once

#include "kiln/tensor/conv.hpp"
#include "kiln/tensor/pool.hpp"
#include "kiln/tensor/tensor.hpp"

namespace kiln::functional {}  // namespace kiln::functional
