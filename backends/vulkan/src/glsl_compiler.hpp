// GLSL compute shaders to SPIR-V at run time, through glslang's C API: the elementwise
// kernels, generated from the op catalogue (the hand-written kernels of kernels/glsl are
// compiled at build time by glslc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::vulkan {

// Compiles a GLSL 4.50 compute shader for Vulkan 1.1; throws kiln::Error with glslang's
// log and the numbered source when it does not compile.
std::vector<std::uint32_t> compile_glsl_compute(const std::string& source);

}  // namespace kiln::vulkan
