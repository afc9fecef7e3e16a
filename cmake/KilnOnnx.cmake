# kiln_onnx_generate(<target> <model.onnx> [NAME <Name>] [NAMESPACE <ns>] [EMBED] [RUNTIME <lib>]): the model as
# a Kiln module, generated at build time by kiln-onnx2cpp (docs/onnx.md). Writes <Name>.hpp
# (the module type <ns>::<Name><B>) and <Name>.safetensors (its weights, under the module's
# field names) into ${CMAKE_CURRENT_BINARY_DIR}/kiln_onnx/<target>/, puts that folder on
# <target>'s include path and links the library that holds the graph's helpers: kiln::onnx,
# or RUNTIME's (kiln::cpu_embedded, which compiles them in). The weights file's path is the compile
# definition KILN_ONNX_<NAME>_WEIGHTS (for nn::load). With EMBED the weights are also compiled
# into <target> (<ns>::<Name>_weights() returns their bytes: load them with
# nn::load_state_dict(module, store::SafetensorsFile::from_memory(...).load_all())).
# <Name> defaults to the model file's name made an identifier.
function(kiln_onnx_generate target model)
  cmake_parse_arguments(PARSE_ARGV 2 arg "EMBED" "NAME;NAMESPACE;RUNTIME" "")
  if(NOT arg_RUNTIME)
    set(arg_RUNTIME kiln::onnx)
  endif()
  get_filename_component(model "${model}" ABSOLUTE)
  if(NOT arg_NAME)
    get_filename_component(arg_NAME "${model}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${arg_NAME}" arg_NAME)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/kiln_onnx/${target})
  set(outputs ${dir}/${arg_NAME}.hpp ${dir}/${arg_NAME}.safetensors)
  set(flags "")
  if(arg_NAMESPACE)
    list(APPEND flags --namespace ${arg_NAMESPACE})
  endif()
  if(arg_EMBED)
    list(APPEND flags --embed)
    list(APPEND outputs ${dir}/${arg_NAME}_weights.cpp)
  endif()
  add_custom_command(OUTPUT ${outputs}
    COMMAND kiln::onnx2cpp ${model} ${dir} ${arg_NAME} ${flags}
    DEPENDS ${model} kiln::onnx2cpp
    COMMENT "kiln-onnx2cpp: ${arg_NAME} from ${model}" VERBATIM)
  target_sources(${target} PRIVATE ${outputs})
  target_include_directories(${target} PRIVATE ${dir})
  target_link_libraries(${target} PRIVATE ${arg_RUNTIME})
  string(TOUPPER "${arg_NAME}" upper)
  target_compile_definitions(${target} PRIVATE "KILN_ONNX_${upper}_WEIGHTS=\"${dir}/${arg_NAME}.safetensors\"")
endfunction()
