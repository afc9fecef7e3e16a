// The ROCm backend's memory and stream, for libraries that hand a tensor's device memory to
// other GPU code (kiln::dist's RCCL collectives, kiln/dist/nccl.hpp). No GPU header here.
#pragma once

#include "kiln/rocm/tensor.hpp"

namespace kiln::rocm {

// The device address of the view's first element.
void* device_address(const RocmTensor& tensor);
// The stream the backend queues all its work on for `device` (-1: the default), made current
// for the calling thread; work queued on it runs in order with the backend's own.
void* device_stream(int device = -1);

}  // namespace kiln::rocm
