// The nn building blocks of kiln/nn/instances.hpp on one backend, compiled once in
// libkiln_<backend>_instances (nn_autodiff.cpp has them on Autodiff over it, in a file of
// its own so that the three files build in parallel). See autodiff.cpp for the macros.
#include KILN_INSTANCES_HEADER

KILN_NN_INSTANCES(, KILN_INSTANCES_BACKEND)
