// Compiles a GLSL compute shader with glslc for Vulkan 1.1, as the codegen tests check the
// text the Vulkan backend would compile. Only where CMake found glslc (KILN_GLSLC).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace kiln::codegen::test {

#ifdef KILN_GLSLC
// Success, or glslc's messages and the source. `name` names the scratch files.
inline ::testing::AssertionResult compiles_with_glslc(const std::string& source, const std::string& name) {
  const std::string path = ::testing::TempDir() + "kiln_" + name + ".comp", log = path + ".log";
  std::ofstream(path) << source;
  const std::string command = fmt::format(
      "\"{}\" --target-env=vulkan1.1 -fshader-stage=compute \"{}\" -o \"{}.spv\" > \"{}\" 2>&1", KILN_GLSLC, path, path,
      log);
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "glslc failed (" << status << "):\n" << output << "\n" << source;
}
#endif

}  // namespace kiln::codegen::test
