// Neural-network ops on tensors (kiln::functional): convolution, pooling and
// interpolation, 1-d, 2-d and 3-d. The 1-d ops run as 2-d ops with a height of 1, the 3-d
// ones are composed from 2-d ops.
#pragma once

#include "kiln/tensor/conv.hpp"
#include "kiln/tensor/pool.hpp"
#include "kiln/tensor/tensor.hpp"

// The option types the functional ops take, by the names users write them with:
// functional::Conv2dOptions, functional::InterpolateMode::bilinear...
namespace kiln::functional {
using ops::Conv1dOptions;
using ops::Conv2dOptions;
using ops::Conv3dOptions;
using ops::ConvTranspose1dOptions;
using ops::ConvTranspose2dOptions;
using ops::ConvTranspose3dOptions;
using ops::InterpolateMode;
using ops::InterpolateOptions;
using ops::Pool1dOptions;
using ops::Pool2dOptions;
using ops::Pool3dOptions;
}  // namespace kiln::functional
