# Writes the GLSL functions that a C++ header holds as macros (the KILN_GLSL_... definitions
# of src/codegen/glsl_half.hpp) to a GLSL include file, so that the kernels of
# kernels/glsl compiled at build time use the very text that the kernels generated at run
# time get through KILN_GLSL_SOURCE, and that tests/codegen checks as C++. Run by
# backends/vulkan/CMakeLists.txt at build time:
#   cmake -DHEADER=<.hpp> -DMACROS=<NAME;NAME...> -DOUTPUT=<.glsl> -P glsl_include_from_header.cmake
# Each macro is a "#define NAME \" line followed by its body's lines, each but the last
# ending in a backslash.
file(READ "${HEADER}" header)
file(RELATIVE_PATH source "${CMAKE_CURRENT_LIST_DIR}/.." "${HEADER}")
set(text "// Generated from ${source} by cmake/glsl_include_from_header.cmake: do not edit.\n")
foreach(name IN LISTS MACROS)
  if(NOT header MATCHES "\n#define ${name}[ \t]*\\\\\n(([^\n]*\\\\\n)*[^\n]*\n)")
    message(FATAL_ERROR "${HEADER}: no multi-line macro ${name} (#define ${name} \\ then its lines)")
  endif()
  string(REGEX REPLACE "[ \t]*\\\\\n" "\n" body "${CMAKE_MATCH_1}")
  string(APPEND text "\n${body}")
endforeach()
file(WRITE "${OUTPUT}" "${text}")
