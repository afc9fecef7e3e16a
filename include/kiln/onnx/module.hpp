// What the modules that kiln-onnx2cpp generates are built from: a graph written as C++
// (the `build` helpers: nodes, attributes, inputs), run by GraphRunner with the module's
// parameters as its constants. A generated module is a normal Kiln module (KILN_MODULE,
// Params and Buffers): it loads its weights with nn::load, trains on Autodiff<B> and saves
// with nn::save, and its program reads no ONNX file. See docs/onnx.md.
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/nn/param.hpp"
#include "kiln/onnx/model.hpp"
#include "kiln/tensor.hpp"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx {

namespace build {

inline Attribute named(std::string name, Attribute::Kind kind) {
  Attribute a;
  a.name = std::move(name);
  a.kind = kind;
  return a;
}
inline Attribute attr_int(std::string name, std::int64_t value) {
  Attribute a = named(std::move(name), Attribute::Kind::i);
  a.i = value;
  return a;
}
inline Attribute attr_float(std::string name, double value) {
  Attribute a = named(std::move(name), Attribute::Kind::f);
  a.f = value;
  return a;
}
inline Attribute attr_string(std::string name, std::string value) {
  Attribute a = named(std::move(name), Attribute::Kind::s);
  a.s = std::move(value);
  return a;
}
inline Attribute attr_ints(std::string name, std::vector<std::int64_t> values) {
  Attribute a = named(std::move(name), Attribute::Kind::ints);
  a.ints = std::move(values);
  return a;
}
inline Attribute attr_floats(std::string name, std::vector<double> values) {
  Attribute a = named(std::move(name), Attribute::Kind::floats);
  a.floats = std::move(values);
  return a;
}
inline Attribute attr_strings(std::string name, std::vector<std::string> values) {
  Attribute a = named(std::move(name), Attribute::Kind::strings);
  a.strings = std::move(values);
  return a;
}
// A tensor attribute (a Constant's value) from its little-endian bytes, in the dtype that holds
// its element type (held_dtype_of).
inline Attribute attr_tensor(std::string name, ElementType type, std::vector<std::int64_t> dims,
                             std::initializer_list<std::uint8_t> bytes) {
  Attribute a = named(std::move(name), Attribute::Kind::tensor);
  TensorValue t;
  t.type = type;
  t.dims = dims;
  if (const auto dtype = held_dtype_of(type)) {
    std::vector<std::byte> raw(bytes.size());
    std::size_t i = 0;
    for (const std::uint8_t b : bytes) raw[i++] = static_cast<std::byte>(b);
    t.data = TensorData(std::move(raw), Shape(dims), *dtype);
  }
  a.tensor = std::move(t);
  return a;
}

inline Node node(std::string op_type, std::string name, std::vector<std::string> inputs,
                 std::vector<std::string> outputs, std::vector<Attribute> attributes = {}) {
  Node n;
  n.op_type = std::move(op_type);
  n.name = std::move(name);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  return n;
}

// A graph input or output; dims of -1 are dynamic.
inline ValueInfo value(std::string name, ElementType type, std::vector<std::int64_t> dims) {
  ValueInfo v;
  v.name = std::move(name);
  v.type = type;
  std::vector<Dim> shape;
  for (const std::int64_t d : dims) shape.push_back(Dim{d, d < 0 ? "?" : ""});
  v.shape = std::move(shape);
  return v;
}

}  // namespace build

// A parameter or buffer of a generated module, zero, of the model's shape (a module made
// to load its weights into). Rank-0 initializers are held as rank-1 tensors of one element.
template <class T> T zeros_like_initializer(const Shape& shape, DType dtype, const typename T::Device& device) {
  return T::from_data(TensorData(std::vector<std::byte>(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)),
                                 shape, dtype),
                      device);
}

// The constants of a run, in the order of the runner's constant names: each parameter's
// primitive, reshaped to the initializer's own shape where the module holds it with another
// rank (a rank-0 initializer is held as [1]).
template <class B> class ModuleConstants {
 public:
  explicit ModuleConstants(std::size_t count) { values_.reserve(count); }
  template <class T> void add(const T& tensor, std::optional<Shape> shape = std::nullopt) {
    typename B::Primitive p = tensor.primitive();
    if (shape) p = B::reshape(p, *shape);
    values_.emplace_back(std::move(p));
  }
  std::span<const Value<B>> values() const { return values_; }

 private:
  std::vector<Value<B>> values_;
};

}  // namespace kiln::onnx
