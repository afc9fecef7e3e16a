// ONNX's sequence and optional ops: sequences of tensors (SequenceConstruct, SequenceAt,
// SplitToSequence, ConcatFromSequence...) and the optional that may hold no value (Optional,
// OptionalHasElement, OptionalGetElement). A sequence is a Value holding its elements (each
// a tensor Value, on the backend or the host as it was made); an optional holding a value is
// that value, an empty one Value::none() (kiln/onnx/runtime.hpp).
#pragma once

#include "kiln/onnx/ops_layout.hpp"
#include "kiln/onnx/runtime.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::onnx {

namespace sequence_detail {

template <class B> using Outs = std::vector<Value<B>>;

// A position in a sequence of n elements (negative counts from the end), checked against
// [-n, n - 1], or [-n, n] where `end_ok` (SequenceInsert's insertion point).
inline std::size_t position(std::int64_t p, std::size_t n, bool end_ok) {
  const auto size = static_cast<std::int64_t>(n);
  const std::int64_t last = end_ok ? size : size - 1;
  KILN_CHECK(p >= -size && p <= last, "position {} is out of range for a sequence of {} elements", p, n);
  return static_cast<std::size_t>(p < 0 ? p + size : p);
}

template <class B> std::int64_t position_input(const Args<B>& a, std::size_t i) {
  const std::vector<std::int64_t> p = a.ints(i);
  KILN_CHECK(p.size() == 1, "the position must hold one value, got shape {}", a.shape(i));
  return p[0];
}

template <class B> Value<B> host_scalar(std::int64_t value, const typename B::Device& device) {
  return Value<B>::host(TensorData::from(std::vector<std::int64_t>{value}, Shape{}), device);
}

template <class B> Value<B> host_bool(bool value, const typename B::Device& device) {
  return Value<B>::host(TensorData(std::vector<std::byte>{std::byte{value}}, Shape{}, DType::boolean), device);
}

// The tensors of a sequence concatenated along `axis` (ConcatFromSequence), or stacked along a
// new dim `axis` (new_axis = 1). Shared by Loop and Scan, which stack their scan outputs.
template <class B>
Value<B> join(std::span<const Value<B>> parts, std::int64_t axis, bool new_axis, std::string_view what) {
  KILN_CHECK(!parts.empty(), "{}: no tensors to join", what);
  const Shape first = parts[0].shape();
  const std::size_t rank = first.rank() + (new_axis ? 1 : 0);
  const std::size_t dim = detail::axis(axis, rank);
  std::vector<typename B::Primitive> tensors;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Shape s = parts[i].shape();
    bool fits = s.rank() == first.rank() && parts[i].dtype() == parts[0].dtype() && parts[i].type() == parts[0].type();
    for (std::size_t d = 0; fits && d < s.rank(); ++d) fits = (!new_axis && d == dim) || s[d] == first[d];
    KILN_CHECK(fits, "{}: element {} ({} {}) does not join element 0 ({} {}) along dim {}", what, i, s,
               parts[i].describe(), first, parts[0].describe(), dim);
    if (new_axis) {
      std::vector<std::int64_t> dims(s.begin(), s.end());
      dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(dim), 1);
      tensors.push_back(B::reshape(parts[i].tensor(), Shape(dims)));
    } else {
      tensors.push_back(parts[i].tensor());
    }
  }
  Value<B> out = tensors.size() == 1 ? Value<B>(tensors[0]) : Value<B>(B::cat(tensors, static_cast<std::int64_t>(dim)));
  return parts[0].widened() ? Value<B>::typed(std::move(out), parts[0].type()) : out;
}

// Element `index` of x along `dim`, that dim dropped (the slices Scan and SplitToSequence take).
template <class B> Value<B> take(const Value<B>& x, std::size_t dim, std::int64_t index, std::int64_t size = 1,
                                 bool keep_dim = false) {
  Shape s = x.shape();
  typename B::Primitive part = layout_detail::slice_dim<B>(x.tensor(), dim, index, size);
  if (!keep_dim) {
    std::vector<std::int64_t> dims(s.begin(), s.end());
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(dim));
    part = B::reshape(part, Shape(dims));
  }
  return x.widened() ? Value<B>::typed(Value<B>(part), x.type()) : Value<B>(part);
}

}  // namespace sequence_detail

// The op types add_sequence_ops registers (checked when a table is built).
inline constexpr std::string_view kSequenceOps[] = {
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert",     "SequenceAt",         "SequenceErase",
    "SequenceLength", "SplitToSequence",  "ConcatFromSequence", "Optional",           "OptionalHasElement",
    "OptionalGetElement"};
inline constexpr OpGroup kSequenceGroup{"sequence", kSequenceOps};

