// The backends the conformance suite runs on. A backend added to Kiln is added here
// (under its build option), bare and under each decorator, and every typed test runs on it.
#pragma once

#include <kiln/kiln.hpp>
#if defined(KILN_CONFORMANCE_VULKAN)
#include <kiln/vulkan/backend.hpp>
#endif

#include <gtest/gtest.h>

namespace kiln::test {

// The hardware backends that were built; Autodiff's own tests wrap each of them.
using HardwareBackends = ::testing::Types<kiln::Cpu>;
// What the conformance suite runs on: every hardware backend and every decorator over it.
// The Vulkan backend joins with -DKILN_CONFORMANCE_VULKAN=ON while it is being completed.
#if defined(KILN_CONFORMANCE_VULKAN)
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>, kiln::Vulkan>;
#else
using Backends = ::testing::Types<kiln::Cpu, kiln::Autodiff<kiln::Cpu>>;
#endif

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
#define KILN_BACKEND_TEST_SUITE(Suite)                      \
  template <class B> class Suite : public ::testing::Test {}; \
  TYPED_TEST_SUITE(Suite, ::kiln::test::Backends, ::kiln::test::BackendNames)
