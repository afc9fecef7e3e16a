// The nn building blocks of kiln/nn/instances.hpp on Autodiff over the CPU backend, compiled once here.
#include "kiln/cpu/instances.hpp"

KILN_NN_INSTANCES(, kiln::Autodiff<kiln::Cpu>)
