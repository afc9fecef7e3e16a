// GLSL to SPIR-V with glslang's C interface (Debian's libshaderc does not link on its own
// against glslang 12, so Kiln calls glslang directly).
#include "glsl_compiler.hpp"

#include "kiln/core/error.hpp"

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>

#include <memory>
#include <mutex>
#include <sstream>

namespace kiln::vulkan {
namespace {

std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) out << n << ": " << line << "\n";
  return out.str();
}

}  // namespace

std::vector<std::uint32_t> compile_glsl_compute(const std::string& source) {
  static std::once_flag initialized;
  std::call_once(initialized, [] { glslang_initialize_process(); });

  glslang_input_t input{};
  input.language = GLSLANG_SOURCE_GLSL;
  input.stage = GLSLANG_STAGE_COMPUTE;
  input.client = GLSLANG_CLIENT_VULKAN;
  input.client_version = GLSLANG_TARGET_VULKAN_1_1;
  input.target_language = GLSLANG_TARGET_SPV;
  input.target_language_version = GLSLANG_TARGET_SPV_1_3;
  input.code = source.c_str();
  input.default_version = 450;
  input.default_profile = GLSLANG_NO_PROFILE;
  input.messages = GLSLANG_MSG_DEFAULT_BIT;
  input.resource = glslang_default_resource();

  std::unique_ptr<glslang_shader_t, decltype(&glslang_shader_delete)> shader(glslang_shader_create(&input),
                                                                             glslang_shader_delete);
  KILN_CHECK(shader != nullptr, "vulkan: glslang could not create a shader");
  if (!glslang_shader_preprocess(shader.get(), &input) || !glslang_shader_parse(shader.get(), &input)) {
    KILN_FAIL("vulkan: a generated kernel does not compile:\n{}\n{}", glslang_shader_get_info_log(shader.get()),
              numbered(source));
  }
  std::unique_ptr<glslang_program_t, decltype(&glslang_program_delete)> program(glslang_program_create(),
                                                                                glslang_program_delete);
  glslang_program_add_shader(program.get(), shader.get());
  if (!glslang_program_link(program.get(), GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT)) {
    KILN_FAIL("vulkan: a generated kernel does not link:\n{}\n{}", glslang_program_get_info_log(program.get()),
              numbered(source));
  }
  // glslang's default runs SPIRV-Tools' validator over its own output and only logs what it
  // finds, which nothing reads: it was more than half of a kernel's compile time on lavapipe.
  glslang_spv_options_t options{};
  options.disable_optimizer = true;
  options.validate = false;
  glslang_program_SPIRV_generate_with_options(program.get(), GLSLANG_STAGE_COMPUTE, &options);
  std::vector<std::uint32_t> words(glslang_program_SPIRV_get_size(program.get()));
  glslang_program_SPIRV_get(program.get(), words.data());
  return words;
}

}  // namespace kiln::vulkan
