// The tensors tests/golden/gen_store.py writes into tests/golden/store/, built again
// here: the readers must reproduce them bit for bit.
#pragma once

#include <kiln/store/named_tensors.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace kiln::store::test {

template <class T> TensorData values(std::vector<T> values, Shape shape) {
  return TensorData::from(values, std::move(shape));
}

// gen_store.py: plain_tensors(), in its order (also the content of python.safetensors).
inline NamedTensors plain_tensors() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  NamedTensors t;
  std::vector<float> f32;
  for (int i = 0; i < 12; ++i) f32.push_back(static_cast<float>(i) * 0.5f - 2.f);
  t.insert("f32", values(f32, {3, 4}));
  t.insert("f64", values<double>({-1.25, 0.0, 1e300, 5e-324, -0.0, std::numbers::pi}, {2, 3}));
  t.insert("f16", values<Half>({Half(1.5f), Half(-2.f), Half(65504.f), Half(std::ldexp(1.f, -14)),
                                Half(std::ldexp(1.f, -24)), Half(inf)},
                               {6}));
  t.insert("bf16", values<BFloat16>({BFloat16(1.f), BFloat16(-0.5f), BFloat16(256.f), BFloat16(std::ldexp(1.f, -130)),
                                     BFloat16(-inf)},
                                    {5}));
  t.insert("i32",
           values<std::int32_t>(
               {std::numeric_limits<std::int32_t>::min(), -1, 0, std::numeric_limits<std::int32_t>::max()}, {4}));
  t.insert("i64",
           values<std::int64_t>(
               {std::numeric_limits<std::int64_t>::min(), -1, 0, std::numeric_limits<std::int64_t>::max()}, {2, 2}));
  t.insert("u8", values<std::uint8_t>({0, 1, 127, 255}, {4}));
  t.insert("bool", values<bool>({true, false, true}, {3}));
  t.insert("scalar", values<float>({7.25f}, {}));
  t.insert("empty", values<float>({}, {0, 3}));
  return t;
}

// gen_store.py: state_dict(), the content of state_dict.pt and zip64.pt: the plain
// tensors, then views, materialized.
inline NamedTensors state_dict_tensors() {
  NamedTensors t = plain_tensors();
  t.insert("transposed", values<float>({0, 3, 1, 4, 2, 5}, {3, 2}));
  const auto whole = values<std::int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  t.insert("shared.whole", whole);
  t.insert("shared.slice", values<std::int64_t>({2, 3, 4, 5, 6}, {5}));
  t.insert("shared.strided", values<std::int64_t>({1, 4, 7}, {3}));
  t.insert("shared.again", whole);
  t.insert("expanded", values<float>({1, 2, 1, 2, 1, 2}, {3, 2}));
  t.insert("param", values<float>({0.5f, 0.5f}, {2}));
  return t;
}

}  // namespace kiln::store::test
