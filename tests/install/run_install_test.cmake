# Runs one step of the install test (cmake -P, driven by tests/install/CMakeLists.txt):
#   STEP=install     cmake --install the build into a staging prefix, move it elsewhere
#                    (relocatable package), check the exported targets leak nothing private
#   STEP=consumer    configure + build tests/install/consumer against the moved prefix, run
#                    it from its build tree and from its own install tree
#   STEP=components  find_package(Kiln) with a missing component or version must fail
#                    with a clear message; without COMPONENTS it loads every backend
cmake_minimum_required(VERSION 3.25)

set(prefix ${WORK_DIR}/prefix)
set(ENV{LC_ALL} C)
unset(ENV{LD_LIBRARY_PATH})  # the consumer must find libkiln_cpu.so through its RUNPATH

function(fail)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR "install test (${STEP}): ${text}")
endfunction()

# run(<output var> <command...>): runs a command, fails the test on a non-zero exit code.
function(run out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT rc EQUAL 0)
    string(JOIN " " command ${ARGN})
    fail("`${command}` failed (${rc}):\n${output}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

set(generator_args -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
if(CXX_LAUNCHER)
  list(APPEND generator_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
if(KILN_CONFIG)
  list(APPEND generator_args -DCMAKE_BUILD_TYPE=${KILN_CONFIG})
endif()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${WORK_DIR})
  set(staging ${WORK_DIR}/staging)
  set(config_args "")
  if(KILN_CONFIG)
    set(config_args --config ${KILN_CONFIG})
  endif()
  run(output ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${staging} ${config_args})
  # Nothing in the package may remember where it was installed.
  file(RENAME ${staging} ${prefix})

  file(GLOB_RECURSE config_dirs LIST_DIRECTORIES true ${prefix}/*/Kiln)
  list(FILTER config_dirs INCLUDE REGEX "/cmake/Kiln$")
  if(NOT config_dirs)
    fail("no <prefix>/.../cmake/Kiln directory was installed")
  endif()
  list(GET config_dirs 0 config_dir)
  foreach(file KilnConfig.cmake KilnConfigVersion.cmake KilnCoreTargets.cmake KilnCpuTargets.cmake)
    if(NOT EXISTS ${config_dir}/${file})
      fail("${config_dir}/${file} was not installed")
    endif()
  endforeach()
  file(GLOB package_files ${config_dir}/*.cmake)
  foreach(file IN LISTS package_files)
    file(READ ${file} text)
    string(FIND "${text}" "${staging}" at)
    if(NOT at EQUAL -1)
      fail("${file} contains the absolute install path ${staging}: the package is not relocatable")
    endif()
  endforeach()

  # Each backend is a shared library whose dependencies and flags are private: its
  # exported interface must be its include dir, kiln::core and the libraries its consumers
  # get with it (kiln::store, kiln::data, kiln::train, and its compiled instances
  # kiln::<name>_instances, whose own interface is the backend), nothing more.
  # check_exported(<Name> <target> <interface link libraries> <words that must not appear>...)
  function(check_exported name target interface)
    file(READ ${config_dir}/Kiln${name}Targets.cmake targets)
    # The one definition an instances library gives its consumers on purpose: where it holds
    # onnx::Model over its backend, kiln/onnx/model.hpp reads it to declare those extern.
    string(REGEX REPLACE "INTERFACE_COMPILE_DEFINITIONS \"KILN_ONNX_INSTANCES_[A-Z]+\"\n" "" targets "${targets}")
    string(TOLOWER "${targets}" targets_lower)
    foreach(leak ${ARGN} interface_compile_options interface_compile_definitions interface_link_options)
      string(FIND "${targets_lower}" "${leak}" at)
      if(NOT at EQUAL -1)
        fail("Kiln${name}Targets.cmake mentions '${leak}': a private dependency or flag leaks to consumers:\n${targets}")
      endif()
    endforeach()
    string(FIND "${targets}" "INTERFACE_LINK_LIBRARIES \"${interface}\"\n" at)
    if(at EQUAL -1)
      fail("${target} should link only ${interface} in its interface:\n${targets}")
    endif()
  endfunction()
  check_exported(Cpu kiln::cpu "kiln::core;kiln::store;kiln::data;kiln::train;kiln::cpu_instances" march fopenmp
                 openmp eigen dnnl)
  check_exported(Cpu kiln::cpu_instances "kiln::cpu")
  # kiln::store (weights I/O), kiln::data (datasets and readers) and kiln::train (the
  # training loop's compiled parts) are exported with kiln::core and depend on nothing
  # else: zlib, stb_image and threads stay private.
  check_exported(Core "kiln::store, kiln::data and kiln::train" "kiln::core" zlib libstb threads)
  file(READ ${config_dir}/KilnCoreTargets.cmake core_targets)
  if(NOT core_targets MATCHES "kiln::train" OR NOT core_targets MATCHES "INTERFACE_LINK_LIBRARIES \"kiln::store\"\n")
    fail("KilnCoreTargets.cmake should define kiln::train, linking only kiln::store:\n${core_targets}")
  endif()
  if(VULKAN_BUILT)
    check_exported(Vulkan kiln::vulkan "kiln::core;kiln::store;kiln::data;kiln::train;kiln::vulkan_instances" glslang
                   spirv libvulkan vulkan::vulkan)
    check_exported(Vulkan kiln::vulkan_instances "kiln::vulkan")
  endif()
  # The CUDA runtime (linked statically), cuBLAS and NVRTC stay inside libkiln_cuda.
  if(CUDA_BUILT)
    check_exported(Cuda kiln::cuda "kiln::core;kiln::store;kiln::data;kiln::train;kiln::cuda_instances" cudart cublas
                   nvrtc)
    check_exported(Cuda kiln::cuda_instances "kiln::cuda")
  endif()
  if(ROCM_BUILT)
    check_exported(Rocm kiln::rocm "kiln::core;kiln::store;kiln::data;kiln::train;kiln::rocm_instances" amdhip64 hiprtc)
    check_exported(Rocm kiln::rocm_instances "kiln::rocm")
  endif()
  # kiln::dist: MPI stays inside libkiln_dist (consumers need no MPI package).
  if(DIST_BUILT)
    check_exported(Dist kiln::dist "kiln::core;kiln::data" mpi)
  endif()
  # An installed library finds the other Kiln libraries it needs (libkiln_train needs
  # libkiln_store) beside itself, wherever the prefix is: its RUNPATH is $ORIGIN and nothing
  # else (a program's own RUNPATH does not serve its libraries' dependencies, and a linker
  # with --as-needed leaves libkiln_store out of a program that calls only kiln::train).
  # Its other dependencies live in the system's library dirs.
  file(GLOB libraries ${prefix}/*/libkiln_cpu.so.*.*.* ${prefix}/*/libkiln_vulkan.so.*.*.*
       ${prefix}/*/libkiln_cpu_instances.so.*.*.* ${prefix}/*/libkiln_vulkan_instances.so.*.*.*
       ${prefix}/*/libkiln_store.so.*.*.* ${prefix}/*/libkiln_data.so.*.*.* ${prefix}/*/libkiln_train.so.*.*.*
       ${prefix}/*/libkiln_dist.so.*.*.*)
  foreach(library kiln_cpu kiln_cpu_instances kiln_store kiln_data kiln_train)
    if(NOT libraries MATCHES "lib${library}\\.so\\.")
      fail("lib${library}.so.<version> was not installed")
    endif()
  endforeach()
  foreach(library IN LISTS libraries)
    file(READ_ELF ${library} RPATH rpath RUNPATH runpath)
    if(rpath OR NOT runpath STREQUAL "$ORIGIN")
      fail("${library} has RPATH '${rpath}' and RUNPATH '${runpath}'; the installed library should have RUNPATH "
           "$ORIGIN only")
    endif()
  endforeach()
  message(STATUS "installed and relocated to ${prefix}; the backends' targets export no private flags")

elseif(STEP STREQUAL "consumer")
  set(build ${WORK_DIR}/consumer-build)
  set(installed ${WORK_DIR}/consumer-install)
  file(REMOVE_RECURSE ${build} ${installed})
  run(output ${CMAKE_COMMAND} -S ${TESTS_DIR}/consumer -B ${build} ${generator_args}
      -DCMAKE_INSTALL_PREFIX=${installed})
  run(output ${CMAKE_COMMAND} --build ${build})
  run(output ${CMAKE_COMMAND} --install ${build})

  # GLOB_RECURSE also finds <build>/<config>/kiln_consumer of multi-config generators.
  file(GLOB_RECURSE apps ${build}/kiln_consumer)
  if(NOT apps)
    fail("the consumer build produced no kiln_consumer")
  endif()
  list(GET apps 0 app)
  file(GLOB library_dirs LIST_DIRECTORIES true ${prefix}/lib*)
  set(expected_level "")
  string(REPLACE "," ";" CPU_LEVELS "${CPU_LEVELS}")
  if(EXISTS /proc/cpuinfo AND CPU_LEVELS)
    file(STRINGS /proc/cpuinfo flags REGEX "^flags" LIMIT_COUNT 1)
    set(v4 avx512f avx512bw avx512cd avx512dq avx512vl)
    set(v3 avx avx2 bmi1 bmi2 f16c fma abm movbe)
    foreach(level x86-64-v3 x86-64-v4)
      string(REPLACE "x86-64-" "" short ${level})
      set(has TRUE)
      foreach(flag IN LISTS ${short})
        if(NOT flags MATCHES " ${flag}( |$)")
          set(has FALSE)
        endif()
      endforeach()
      if(has AND level IN_LIST CPU_LEVELS)
        set(expected_level ${level})
      endif()
    endforeach()
  endif()
  foreach(program ${app} ${installed}/bin/kiln_consumer)
    # Both the build-tree and the installed consumer find libkiln_{cpu,store,train}.so through their
    # RUNPATH (CMake's build RPATH, and CMAKE_INSTALL_RPATH_USE_LINK_PATH on install).
    file(READ_ELF ${program} RPATH rpath RUNPATH runpath)
    message(STATUS "${program}: RUNPATH ${runpath}${rpath}")
    string(FIND "${runpath}${rpath}" "${prefix}/lib" at)
    if(at EQUAL -1)
      fail("${program} has no RUNPATH to ${prefix}/lib (it has '${runpath}${rpath}')")
    endif()
    run(output ${program})
    if(NOT output MATCHES "kiln consumer: ok")
      fail("${program} ran but printed:\n${output}")
    endif()
    # The loader picked the highest instruction set installed that this CPU has
    # (lib/glibc-hwcaps/<level>/libkiln_cpu.so, docs/design.md).
    if(expected_level AND NOT output MATCHES "cpu kernels ${expected_level}\n")
      fail("${program} runs the CPU kernels of another level than ${expected_level}:\n${output}")
    endif()
  endforeach()
  message(STATUS "consumer output:\n${output}")

elseif(STEP STREQUAL "components")
  # check(<name> <expected result: ok|fail> <message regex> <find_package arguments...>)
  function(check name expect regex)
    set(build ${WORK_DIR}/components-${name})
    file(REMOVE_RECURSE ${build})
    string(REPLACE ";" " " arguments "${ARGN}")
    execute_process(
      COMMAND ${CMAKE_COMMAND} -S ${TESTS_DIR}/components -B ${build} -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${prefix}
              "-DFIND_ARGS=${arguments}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
    if(expect STREQUAL "ok" AND NOT rc EQUAL 0)
      fail("find_package(Kiln ${arguments}) should succeed:\n${output}")
    elseif(expect STREQUAL "fail" AND rc EQUAL 0)
      fail("find_package(Kiln ${arguments}) should fail:\n${output}")
    endif()
    if(NOT output MATCHES "${regex}")
      fail("find_package(Kiln ${arguments}): output lacks /${regex}/:\n${output}")
    endif()
    message(STATUS "find_package(Kiln ${arguments}): ${expect} as expected")
  endfunction()

  # The vulkan component exists where this build had its packages; else it names them.
  if(VULKAN_BUILT)
    check(vulkan ok "targets: kiln::core kiln::cpu kiln::vulkan" 0.1 REQUIRED COMPONENTS cpu vulkan)
    check(all ok "targets: kiln::core kiln::cpu kiln::vulkan" 0.1 REQUIRED)
    check(optional ok "targets: kiln::core kiln::cpu kiln::vulkan" 0.1 REQUIRED COMPONENTS cpu
          OPTIONAL_COMPONENTS vulkan)
  else()
    check(vulkan fail "vulkan: needs " 0.1 REQUIRED COMPONENTS cpu vulkan)
    check(all ok "targets: kiln::core kiln::cpu" 0.1 REQUIRED)
    check(optional ok "targets: kiln::core kiln::cpu" 0.1 REQUIRED COMPONENTS cpu OPTIONAL_COMPONENTS vulkan)
  endif()
  # The cuda component exists where this build found the CUDA toolkit; else it says so.
  if(CUDA_BUILT)
    check(cuda ok "targets: kiln::core kiln::cpu kiln::cuda" 0.1 REQUIRED COMPONENTS cpu cuda)
  else()
    check(cuda fail "cuda: needs the CUDA toolkit" 0.1 REQUIRED COMPONENTS cpu cuda)
  endif()
  if(ROCM_BUILT)
    check(rocm ok "targets: kiln::core kiln::cpu kiln::rocm" 0.1 REQUIRED COMPONENTS cpu rocm)
  else()
    check(rocm fail "rocm: needs HIP" 0.1 REQUIRED COMPONENTS cpu rocm)
  endif()
  # The dist component (distributed training) exists where this build found MPI; kiln::kiln
  # does not link it.
  if(DIST_BUILT)
    check(dist ok "targets: kiln::core kiln::cpu kiln::dist" 0.1 REQUIRED COMPONENTS cpu dist)
  else()
    check(dist fail "dist: (needs MPI|disabled)" 0.1 REQUIRED COMPONENTS cpu dist)
  endif()
  check(metal fail "metal: not part of this version yet" 0.1 REQUIRED COMPONENTS cpu metal)
  check(unknown fail "'tpu' is not a Kiln backend" 0.1 REQUIRED COMPONENTS tpu)
  check(version fail "KilnConfig.cmake, version: 0\\.1\\.0" 0.2 REQUIRED COMPONENTS cpu)

else()
  fail("unknown STEP '${STEP}'")
endif()
