// The nn building blocks (kiln/nn/instances.hpp) on kiln::Vulkan and kiln::Autodiff<kiln::Vulkan>,
// compiled once in libkiln_vulkan: include this header in a model file and it compiles calls to
// them instead of their bodies.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/vulkan/backend.hpp"
#include "kiln/nn/instances.hpp"

KILN_NN_INSTANCES(extern, kiln::Vulkan)
KILN_NN_INSTANCES(extern, kiln::Autodiff<kiln::Vulkan>)
