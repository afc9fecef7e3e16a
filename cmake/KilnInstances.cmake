# kiln_add_instances(<name>): the compiled instances of backend <name>: Autodiff over it
# and the nn building blocks on it and on Autodiff over it (kiln/autodiff/instances.hpp,
# kiln/nn/instances.hpp), in the shared library kiln_<name>_instances
# (libkiln_<name>_instances.so) built from src/instances/, and the header
# <kiln/<name>/instances.hpp> that declares them extern, generated from
# src/instances/instances.hpp.in. kiln::<name> links the library for its consumers and
# puts the header on their include path, so linking one backend is still enough; both are
# installed in the backend's export set, Kiln<Name>Targets. These instances sit above the
# backends, as autodiff and nn do: a backend's own library compiles only the backend.
function(kiln_add_instances name)
  string(SUBSTRING ${name} 0 1 first)
  string(TOUPPER ${first} first)
  string(SUBSTRING ${name} 1 -1 rest)
  set(KILN_INSTANCES_NAME ${name})
  set(KILN_INSTANCES_TYPE "kiln::${first}${rest}")  # cpu → kiln::Cpu, vulkan → kiln::Vulkan
  set(include_dir ${PROJECT_BINARY_DIR}/instances/${name}/include)
  configure_file(${PROJECT_SOURCE_DIR}/src/instances/instances.hpp.in ${include_dir}/kiln/${name}/instances.hpp @ONLY)

  set(target kiln_${name}_instances)
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/src/instances/autodiff.cpp
                               ${PROJECT_SOURCE_DIR}/src/instances/nn.cpp
                               ${PROJECT_SOURCE_DIR}/src/instances/nn_autodiff.cpp)
  add_library(kiln::${name}_instances ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name}_instances OUTPUT_NAME kiln_${name}_instances
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    INSTALL_RPATH "$ORIGIN")
  target_compile_definitions(${target} PRIVATE "KILN_INSTANCES_HEADER=<kiln/${name}/instances.hpp>"
                                               "KILN_INSTANCES_BACKEND=${KILN_INSTANCES_TYPE}")
  target_link_libraries(${target} PUBLIC kiln_${name})
  # kiln::<name>'s consumers get the header and the library; the library links the backend
  # (a link interface naming each other is fine: neither is built from the other's objects).
  target_include_directories(kiln_${name} PUBLIC $<BUILD_INTERFACE:${include_dir}>)
  target_link_libraries(kiln_${name} INTERFACE ${target})

  install(FILES ${include_dir}/kiln/${name}/instances.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${name})
  install(TARGETS ${target} EXPORT Kiln${first}${rest}Targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
