// src/onnx/shape_rules.hpp (private to libkiln_onnx): what the shape rules of
// kiln::onnx::infer_shapes share. Dims with unknowns (-1) and the arithmetic on them, the
// known contents of small tensors, Context (what a rule reads of its node) and the
// InferredValue makers, the few helpers used by more than one rule file, and the
// declarations of the rules the table in src/onnx/shapes.cpp names; the rules themselves are
// in shape_rules_*.cpp, one file per group of the kernel files kiln/onnx/ops_*.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/onnx/shapes.hpp"

namespace kiln::onnx::shape_rules {

using Dims = std::vector<std::int64_t>;
using Outs = std::vector<InferredValue>;

constexpr std::int64_t kUnknown = -1;
// Contents are kept for tensors up to this many elements: enough for shapes, axes and
// scales, small enough that the weights of a model are not copied.
constexpr std::int64_t kValueLimit = 4096;

// ---------------------------------------------------------------- dims with unknowns

inline bool known(std::int64_t d) { return d >= 0; }
inline bool all_known(const Dims& dims) { return std::all_of(dims.begin(), dims.end(), known); }

// a * b where either may be unknown (a zero dim makes 0 whatever the other is).
inline std::int64_t times(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return known(a) && known(b) ? a * b : kUnknown;
}
inline std::int64_t plus(std::int64_t a, std::int64_t b) { return known(a) && known(b) ? a + b : kUnknown; }
inline std::int64_t product(std::span<const std::int64_t> dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n = times(n, d);
  return n;
}

// "[2, ?, 3]", for messages.
inline std::string text(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    out += (i ? ", " : "") + (known(dims[i]) ? std::to_string(dims[i]) : std::string("?"));
  return out + "]";
}

// The one size two dims that must agree have (a known one wins over an unknown one).
inline std::int64_t merge(std::int64_t a, std::int64_t b, std::string_view what) {
  KILN_CHECK(!known(a) || !known(b) || a == b, "{}: {} and {} differ", what, a, b);
  return known(a) ? a : b;
}

// NumPy's broadcast of two shapes; an unknown dim against a known one other than 1 is that one.
inline Dims broadcast(const Dims& a, const Dims& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t x = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const std::int64_t y = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    KILN_CHECK(!known(x) || !known(y) || x == y || x == 1 || y == 1, "shapes {} and {} do not broadcast", text(a),
               text(b));
    out[i] = x == 1 ? y : y == 1 ? x : known(x) ? x : y;
  }
  return out;
}

// An ONNX axis (negative counts from the end) as an index, checked.
inline std::size_t axis_of(std::int64_t axis, std::size_t rank, std::string_view what = "axis") {
  const auto r = static_cast<std::int64_t>(rank);
  KILN_CHECK(axis >= -r && axis < r, "{} {} is out of range for rank {}", what, axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}
inline std::vector<std::size_t> axes_of(const Dims& values, std::size_t rank) {
  std::vector<std::size_t> out;
  for (const std::int64_t a : values) {
    const std::size_t i = axis_of(a, rank, "axes entry");
    KILN_CHECK(std::find(out.begin(), out.end(), i) == out.end(), "axes name dim {} twice", i);
    out.push_back(i);
  }
  return out;
}
inline bool listed(const std::vector<std::size_t>& dims, std::size_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// ---------------------------------------------------------------- known contents

// The elements of `data` at positions index[d] along each dim d, as a tensor of dims
// [index[0].size(), index[1].size(), ...]: slicing, gathering and broadcasting in one.
inline TensorData take(const TensorData& data, const std::vector<Dims>& index) {
  const std::size_t size = dtype_size(data.dtype());
  Dims out_dims;
  for (const Dims& i : index) out_dims.push_back(static_cast<std::int64_t>(i.size()));
  const Shape out_shape(out_dims);
  const std::int64_t n = out_shape.numel();
  std::vector<std::byte> bytes(static_cast<std::size_t>(n) * size);
  const Strides strides = data.shape().contiguous_strides();
  Dims at(index.size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t from = 0;
    for (std::size_t d = 0; d < index.size(); ++d) from += index[d][static_cast<std::size_t>(at[d])] * strides[d];
    std::memcpy(bytes.data() + static_cast<std::size_t>(k) * size,
                data.bytes().data() + static_cast<std::size_t>(from) * size, size);
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++at[d] < out_dims[d]) break;
      at[d] = 0;
    }
  }
  return TensorData(std::move(bytes), out_shape, data.dtype());
}

