// The nn building blocks (kiln/nn/instances.hpp) on kiln::Cpu and kiln::Autodiff<kiln::Cpu>,
// compiled once in libkiln_cpu: include this header in a model file and it compiles calls to
// them instead of their bodies.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/cpu/backend.hpp"
#include "kiln/nn/instances.hpp"

KILN_NN_INSTANCES(extern, kiln::Cpu)
KILN_NN_INSTANCES(extern, kiln::Autodiff<kiln::Cpu>)
