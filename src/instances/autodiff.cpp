// Autodiff over one backend (kiln/autodiff/instances.hpp), compiled once in
// libkiln_<backend>_instances. CMake compiles this file once per built backend, with
// KILN_INSTANCES_HEADER (its <kiln/<backend>/instances.hpp>) and KILN_INSTANCES_BACKEND
// (its type) defined (cmake/KilnInstances.cmake).
#include KILN_INSTANCES_HEADER

#define KILN_AUTODIFF_EXTERN
#define KILN_AUTODIFF_INNER KILN_INSTANCES_BACKEND
KILN_AUTODIFF_INSTANCES
#undef KILN_AUTODIFF_EXTERN
#undef KILN_AUTODIFF_INNER
