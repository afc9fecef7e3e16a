// The nn building blocks of kiln/nn/instances.hpp on Autodiff over one backend, compiled
// once in libkiln_<backend>_instances. See autodiff.cpp for the macros.
#include KILN_INSTANCES_HEADER

KILN_NN_INSTANCES(, kiln::Autodiff<KILN_INSTANCES_BACKEND>)
