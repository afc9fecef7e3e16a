// Shared by every kernel in kernels/glsl. backends/vulkan/CMakeLists.txt compiles each
// kernel with glslc into one SPIR-V variant per set of knobs (-D macros) that the C++ code
// dispatches, and embeds the words in the library.
//
// Type knobs come in pairs: -D<ROLE>=<GLSL type> and -D<ROLE>_<DTYPE> (for example
// -DACC=double -DACC_F64), so code that depends on the type tests #if defined(ACC_F64).
// DTYPE is one of F32 F64 I32 I64 U8 U16 U32, or U32X2 (uvec2: 64-bit elements moved as
// bits). WORKGROUP_SIZE comes from CMake as well; the C++ side knows it as kWorkgroupSize.
//
// Every extension is enabled here: glslang declares a capability (Int64, Float64, 8- or
// 16-bit storage) only where a variant's types use it, so f32 kernels also run on devices
// without them. Buffers of 16-bit elements are uint16_t, but locals are never 16-bit (that
// would need 16-bit arithmetic): load with uint(x), store with uint16_t(v).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : enable
#extension GL_EXT_shader_8bit_storage : enable
#extension GL_EXT_shader_16bit_storage : enable

// Every kernel's binding 0: its parameters as ints (each kernel documents the layout).
layout(std430, binding = 0) readonly buffer Params { int params[]; };

// The flat index of this invocation: dispatch_invocations (backends/vulkan/src/kernels.cpp)
// spreads workgroups of WORKGROUP_SIZE over x up to the device's limit, then over y.
int invocation_index() {
  return int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * uint(WORKGROUP_SIZE));
}

// The flat index of this workgroup, for kernels that give each work item a workgroup.
int workgroup_index() { return int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x); }
