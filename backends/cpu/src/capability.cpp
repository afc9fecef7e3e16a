// The instruction set the CPU backend was compiled for (backends/cpu/CMakeLists.txt builds
// the same sources once per level; the dynamic loader loads the highest one the CPU has).
#include "kiln/cpu/tensor.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#ifndef KILN_CPU_LEVEL
#error "backends/cpu/CMakeLists.txt defines KILN_CPU_LEVEL, the -march of this build"
#endif

namespace kiln::cpu {

std::string_view capability() { return KILN_CPU_LEVEL; }

#if KILN_CPU_ONEDNN
namespace {

// The glibc tunable that keeps the loader from choosing a level above `level`.
std::string_view tunable_below(std::string_view level) {
  if (level == "x86-64-v3") return "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F";
  if (level == "x86-64-v2") return "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-AVX512F";
  return {};
}

// KILN_CPU_CAPABILITY names the level a run expects. The loader has chosen before any of
// Kiln's code runs, so a level other than the one loaded is reported, with the setting that
// gets it, when the library loads.
[[maybe_unused]] const bool checked_at_load = [] {
  const char* wanted = std::getenv("KILN_CPU_CAPABILITY");
  if (wanted == nullptr || *wanted == '\0' || capability() == wanted) return true;
  const std::string_view tunable = tunable_below(wanted);
  if (tunable.empty()) {
    std::fprintf(stderr,
                 "kiln: KILN_CPU_CAPABILITY=%s is not a level this library can run at; the CPU kernels loaded are "
                 "%s (the levels: x86-64-v2, x86-64-v3, x86-64-v4)\n",
                 wanted, KILN_CPU_LEVEL);
  } else {
    std::fprintf(stderr,
                 "kiln: KILN_CPU_CAPABILITY=%s, but the dynamic loader chose the CPU kernels of %s when the program "
                 "started; start it with %s to run at %s\n",
                 wanted, KILN_CPU_LEVEL, tunable.data(), wanted);
  }
  return false;
}();

}  // namespace
#endif

}  // namespace kiln::cpu
