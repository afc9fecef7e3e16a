// The backends the conformance suite runs on. A backend added to Kiln is added here
// (under its build option) and every typed test runs on it.
#pragma once

#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

namespace kiln::test {

using Backends = ::testing::Types<kiln::Cpu>;

// Names each instantiation after its backend ("cpu", ...) in test output.
struct BackendNames {
  template <class B> static std::string GetName(int) { return std::string(B::name); }
};

}  // namespace kiln::test

// KILN_BACKEND_TEST_SUITE(Suite): declares a typed suite over every backend.
#define KILN_BACKEND_TEST_SUITE(Suite)                      \
  template <class B> class Suite : public ::testing::Test {}; \
  TYPED_TEST_SUITE(Suite, ::kiln::test::Backends, ::kiln::test::BackendNames)
