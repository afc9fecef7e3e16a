// The nn building blocks of kiln/nn/instances.hpp on Autodiff over the Vulkan backend, compiled once here.
#include "kiln/vulkan/instances.hpp"

KILN_NN_INSTANCES(, kiln::Autodiff<kiln::Vulkan>)
