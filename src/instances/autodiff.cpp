// Autodiff over one backend (kiln/autodiff/instances.hpp), compiled once in
// libkiln_<backend>_instances. CMake compiles this file once per type it instantiates (each
// built backend, and Fusion over the CPU), with KILN_INSTANCES_HEADER (the backend's
// <kiln/<backend>/instances.hpp>) defined, through a generated file that defines
// KILN_INSTANCES_BACKEND (the type) and includes this one (cmake/KilnInstances.cmake).
#include KILN_INSTANCES_HEADER

#define KILN_AUTODIFF_EXTERN
#define KILN_AUTODIFF_INNER KILN_INSTANCES_BACKEND
KILN_AUTODIFF_INSTANCES
#undef KILN_AUTODIFF_EXTERN
#undef KILN_AUTODIFF_INNER
