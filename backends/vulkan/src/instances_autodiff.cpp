// Autodiff over the Vulkan backend (kiln/autodiff/instances.hpp) and the nn building blocks of
// kiln/nn/instances.hpp on it, compiled once here.
#include "kiln/vulkan/instances.hpp"

#define KILN_AUTODIFF_EXTERN
#define KILN_AUTODIFF_INNER kiln::Vulkan
KILN_AUTODIFF_INSTANCES
#undef KILN_AUTODIFF_EXTERN
#undef KILN_AUTODIFF_INNER

KILN_NN_INSTANCES(, kiln::Autodiff<kiln::Vulkan>)
