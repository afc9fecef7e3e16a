// The backends the conformance suite runs on. A backend added to Kiln is added here
// (under its build option), bare and under each decorator, and every typed test runs on it.
#pragma once

#include <kiln/cpu/instances.hpp>
#include <kiln/tensor.hpp>
#if defined(KILN_TEST_VULKAN)
#include <kiln/vulkan/backend.hpp>
#include <kiln/vulkan/instances.hpp>
#endif
#if defined(KILN_TEST_CUDA)
#include <kiln/cuda/backend.hpp>
#include <kiln/cuda/instances.hpp>
#endif
#if defined(KILN_TEST_DISPATCH)
#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#endif
// The instances headers declare Autodiff over each backend and the nn building blocks
// extern: the tests call the copies compiled in the backends' libraries instead of
// compiling them again in every file.

#include <gtest/gtest.h>

#include <string>

namespace kiln::test {

// The hardware backends that were built; Autodiff's own tests wrap each of them.
// What the conformance suite runs on: every hardware backend and every decorator over it.
// The conformance binary adds kiln::Dispatch (and Autodiff over it), on the backend that
// KILN_BACKEND names (the CPU when unset): ctest runs its tests once per backend.
// The CUDA test binaries (tests/CMakeLists.txt: the same sources built with KILN_TEST_CUDA)
// run on Cuda and the decorators over it alone: the other backends' runs are the other
// binaries', and a machine with a GPU runs these.
#if defined(KILN_TEST_CUDA)
using HardwareBackends = ::testing::Types<kiln::Cuda>;
using Backends = ::testing::Types<kiln::Cuda, kiln::Autodiff<kiln::Cuda>, kiln::Fusion<kiln::Cuda>>;
#elif defined(KILN_TEST_VULKAN) && defined(KILN_TEST_DISPATCH)
using HardwareBackends = ::testing::Types<kiln::Cpu, kiln::Vulkan>;
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>, kiln::Vulkan, kiln::Autodiff<kiln::Vulkan>,
                                  kiln::Fusion<kiln::Cpu>, kiln::Autodiff<kiln::Fusion<kiln::Cpu>>, kiln::Fusion<kiln::Vulkan>,
                                  kiln::Dispatch, kiln::Autodiff<kiln::Dispatch>>;
#elif defined(KILN_TEST_VULKAN)
using HardwareBackends = ::testing::Types<kiln::Cpu, kiln::Vulkan>;
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>, kiln::Vulkan, kiln::Autodiff<kiln::Vulkan>,
                                  kiln::Fusion<kiln::Cpu>, kiln::Autodiff<kiln::Fusion<kiln::Cpu>>, kiln::Fusion<kiln::Vulkan>>;
#elif defined(KILN_TEST_DISPATCH)
using HardwareBackends = ::testing::Types<kiln::Cpu>;
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>, kiln::Fusion<kiln::Cpu>,
                                  kiln::Autodiff<kiln::Fusion<kiln::Cpu>>, kiln::Dispatch, kiln::Autodiff<kiln::Dispatch>>;
#else
using HardwareBackends = ::testing::Types<kiln::Cpu>;
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>, kiln::Fusion<kiln::Cpu>,
                                  kiln::Autodiff<kiln::Fusion<kiln::Cpu>>>;
#endif

// Why B cannot run here (empty when it can): a GPU backend whose device is missing.
template <class B> struct Availability {
  static std::string reason() { return {}; }
};
template <class Inner> struct Availability<kiln::Autodiff<Inner>> : Availability<Inner> {};
template <class Inner> struct Availability<kiln::Fusion<Inner>> : Availability<Inner> {};
#if defined(KILN_TEST_VULKAN)
template <> struct Availability<kiln::Vulkan> {
  static std::string reason() {
    const std::string why = kiln::vulkan::unavailable_reason();
    return why.empty() ? why : "no Vulkan device: " + why;
  }
};
#endif
#if defined(KILN_TEST_CUDA)
template <> struct Availability<kiln::Cuda> {
  static std::string reason() { return kiln::cuda::unavailable_reason(); }
};
#endif
#if defined(KILN_TEST_DISPATCH)
template <> struct Availability<kiln::Dispatch> {
  static std::string reason() { return kiln::dispatch::unavailable_reason({}); }
};
#endif

// The fixture of every suite over the backends: a test on a backend that cannot run here
// reports itself skipped, with the reason.
template <class B> class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = Availability<B>::reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
};

// Names each instantiation after its backend ("cpu", ...) in test output.
struct BackendNames {
  template <class B> static std::string GetName(int) { return std::string(B::name); }
};

namespace aliases {
// Comma-free names of tensor types, for use inside test macros.
template <class B> using Float1 = kiln::Tensor<B, 1>;
template <class B> using Float2 = kiln::Tensor<B, 2>;
template <class B> using Float3 = kiln::Tensor<B, 3>;
template <class B> using Int1 = kiln::Tensor<B, 1, kiln::Int>;
template <class B> using Int2 = kiln::Tensor<B, 2, kiln::Int>;
template <class B> using Int3 = kiln::Tensor<B, 3, kiln::Int>;
template <class B> using Bool1 = kiln::Tensor<B, 1, kiln::Bool>;
template <class B> using Bool2 = kiln::Tensor<B, 2, kiln::Bool>;
}  // namespace aliases

}  // namespace kiln::test

// KILN_BACKEND_TEST_SUITE(Suite): declares a typed suite over every backend.
#define KILN_BACKEND_TEST_SUITE(Suite)                                  \
  template <class B> class Suite : public ::kiln::test::BackendTest<B> {}; \
  TYPED_TEST_SUITE(Suite, ::kiln::test::Backends, ::kiln::test::BackendNames)
