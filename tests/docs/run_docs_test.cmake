# The docs test (cmake -P, from tests/docs/CMakeLists.txt): configures tests/docs/project
# against the Kiln that tests/install installed, builds every C++ block of the docs, and
# runs the programs among them with ctest.
cmake_minimum_required(VERSION 3.25)
set(ENV{LC_ALL} C)
unset(ENV{LD_LIBRARY_PATH})  # the programs must find Kiln's libraries through their RUNPATH

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message(STATUS "${output}")
  if(NOT rc EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "docs test: ${what} failed (${rc}): ${command}")
  endif()
endfunction()

set(build ${WORK_DIR}/docs-build)
set(args -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${PREFIX}
    -DKILN_SOURCE_DIR=${SOURCE_DIR} -DCMAKE_BUILD_TYPE=)
if(CXX_LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
# The blocks build with an empty build type, CMake's default (no optimization, assertions on):
# whether a block compiles and what its program prints do not depend on the optimizer,
# which took a third of this test's time at -O3 (Kiln's own code comes optimized from the
# installed libraries).
run("configuring the docs' blocks" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/docs/project -B ${build} ${args})
run("compiling the docs' blocks" ${CMAKE_COMMAND} --build ${build} -j ${JOBS})
run("running the docs' programs" ${CMAKE_CTEST_COMMAND} --test-dir ${build} --output-on-failure -j ${JOBS})
