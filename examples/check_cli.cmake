# Runs an example with a command line and checks both its exit code and what it printed:
#
#   cmake -DPROGRAM=<path> -DARGS="--count -5" -DEXPECT_RC=2 -DEXPECT_REGEX="--count.*-5" -P check_cli.cmake
#
# ARGS is split like a shell command line. EXPECT_REGEX must match the stream the program
# should answer on: stdout when EXPECT_RC is 0 (the usage of --help), stderr otherwise (why
# the command line was refused). Used by the example.<name>.cli_* tests of CMakeLists.txt.
foreach(variable PROGRAM EXPECT_RC EXPECT_REGEX)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "check_cli.cmake: -D${variable}=... is required")
  endif()
endforeach()
separate_arguments(arguments UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${arguments} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 10)
set(command "${PROGRAM} ${ARGS}")
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "${command}: exit code ${rc}, expected ${EXPECT_RC}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(EXPECT_RC EQUAL 0)
  set(stream stdout)
  set(text "${out}")
else()
  set(stream stderr)
  set(text "${err}")
endif()
if(NOT text MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "${command}: ${stream} does not match \"${EXPECT_REGEX}\"\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "${command}: exit code ${rc}, ${stream} matches \"${EXPECT_REGEX}\"")
