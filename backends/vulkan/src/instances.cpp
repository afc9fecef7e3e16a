// The nn building blocks of kiln/nn/instances.hpp on the Vulkan backend, compiled once here
// (instances_autodiff.cpp has them on Autodiff over it, in a file of its own so both build in parallel).
#include "kiln/vulkan/instances.hpp"

KILN_NN_INSTANCES(, kiln::Vulkan)
