// The nn building blocks of kiln/nn/instances.hpp on the CPU backend, compiled once here
// (instances_autodiff.cpp has them on Autodiff over it, in a file of its own so both build in parallel).
#include "kiln/cpu/instances.hpp"

KILN_NN_INSTANCES(, kiln::Cpu)
