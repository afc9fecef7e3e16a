# One must-not-compile check (cmake -P; see tests/compile_fail/CMakeLists.txt).
#   MODE=fail:    SOURCE must fail to compile, with an error on its "must not compile" line,
#                 and the output must match every "// expected-error: <regex>" of SOURCE.
#   MODE=control: SOURCE with -DKILN_CONTROL must compile.
cmake_minimum_required(VERSION 3.25)
set(ENV{LC_ALL} C)  # plain ASCII quotes in diagnostics

file(STRINGS ${FLAGS_FILE} flags)
list(FILTER flags EXCLUDE REGEX "^$")
get_filename_component(file_name ${SOURCE} NAME)

set(command ${COMPILER} ${flags} -fsyntax-only)
if(MODE STREQUAL "control")
  list(APPEND command -DKILN_CONTROL)
endif()
list(APPEND command ${SOURCE})
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
string(JOIN " " command_text ${command})

if(MODE STREQUAL "control")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${file_name} with -DKILN_CONTROL should compile but does not:\n${command_text}\n${output}")
  endif()
  message(STATUS "${file_name} with -DKILN_CONTROL compiles")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "${file_name} compiled, but the type system should reject it:\n${command_text}")
endif()

# The error must be reported on the marked line.
file(STRINGS ${SOURCE} lines)
set(line_number 0)
set(marked 0)
foreach(line IN LISTS lines)
  math(EXPR line_number "${line_number} + 1")
  if(line MATCHES "// must not compile$")
    set(marked ${line_number})
  endif()
endforeach()
if(marked EQUAL 0)
  message(FATAL_ERROR "${file_name} has no line ending in '// must not compile'")
endif()
# A failed consteval check (a KILN_CHECK message) is reported by GCC inside the consteval
# function, with the marked line named by its "in 'constexpr' expansion of" note; a failed
# static_assert inside a macro (KILN_MODULE's field check) names the marked line in an
# "in expansion of macro" note (GCC) or an "expanded from macro" one (Clang); a failed
# static_assert in a class template names the marked line where it is instantiated
# ("required from here" in GCC, "in instantiation of" in Clang).
if(NOT output MATCHES "${file_name}:${marked}:[0-9]+: +(error|in 'constexpr' expansion of|note: in expansion of macro|note: expanded from macro|required from here|note: in instantiation of)")
  message(FATAL_ERROR "${file_name} failed to compile, but not with an error on line ${marked}:\n${output}")
endif()

file(STRINGS ${SOURCE} expectations REGEX "^// expected-error: ")
if(NOT expectations)
  message(FATAL_ERROR "${file_name} has no '// expected-error: <regex>' line")
endif()
foreach(expectation IN LISTS expectations)
  string(REGEX REPLACE "^// expected-error: " "" regex "${expectation}")
  if(NOT output MATCHES "${regex}")
    message(FATAL_ERROR "${file_name} failed to compile, but the diagnostic does not match /${regex}/:\n${output}")
  endif()
endforeach()
message(STATUS "${file_name} is rejected on line ${marked} as expected")
