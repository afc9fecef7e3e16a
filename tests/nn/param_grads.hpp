// The nn golden tests' parameter check: every trainable parameter of a module has a gradient
// after backward, equal (within `tol`) to the golden case's "d.<path>", reshaped to the
// parameter's shape.
#pragma once

#include "golden.hpp"

#include <kiln/nn/module.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kiln::test {

template <class M, class Grads> void expect_param_grads(const M& module, const Grads& grads, const GoldenCase& c, double tol) {
  nn::for_each_param(module, [&](const std::string& path, const auto& p) {
    const auto g = p->grad(grads);
    ASSERT_TRUE(g.has_value()) << "no gradient for " << path;
    EXPECT_CLOSE(*g, c["d." + path].reshaped(p->shape()), tol, tol) << path;
  });
}

}  // namespace kiln::test
