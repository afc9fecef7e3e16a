# kiln_docs_extract(<page.md> <out dir> <prefix var>): writes every C++ block of a Markdown
# page (a fence opened by a line "```cpp") to <out dir>, each file starting with a #line
# directive so that a compiler error names the page and its line. Sets, in the caller:
#   <prefix>_BLOCKS    the standalone blocks' files (<page>_<n>.cpp, n counting every block)
#   <prefix>_MAIN      those of them that define main()
#   <prefix>_NAMED     files of named blocks: a block whose first line is a comment naming a
#                      file ("// model.hpp", "// main.cpp") is written under that name, in
#                      <out dir>/<page>/, so that the page's other named blocks include it
#   <prefix>_FRAGMENTS how many blocks are fenced "```cpp fragment": a piece of code shown
#                      out of its context (a member of a Kiln class); they are not compiled
#   <prefix>_TARGETS   the link targets the page shows in a target_link_libraries(... PRIVATE
#                      ...) line; empty when it shows none
# Plain CMake string operations: the text is never treated as a list, so its semicolons
# and brackets pass through unchanged.
function(kiln_docs_extract page out_dir prefix)
  get_filename_component(name ${page} NAME_WE)
  string(TOLOWER "${name}" name)
  file(READ ${page} text)
  set(blocks "")
  set(mains "")
  set(named "")
  set(fragments 0)
  set(count 0)
  set(consumed "")  # the text before `rest`, for line numbers
  set(rest "\n${text}")
  while(TRUE)
    string(FIND "${rest}" "\n```cpp" at)
    if(at EQUAL -1)
      break()
    endif()
    math(EXPR fence "${at} + 1")
    string(SUBSTRING "${rest}" 0 ${fence} before)
    string(APPEND consumed "${before}")
    string(SUBSTRING "${rest}" ${fence} -1 rest)
    string(FIND "${rest}" "\n" end_of_fence)
    if(end_of_fence EQUAL -1)
      message(FATAL_ERROR "${page}: a ```cpp fence at the end of the file")
    endif()
    string(SUBSTRING "${rest}" 0 ${end_of_fence} info)
    math(EXPR body_start "${end_of_fence} + 1")
    string(SUBSTRING "${rest}" 0 ${body_start} fence_line)
    string(APPEND consumed "${fence_line}")
    string(SUBSTRING "${rest}" ${body_start} -1 rest)
    string(FIND "${rest}" "\n```" close)
    if(close EQUAL -1)
      message(FATAL_ERROR "${page}: a ```cpp block is never closed")
    endif()
    math(EXPR close "${close} + 1")
    string(SUBSTRING "${rest}" 0 ${close} body)
    math(EXPR count "${count} + 1")
    # The page's line of the block's first line: newlines before it, plus one.
    string(REGEX MATCHALL "\n" newlines "${consumed}")
    list(LENGTH newlines line)
    math(EXPR line "${line}")  # consumed starts with the "\n" added above
    string(APPEND consumed "${body}")
    string(SUBSTRING "${rest}" ${close} -1 rest)

    if(info MATCHES "^```cpp fragment")
      math(EXPR fragments "${fragments} + 1")
      continue()
    elseif(NOT info STREQUAL "```cpp")
      message(FATAL_ERROR "${page}:${line}: unknown fence '${info}': use ```cpp or ```cpp fragment")
    endif()
    set(directive "#line ${line} \"${page}\"\n")
    if(body MATCHES "^// ([A-Za-z0-9_.-]+\\.(hpp|cpp))\n")
      set(file ${out_dir}/${name}/${CMAKE_MATCH_1})
      file(WRITE ${file} "${directive}${body}")
      list(APPEND named ${file})
    else()
      set(file ${out_dir}/${name}_${count}.cpp)
      file(WRITE ${file} "${directive}${body}")
      list(APPEND blocks ${file})
      if(body MATCHES "(^|\n)int main\\(")
        list(APPEND mains ${file})
      endif()
    endif()
  endwhile()

  set(targets "")
  string(REGEX MATCHALL "target_link_libraries\\([A-Za-z0-9_]+ PRIVATE [^)]*\\)" links "${text}")
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^target_link_libraries\\([A-Za-z0-9_]+ PRIVATE ([^)]*)\\)$" "\\1" link "${link}")
    separate_arguments(link UNIX_COMMAND "${link}")
    list(APPEND targets ${link})
  endforeach()
  list(REMOVE_DUPLICATES targets)

  set(${prefix}_BLOCKS ${blocks} PARENT_SCOPE)
  set(${prefix}_MAIN ${mains} PARENT_SCOPE)
  set(${prefix}_NAMED ${named} PARENT_SCOPE)
  set(${prefix}_FRAGMENTS ${fragments} PARENT_SCOPE)
  set(${prefix}_TARGETS ${targets} PARENT_SCOPE)
endfunction()