template <class B> void add_sequence_ops(OpTable<B>& t) {
  using namespace sequence_detail;

  t["SequenceEmpty"] = {[](const Args<B>& a) -> Outs<B> {
    const auto type = static_cast<ElementType>(a.node.attr_int("dtype", static_cast<std::int64_t>(ElementType::float32)));
    KILN_CHECK(held_dtype_of(type) || type == ElementType::string, "dtype {} is not a tensor element type Kiln holds",
               element_type_name(type));
    return {Value<B>::sequence({}, type)};
  }, 11};
  t["SequenceConstruct"] = {[](const Args<B>& a) -> Outs<B> {
    std::vector<Value<B>> elements;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Value<B>& v = a.value(i);
      KILN_CHECK(v.is_tensor() && v.type() == a.value(0).type(), "input {} is {}, input 0 {}: a sequence holds tensors of one type",
                 i, v.describe(), a.value(0).describe());
      elements.push_back(v);
    }
    return {Value<B>::sequence(std::move(elements), a.value(0).type())};
  }, 11};
  t["SequenceInsert"] = {[](const Args<B>& a) -> Outs<B> {
    const Value<B>& seq = a.value(0);
    std::vector<Value<B>> elements = seq.elements();
    const Value<B>& x = a.value(1);
    KILN_CHECK(x.is_tensor() && x.type() == seq.type(), "cannot insert {} into {}", x.describe(), seq.describe());
    const std::size_t at = a.has(2) ? position(position_input(a, 2), elements.size(), true) : elements.size();
    elements.insert(elements.begin() + static_cast<std::ptrdiff_t>(at), x);
    return {Value<B>::sequence(std::move(elements), seq.type())};
  }, 11};
  t["SequenceAt"] = {[](const Args<B>& a) -> Outs<B> {
    const std::vector<Value<B>>& elements = a.value(0).elements();
    return {elements[position(position_input(a, 1), elements.size(), false)]};
  }, 11};
  t["SequenceErase"] = {[](const Args<B>& a) -> Outs<B> {
    const Value<B>& seq = a.value(0);
    std::vector<Value<B>> elements = seq.elements();
    KILN_CHECK(!elements.empty(), "cannot erase from an empty sequence");
    const std::size_t at = a.has(1) ? position(position_input(a, 1), elements.size(), false) : elements.size() - 1;
    elements.erase(elements.begin() + static_cast<std::ptrdiff_t>(at));
    return {Value<B>::sequence(std::move(elements), seq.type())};
  }, 11};
  t["SequenceLength"] = {[](const Args<B>& a) -> Outs<B> {
    return {host_scalar<B>(static_cast<std::int64_t>(a.value(0).elements().size()), a.device)};
  }, 11};
  t["SplitToSequence"] = {[](const Args<B>& a) -> Outs<B> {
    const Value<B>& x = a.value(0);
    const Shape s = x.shape();
    const std::size_t dim = detail::axis(a.node.attr_int("axis", 0), s.rank());
    const std::int64_t n = s[dim];
    std::vector<Value<B>> elements;
    if (!a.has(1)) {
      // One element per index along the axis, the axis kept only with keepdims.
      const bool keep = a.node.attr_int("keepdims", 1) != 0;
      for (std::int64_t i = 0; i < n; ++i) elements.push_back(take(x, dim, i, 1, keep));
      return {Value<B>::sequence(std::move(elements), x.type())};
    }
    const std::vector<std::int64_t> split = a.ints(1);
    std::vector<std::int64_t> sizes;
    if (a.shape(1).rank() == 0) {
      KILN_CHECK(split[0] > 0, "a scalar split must be positive, got {}", split[0]);
      for (std::int64_t done = 0; done < n; done += split[0]) sizes.push_back(std::min(split[0], n - done));
    } else {
      std::int64_t total = 0;
      for (const std::int64_t v : split) {
        KILN_CHECK(v >= 0, "split {} has a negative entry", split);
        total += v;
      }
      KILN_CHECK(total == n, "split {} sums to {}, but dim {} of {} is {}", split, total, dim, s, n);
      sizes = split;
    }
    std::int64_t start = 0;
    for (const std::int64_t size : sizes) {
      elements.push_back(take(x, dim, start, size, true));
      start += size;
    }
    return {Value<B>::sequence(std::move(elements), x.type())};
  }, 11};
  t["ConcatFromSequence"] = {[](const Args<B>& a) -> Outs<B> {
    const std::vector<Value<B>>& elements = a.value(0).elements();
    const Value<B> joined = join<B>(elements, a.node.attr_int("axis", 0), a.node.attr_int("new_axis", 0) != 0,
                                    "ConcatFromSequence");
    return {joined};
  }, 11};

  t["Optional"] = {[](const Args<B>& a) -> Outs<B> { return {a.has(0) ? a.value(0) : Value<B>::none()}; }, 15};
  t["OptionalHasElement"] = {[](const Args<B>& a) -> Outs<B> {
    return {host_bool<B>(a.has(0) && a.value(0).kind() != Value<B>::Kind::none, a.device)};
  }, 15};
  t["OptionalGetElement"] = {[](const Args<B>& a) -> Outs<B> {
    KILN_CHECK(a.value(0).kind() != Value<B>::Kind::none, "the optional input holds no value");
    return {a.value(0)};
  }, 15};
}

}  // namespace kiln::onnx
