// Autodiff<kiln::Cpu> (kiln/autodiff/instances.hpp) and the nn building blocks
// (kiln/nn/instances.hpp) on kiln::Cpu and Autodiff over it, compiled once in libkiln_cpu:
// include this header in a model file and it compiles calls to them instead of their bodies.
#pragma once

#include "kiln/cpu/backend.hpp"

#define KILN_INSTANCES_BACKEND kiln::Cpu
#include "kiln/backend/instances.inc"
#undef KILN_INSTANCES_BACKEND