inline Dims iota(std::int64_t n, std::int64_t start = 0, std::int64_t step = 1) {
  Dims out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = start + i * step;
  return out;
}

// data broadcast to `dims` (all known).
inline TensorData broadcast_value(const TensorData& data, const Dims& dims) {
  Dims padded(dims.size() - data.shape().rank(), 1);
  padded.insert(padded.end(), data.shape().begin(), data.shape().end());
  std::vector<Dims> index;
  for (std::size_t d = 0; d < dims.size(); ++d)
    index.push_back(padded[d] == 1 ? Dims(static_cast<std::size_t>(dims[d]), 0) : iota(dims[d]));
  return take(data.reshaped(Shape(padded)), index);
}

inline TensorData int_tensor(Dims values, Dims dims) { return TensorData::from(values, Shape(std::move(dims))); }

// ---------------------------------------------------------------- a node's inputs

// What a rule reads: its node, what is known of each input (nullptr where omitted), the opset.
struct Context {
  const Node& node;
  std::span<const InferredValue* const> inputs;
  std::int64_t opset;

  std::size_t size() const { return inputs.size(); }
  bool has(std::size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const InferredValue& in(std::size_t i) const {
    KILN_CHECK(has(i), "input {} is required and missing", i);
    return *inputs[i];
  }
  std::optional<DType> dtype(std::size_t i) const { return has(i) ? inputs[i]->dtype : std::nullopt; }
  const std::optional<Dims>& dims(std::size_t i) const { return in(i).dims; }
  // An optional input that is present and not empty (ONNX marks some omitted inputs with an empty tensor).
  bool given(std::size_t i) const { return has(i) && !(inputs[i]->dims && product(*inputs[i]->dims) == 0); }
  // An input's contents as integers (shapes, axes, sizes), when known.
  std::optional<Dims> ints(std::size_t i) const {
    if (!has(i) || !inputs[i]->value) return std::nullopt;
    return inputs[i]->value->to_vec<std::int64_t>();
  }
  std::optional<std::vector<double>> reals(std::size_t i) const {
    if (!has(i) || !inputs[i]->value) return std::nullopt;
    return inputs[i]->value->to_vec<double>();
  }
  // A one-element integer input (TopK's K, a window's size), when known.
  std::optional<std::int64_t> scalar(std::size_t i) const {
    const auto v = ints(i);
    if (!v) return std::nullopt;
    KILN_CHECK(v->size() == 1, "input {} must hold one value, got {} values", i, v->size());
    return v->front();
  }
  bool wants(std::size_t i) const { return i < node.outputs.size() && !node.outputs[i].empty(); }
};

// Integers from an attribute (older opsets) or an input (newer ones): absent, given but not
// known before running, or known.
struct Operand {
  bool given = false;
  std::optional<Dims> values;
};
inline Operand ints_from(const Context& c, std::string_view attribute, std::size_t input, std::int64_t input_since) {
  if (c.opset < input_since) {
    if (!c.node.find(attribute)) return {};
    return {true, c.node.attr_ints(attribute)};
  }
  if (!c.has(input)) return {};
  return {true, c.ints(input)};
}

inline InferredValue tensor(std::optional<DType> dtype, std::optional<Dims> dims) {
  return {dtype, std::move(dims), std::nullopt};
}
inline InferredValue known_value(TensorData data) { return {data.dtype(), data.shape().to_vector(), std::move(data)}; }
// A tensor of `rank` unknown dims, or of unknown rank.
inline InferredValue of_rank(std::optional<DType> dtype, std::optional<std::size_t> rank) {
  if (!rank) return tensor(dtype, std::nullopt);
  return tensor(dtype, Dims(*rank, kUnknown));
}
inline std::optional<std::size_t> rank_of(const std::optional<Dims>& dims) {
  return dims ? std::optional(dims->size()) : std::nullopt;
}

inline InferredValue from_tensor(const TensorValue& t) {
  InferredValue v{held_dtype_of(t.type), t.dims, std::nullopt};
  if (t.data) v.value = *t.data;
  return v;
}

// ---------------------------------------------------------------- used by more than one rule file

// The element type shared by inputs that must have one (Add's, Concat's...), checked.
inline std::optional<DType> same_dtype(const Context& c, std::size_t from = 0,
                                       std::size_t to = static_cast<std::size_t>(-1)) {
  std::optional<DType> dtype;
  for (std::size_t i = from; i < std::min(to, c.size()); ++i) {
    const auto d = c.dtype(i);
    if (!d) continue;
    KILN_CHECK(!dtype || *dtype == *d, "inputs {} and {} must have one element type, got {} and {}", from, i, *dtype,
               *d);
    if (!dtype) dtype = d;
  }
  return dtype;
}

inline std::optional<DType> held(std::int64_t onnx_type) { return held_dtype_of(static_cast<ElementType>(onnx_type)); }

inline Dims spatial_attr(const Node& node, std::string_view name, std::size_t count, std::int64_t fallback) {
  Dims v = node.attr_ints(name, Dims(count, fallback));
  KILN_CHECK(v.size() == count, "{} has {} entries, expected {}", name, v.size(), count);
  return v;
}

// ---------------------------------------------------------------- the rules

// Each takes what is known of a node's inputs and returns what follows for its outputs.

// Elementwise and layout (shape_rules_elementwise_layout.cpp)
Outs unary(const Context&);
Outs binary(const Context&);
Outs to_bool(const Context&);
Outs cast(const Context&);
Outs where(const Context&);
Outs identity(const Context&);
Outs reshape(const Context&);
Outs flatten(const Context&);
Outs transpose(const Context&);
Outs concat(const Context&);
Outs split(const Context&);
Outs slice(const Context&);
Outs squeeze(const Context&);
Outs unsqueeze(const Context&);
Outs shape(const Context&);
Outs size(const Context&);
Outs constant(const Context&);
Outs constant_of_shape(const Context&);
Outs expand(const Context&);
Outs tile(const Context&);
Outs pad(const Context&);
Outs depth_to_space(const Context&);
Outs same_as_input(const Context&);

// nn (shape_rules_nn.cpp)
Outs matmul(const Context&);
Outs gemm(const Context&);
Outs conv(const Context&);
Outs conv_transpose(const Context&);
Outs pool(const Context&);
Outs global_pool(const Context&);
Outs batch_norm(const Context&);
Outs layer_norm(const Context&);
Outs dropout(const Context&);
Outs recurrent(const Context&);
Outs resize(const Context&);

// Reductions and indexing (shape_rules_reduce.cpp)
Outs reduce(const Context&);
Outs arg_reduce(const Context&);
Outs top_k(const Context&);
Outs gather(const Context&);
Outs gather_elements(const Context&);
Outs gather_nd(const Context&);
Outs non_zero(const Context&);
Outs one_hot(const Context&);
Outs eye_like(const Context&);
Outs range(const Context&);
Outs det(const Context&);
Outs einsum(const Context&);

// Loss, signal, vision, misc (shape_rules_other.cpp)
Outs loss(const Context&);
Outs window_function(const Context&);
Outs dft(const Context&);
Outs stft(const Context&);
Outs grid_sample(const Context&);
Outs roi_align(const Context&);
Outs non_max_suppression(const Context&);
Outs max_unpool(const Context&);
Outs unique(const Context&);
Outs compress(const Context&);
Outs center_crop_pad(const Context&);
Outs col2im(const Context&);
Outs quantize_linear(const Context&);
Outs dequantize_linear(const Context&);
Outs dynamic_quantize_linear(const Context&);
Outs matmul_integer(const Context&);
Outs conv_integer(const Context&);
Outs qlinear_matmul(const Context&);
Outs qlinear_conv(const Context&);

}  // namespace kiln::onnx::shape_rules
