// onnx::Model, GraphRunner and op_table over one backend (kiln/onnx/model.hpp), compiled once
// in libkiln_<backend>_instances for the backends that kiln_add_instances is given ONNX
// (cmake/KilnInstances.cmake); see autodiff.cpp for the macros.
#include KILN_INSTANCES_HEADER

#include "kiln/onnx/model.hpp"

KILN_ONNX_INSTANCES(, KILN_INSTANCES_BACKEND)
