// Autodiff<kiln::Vulkan> (kiln/autodiff/instances.hpp) and the nn building blocks
// (kiln/nn/instances.hpp) on kiln::Vulkan and Autodiff over it, compiled once in libkiln_vulkan:
// include this header in a model file and it compiles calls to them instead of their bodies.
#pragma once

#include "kiln/vulkan/backend.hpp"

#define KILN_INSTANCES_BACKEND kiln::Vulkan
#include "kiln/backend/instances.inc"
#undef KILN_INSTANCES_BACKEND
