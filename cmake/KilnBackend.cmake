# kiln_add_backend(<name> <sources>...): the shared library of a backend, target
# kiln_<name> (alias kiln::<name>, libkiln_<name>.so), with the backend folder's include/
# as its public include dir and kiln::core as its only public dependency. Its consumers
# also get kiln::store, kiln::data and kiln::train (INTERFACE: the backend's .so does not
# link them), so that linking one backend is enough for everything <kiln/kiln.hpp>
# declares, as it is for torch/torch.h. Installed as the
# export set Kiln<Name>Targets, the find_package component <name>, and added to
# KILN_BUILT_BACKENDS. The caller links everything else PRIVATE, so that it stays inside
# the .so (tests/install checks the exported targets). A macro: it runs in the backend
# folder's scope, so PARENT_SCOPE reaches the top level.
macro(kiln_add_backend name)
  add_library(kiln_${name} SHARED ${ARGN})
  add_library(kiln::${name} ALIAS kiln_${name})
  set_target_properties(kiln_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME kiln_${name}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    INSTALL_RPATH "$ORIGIN")  # installed, it finds the other Kiln libraries beside itself
  target_include_directories(kiln_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(kiln_${name} PUBLIC kiln_core INTERFACE kiln_store kiln_data kiln_train)

  string(SUBSTRING ${name} 0 1 _kiln_first)
  string(TOUPPER ${_kiln_first} _kiln_first)
  string(SUBSTRING ${name} 1 -1 _kiln_rest)
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS kiln_${name} EXPORT Kiln${_kiln_first}${_kiln_rest}Targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT Kiln${_kiln_first}${_kiln_rest}Targets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})

  list(APPEND KILN_BUILT_BACKENDS ${name})
  set(KILN_BUILT_BACKENDS ${KILN_BUILT_BACKENDS} PARENT_SCOPE)
endmacro()
