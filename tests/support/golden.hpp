// Golden fixtures: reads the tensors that tests/golden/generate.py wrote with PyTorch,
// and compares Kiln results with them.
//
// File format (text, one file per op family, tests/golden/<family>.golden):
//   case <name>
//   tensor <label> <dtype> <rank> <dims...> : <values...>
//   ...
// Values are decimal (nan, inf, -inf allowed); bools are 0/1.
#pragma once

#include <kiln/tensor.hpp>

#include "expect_error.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace kiln::test {

struct GoldenCase {
  std::string name;
  std::map<std::string, TensorData> tensors;

  const TensorData& operator[](const std::string& label) const;
  // The labelled tensor as a Tensor of rank D and kind K on backend B.
  // The labelled tensor as a Tensor of rank D and kind K on backend B, in its fixture dtype or in `dtype`.
  template <class B, std::size_t D, class K = Float> Tensor<B, D, K> tensor(const std::string& label) const {
    return Tensor<B, D, K>::from_data((*this)[label]);
  }
  template <class B, std::size_t D, class K = Float>
  Tensor<B, D, K> tensor(const std::string& label, DType dtype) const {
    return Tensor<B, D, K>::from_data((*this)[label].convert(dtype));
  }
};

// The named case of tests/golden/<family>.golden; fails the test (throws) when missing.
const GoldenCase& golden(const std::string& family, const std::string& name);

// The names of every case in tests/golden/<family>.golden, sorted.
std::vector<std::string> golden_case_names(const std::string& family);

// Checks shape, kind and values (|a - e| <= atol + rtol |e|; NaNs must match NaNs).
::testing::AssertionResult all_close(const TensorData& actual, const TensorData& expected, double rtol = 1e-5,
                                     double atol = 1e-6);

template <class B, std::size_t D, class K>
::testing::AssertionResult all_close(const Tensor<B, D, K>& actual, const TensorData& expected, double rtol = 1e-5,
                                     double atol = 1e-6) {
  return all_close(actual.into_data(), expected, rtol, atol);
}

}  // namespace kiln::test

// EXPECT_CLOSE(tensor, golden_data[, rtol, atol])
#define EXPECT_CLOSE(actual, ...) EXPECT_TRUE(::kiln::test::all_close(actual, __VA_ARGS__))
