// kiln/onnx/shapes.hpp: static shape inference. One rule per op type (the table at the end),
// each reading what is known of its node's inputs and returning what follows for the
// outputs; a dim nobody can know before running is -1, a rank nobody can know is nullopt.
// The rules mirror the checks of the kernels in kiln/onnx/ops_*.hpp, so that a shape they
// would reject is an error here too, naming the node as the runtime does.
#include "kiln/onnx/shapes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "kiln/core/error.hpp"

namespace kiln::onnx {

bool InferredValue::shape_known() const {
  return dims && std::all_of(dims->begin(), dims->end(), [](std::int64_t d) { return d >= 0; });
}

namespace {

using Dims = std::vector<std::int64_t>;
using Outs = std::vector<InferredValue>;

constexpr std::int64_t kUnknown = -1;
// Contents are kept for tensors up to this many elements: enough for shapes, axes and
// scales, small enough that the weights of a model are not copied.
constexpr std::int64_t kValueLimit = 4096;

// ---------------------------------------------------------------- dims with unknowns

bool known(std::int64_t d) { return d >= 0; }
bool all_known(const Dims& dims) { return std::all_of(dims.begin(), dims.end(), known); }

// a * b where either may be unknown (a zero dim makes 0 whatever the other is).
std::int64_t times(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return known(a) && known(b) ? a * b : kUnknown;
}
std::int64_t plus(std::int64_t a, std::int64_t b) { return known(a) && known(b) ? a + b : kUnknown; }
std::int64_t product(std::span<const std::int64_t> dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n = times(n, d);
  return n;
}

// "[2, ?, 3]", for messages.
std::string text(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    out += (i ? ", " : "") + (known(dims[i]) ? std::to_string(dims[i]) : std::string("?"));
  return out + "]";
}

// The one size two dims that must agree have (a known one wins over an unknown one).
std::int64_t merge(std::int64_t a, std::int64_t b, std::string_view what) {
  KILN_CHECK(!known(a) || !known(b) || a == b, "{}: {} and {} differ", what, a, b);
  return known(a) ? a : b;
}

// NumPy's broadcast of two shapes; an unknown dim against a known one other than 1 is that one.
Dims broadcast(const Dims& a, const Dims& b) {
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
std::size_t axis_of(std::int64_t axis, std::size_t rank, std::string_view what = "axis") {
  const auto r = static_cast<std::int64_t>(rank);
  KILN_CHECK(axis >= -r && axis < r, "{} {} is out of range for rank {}", what, axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}
std::vector<std::size_t> axes_of(const Dims& values, std::size_t rank) {
  std::vector<std::size_t> out;
  for (const std::int64_t a : values) {
    const std::size_t i = axis_of(a, rank, "axes entry");
    KILN_CHECK(std::find(out.begin(), out.end(), i) == out.end(), "axes name dim {} twice", i);
    out.push_back(i);
  }
  return out;
}
bool listed(const std::vector<std::size_t>& dims, std::size_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// ---------------------------------------------------------------- known contents

// The elements of `data` at positions index[d] along each dim d, as a tensor of dims
// [index[0].size(), index[1].size(), ...]: slicing, gathering and broadcasting in one.
TensorData take(const TensorData& data, const std::vector<Dims>& index) {
  const std::size_t size = dtype_size(data.dtype());
  Dims out_dims;
  for (const Dims& i : index) out_dims.push_back(static_cast<std::int64_t>(i.size()));
  const Shape out_shape(out_dims);
  const std::int64_t n = out_shape.numel();
  std::vector<std::byte> bytes(static_cast<std::size_t>(n) * size);
  const Dims strides = data.shape().contiguous_strides();
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

Dims iota(std::int64_t n, std::int64_t start = 0, std::int64_t step = 1) {
  Dims out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = start + i * step;
  return out;
}

// data broadcast to `dims` (all known).
TensorData broadcast_value(const TensorData& data, const Dims& dims) {
  Dims padded(dims.size() - data.shape().rank(), 1);
  padded.insert(padded.end(), data.shape().begin(), data.shape().end());
  std::vector<Dims> index;
  for (std::size_t d = 0; d < dims.size(); ++d)
    index.push_back(padded[d] == 1 ? Dims(static_cast<std::size_t>(dims[d]), 0) : iota(dims[d]));
  return take(data.reshaped(Shape(padded)), index);
}

TensorData int_tensor(Dims values, Dims dims) { return TensorData::from(values, Shape(std::move(dims))); }

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
Operand ints_from(const Context& c, std::string_view attribute, std::size_t input, std::int64_t input_since) {
  if (c.opset < input_since) {
    if (!c.node.find(attribute)) return {};
    return {true, c.node.attr_ints(attribute)};
  }
  if (!c.has(input)) return {};
  return {true, c.ints(input)};
}

InferredValue tensor(std::optional<DType> dtype, std::optional<Dims> dims) {
  return {dtype, std::move(dims), std::nullopt};
}
InferredValue known_value(TensorData data) { return {data.dtype(), data.shape().dims(), std::move(data)}; }
// A tensor of `rank` unknown dims, or of unknown rank.
InferredValue of_rank(std::optional<DType> dtype, std::optional<std::size_t> rank) {
  if (!rank) return tensor(dtype, std::nullopt);
  return tensor(dtype, Dims(*rank, kUnknown));
}
std::optional<std::size_t> rank_of(const std::optional<Dims>& dims) {
  return dims ? std::optional(dims->size()) : std::nullopt;
}

InferredValue from_tensor(const TensorValue& t) {
  InferredValue v{dtype_of(t.type), t.dims, std::nullopt};
  if (t.data) v.value = *t.data;
  return v;
}

// ---------------------------------------------------------------- elementwise

// The scalar formula of an elementwise op whose contents are worth computing before running
// (the arithmetic and comparisons of shapes); nullptr for the others.
using Formula = std::function<double(std::span<const double>)>;
Formula formula(const Node& node, bool integer) {
  const std::string& op = node.op_type;
  if (op == "Identity" || op == "Cast" || op == "CastLike") return [](auto x) { return x[0]; };
  if (op == "Add") return [](auto x) { return x[0] + x[1]; };
  if (op == "Sub") return [](auto x) { return x[0] - x[1]; };
  if (op == "Mul") return [](auto x) { return x[0] * x[1]; };
  if (op == "Div") return [integer](auto x) { return integer ? std::trunc(x[0] / x[1]) : x[0] / x[1]; };
  if (op == "Mod" && node.attr_int("fmod", 0) == 0) return [](auto x) { return x[0] - std::floor(x[0] / x[1]) * x[1]; };
  if (op == "Neg") return [](auto x) { return -x[0]; };
  if (op == "Abs") return [](auto x) { return std::abs(x[0]); };
  if (op == "Sign") return [](auto x) { return static_cast<double>((x[0] > 0) - (x[0] < 0)); };
  if (op == "Floor") return [](auto x) { return std::floor(x[0]); };
  if (op == "Ceil") return [](auto x) { return std::ceil(x[0]); };
  if (op == "Max") return [](auto x) { return *std::max_element(x.begin(), x.end()); };
  if (op == "Min") return [](auto x) { return *std::min_element(x.begin(), x.end()); };
  if (op == "Sum") return [](auto x) { return std::accumulate(x.begin(), x.end(), 0.0); };
  if (op == "Equal") return [](auto x) { return double(x[0] == x[1]); };
  if (op == "Less") return [](auto x) { return double(x[0] < x[1]); };
  if (op == "LessOrEqual") return [](auto x) { return double(x[0] <= x[1]); };
  if (op == "Greater") return [](auto x) { return double(x[0] > x[1]); };
  if (op == "GreaterOrEqual") return [](auto x) { return double(x[0] >= x[1]); };
  if (op == "Not") return [](auto x) { return double(x[0] == 0); };
  if (op == "And") return [](auto x) { return double(x[0] != 0 && x[1] != 0); };
  if (op == "Or") return [](auto x) { return double(x[0] != 0 || x[1] != 0); };
  if (op == "Xor") return [](auto x) { return double((x[0] != 0) != (x[1] != 0)); };
  if (op == "Where") return [](auto x) { return x[0] != 0 ? x[1] : x[2]; };
  return nullptr;
}

// The contents of an elementwise node whose inputs' contents are all known, on the host in
// double (exact for the integers of shapes).
std::optional<TensorData> evaluate(const Context& c, const Dims& out, DType dtype) {
  if (!all_known(out) || product(out) > kValueLimit || c.size() == 0) return std::nullopt;
  std::vector<std::vector<double>> x;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!c.has(i) || !c.in(i).value) return std::nullopt;
    x.push_back(broadcast_value(*c.in(i).value, out).to_vec<double>());
  }
  const DType first = c.in(0).value->dtype();
  const Formula f = formula(c.node, !is_float(first));
  if (!f) return std::nullopt;
  const auto n = static_cast<std::size_t>(product(out));
  std::vector<double> y(n), args(x.size());
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t i = 0; i < x.size(); ++i) args[i] = x[i][k];
    if (c.node.op_type == "Div" && !is_float(first) && args[1] == 0) return std::nullopt;
    y[k] = f(args);
  }
  return TensorData::from(y, Shape(out)).convert(dtype);
}

// An elementwise node's output: its inputs broadcast, of `dtype`, its contents when known.
Outs elementwise(const Context& c, std::optional<DType> dtype, std::size_t first = 0) {
  std::optional<Dims> dims = Dims{};
  for (std::size_t i = first; i < c.size() && dims; ++i) {
    if (!c.has(i)) continue;
    dims = c.dims(i) ? std::optional(broadcast(*dims, *c.dims(i))) : std::nullopt;
  }
  InferredValue out = tensor(dtype, dims);
  if (dims && dtype) out.value = evaluate(c, *dims, *dtype);
  return {out};
}

// The element type shared by inputs that must have one (Add's, Concat's...), checked.
std::optional<DType> same_dtype(const Context& c, std::size_t from = 0, std::size_t to = static_cast<std::size_t>(-1)) {
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

Outs same_as_input(const Context& c) { return {tensor(c.dtype(0), c.dims(0))}; }
Outs unary(const Context& c) { return elementwise(c, c.dtype(0)); }
Outs binary(const Context& c) { return elementwise(c, same_dtype(c)); }
Outs to_bool(const Context& c) {
  (void)same_dtype(c);
  return elementwise(c, DType::boolean);
}

std::optional<DType> held(std::int64_t onnx_type) { return dtype_of(static_cast<ElementType>(onnx_type)); }

Outs cast(const Context& c) {
  const std::optional<DType> to = c.node.op_type == "Cast" ? held(c.node.attr_int("to", 0)) : c.dtype(1);
  if (!to) return {tensor(std::nullopt, c.dims(0))};
  InferredValue out = tensor(to, c.dims(0));
  if (c.in(0).value) out.value = c.in(0).value->convert(*to);
  return {out};
}

Outs where(const Context& c) {
  if (c.dtype(0)) KILN_CHECK(*c.dtype(0) == DType::boolean, "the condition must be bool, got {}", *c.dtype(0));
  return elementwise(c, same_dtype(c, 1));
}

// ---------------------------------------------------------------- layout

Outs identity(const Context& c) { return {c.in(0)}; }

Outs reshape(const Context& c) {
  const std::optional<DType> dtype = c.dtype(0);
  const std::optional<Dims> target = c.opset < 5 ? std::optional(c.node.attr_ints("shape")) : c.ints(1);
  const std::optional<Dims>& in = c.dims(0);
  if (!target) {
    const std::optional<Dims>& shape = c.dims(1);
    if (shape && shape->size() == 1 && known(shape->front()))
      return {of_rank(dtype, static_cast<std::size_t>(shape->front()))};
    return {tensor(dtype, std::nullopt)};
  }
  Dims dims = *target;
  const bool allow_zero = c.node.attr_int("allowzero", 0) != 0;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      KILN_CHECK(!infer, "shape {} has two -1 entries", *target);
      infer = i;
    } else {
      KILN_CHECK(dims[i] >= 0, "shape {} has a negative entry", *target);
    }
    if (dims[i] == 0 && !allow_zero) {
      if (in) KILN_CHECK(i < in->size(), "shape {} copies dim {} of an input of shape {}", *target, i, text(*in));
      dims[i] = in ? (*in)[i] : kUnknown;
    }
  }
  const std::int64_t count = in ? product(*in) : kUnknown;
  if (infer) {
    Dims others = dims;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(*infer));
    const std::int64_t rest = product(others);
    dims[*infer] = kUnknown;
    if (known(count) && known(rest)) {
      KILN_CHECK(rest > 0 && count % rest == 0, "cannot reshape {} to {}", text(*in), *target);
      dims[*infer] = count / rest;
    }
  } else if (known(count) && all_known(dims)) {
    KILN_CHECK(product(dims) == count, "cannot reshape {} ({} elements) to {}", text(*in), count, text(dims));
  }
  InferredValue out = tensor(dtype, dims);
  if (c.in(0).value && all_known(dims)) out.value = c.in(0).value->reshaped(Shape(dims));
  return {out};
}

Outs flatten(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(c.dtype(0), 2)};
  const auto r = static_cast<std::int64_t>(in->size());
  const std::int64_t axis = c.node.attr_int("axis", 1);
  KILN_CHECK(axis >= -r && axis <= r, "axis {} is out of range for rank {}", axis, r);
  const auto at = static_cast<std::size_t>(axis < 0 ? axis + r : axis);
  const std::span<const std::int64_t> all(*in);
  const Dims dims{product(all.subspan(0, at)), product(all.subspan(at))};
  InferredValue out = tensor(c.dtype(0), dims);
  if (c.in(0).value) out.value = c.in(0).value->reshaped(Shape(dims));
  return {out};
}

Outs transpose(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  Dims perm = c.node.attr_ints("perm");
  if (!in) return {perm.empty() ? of_rank(c.dtype(0), std::nullopt) : of_rank(c.dtype(0), perm.size())};
  if (perm.empty())
    for (std::size_t i = in->size(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
  KILN_CHECK(perm.size() == in->size(), "perm has {} entries for rank {}", perm.size(), in->size());
  std::vector<bool> seen(in->size(), false);
  Dims dims;
  for (const std::int64_t p : perm) {
    KILN_CHECK(p >= 0 && p < static_cast<std::int64_t>(in->size()) && !seen[static_cast<std::size_t>(p)],
               "perm {} is not a permutation of 0..{}", perm, in->size() - 1);
    seen[static_cast<std::size_t>(p)] = true;
    dims.push_back((*in)[static_cast<std::size_t>(p)]);
  }
  return {tensor(c.dtype(0), dims)};
}

// Concatenated contents along `axis` (every part of one dtype).
TensorData concat_values(const std::vector<const TensorData*>& parts, std::size_t axis, const Dims& out) {
  const std::size_t size = dtype_size(parts.front()->dtype());
  const std::int64_t outer = product(std::span<const std::int64_t>(out).subspan(0, axis));
  std::vector<std::byte> bytes;
  for (std::int64_t o = 0; o < outer; ++o)
    for (const TensorData* p : parts) {
      const auto chunk = static_cast<std::size_t>(p->numel() / std::max<std::int64_t>(outer, 1)) * size;
      const std::byte* from = p->bytes().data() + static_cast<std::size_t>(o) * chunk;
      bytes.insert(bytes.end(), from, from + chunk);
    }
  return TensorData(std::move(bytes), Shape(out), parts.front()->dtype());
}

Outs concat(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c);
  std::optional<Dims> out;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c.has(i) && c.dims(i)) {
      out = *c.dims(i);
      break;
    }
  if (!out) return {tensor(dtype, std::nullopt)};
  const std::size_t axis = axis_of(c.node.attr_int("axis", 0), out->size());
  (*out)[axis] = 0;
  std::vector<const TensorData*> parts;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::optional<Dims>& s = c.dims(i);
    if (!s) {
      (*out)[axis] = kUnknown;
      continue;
    }
    KILN_CHECK(s->size() == out->size(),
               "input {} ({}) does not concatenate with the inputs before it ({}) along dim {}", i, text(*s),
               text(*out), axis);
    for (std::size_t d = 0; d < s->size(); ++d) {
      if (d == axis) {
        (*out)[d] = plus((*out)[d], (*s)[d]);
      } else {
        KILN_CHECK(!known((*out)[d]) || !known((*s)[d]) || (*out)[d] == (*s)[d],
                   "input {} ({}) does not concatenate with the inputs before it ({}) along dim {}", i, text(*s),
                   text(*out), axis);
        if (!known((*out)[d])) (*out)[d] = (*s)[d];
      }
    }
    if (c.in(i).value) parts.push_back(&*c.in(i).value);
  }
  InferredValue result = tensor(dtype, out);
  if (parts.size() == c.size() && all_known(*out)) result.value = concat_values(parts, axis, *out);
  return {result};
}

Outs split(const Context& c) {
  const std::size_t outputs = c.node.outputs.size();
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return Outs(outputs, tensor(c.dtype(0), std::nullopt));
  const std::size_t axis = axis_of(c.node.attr_int("axis", 0), in->size());
  const std::int64_t length = (*in)[axis];
  std::optional<Dims> sizes;
  if (const Operand given = ints_from(c, "split", 1, 13); given.given) {
    sizes = given.values;
  } else if (known(length)) {
    const std::int64_t n =
        c.node.find("num_outputs") ? c.node.attr_int("num_outputs", 1) : static_cast<std::int64_t>(outputs);
    KILN_CHECK(n >= 1, "num_outputs must be positive, got {}", n);
    const std::int64_t chunk = (length + n - 1) / n;  // the last part may be smaller (opset 18)
    sizes.emplace();
    for (std::int64_t i = 0, left = length; i < n; ++i, left -= chunk)
      sizes->push_back(std::max<std::int64_t>(0, std::min(chunk, left)));
  }
  Outs out(outputs, tensor(c.dtype(0), in));
  for (InferredValue& o : out) (*o.dims)[axis] = kUnknown;
  if (!sizes) return out;
  KILN_CHECK(sizes->size() == outputs, "{} split sizes for {} outputs", sizes->size(), outputs);
  std::int64_t total = 0;
  for (const std::int64_t s : *sizes) {
    KILN_CHECK(s >= 0, "split sizes {} have a negative entry", *sizes);
    total += s;
  }
  KILN_CHECK(!known(length) || total == length, "split sizes {} add up to {}, the input's dim {} is {}", *sizes, total,
             axis, length);
  for (std::size_t k = 0; k < outputs; ++k) (*out[k].dims)[axis] = (*sizes)[k];
  return out;
}

Outs slice(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  std::optional<Dims> starts, ends, axes = Dims{}, steps = Dims{};
  if (c.opset < 10) {
    starts = c.node.attr_ints("starts");
    ends = c.node.attr_ints("ends");
    axes = c.node.attr_ints("axes");
  } else {
    starts = c.ints(1);
    ends = c.ints(2);
    if (c.has(3)) axes = c.ints(3);
    if (c.has(4)) steps = c.ints(4);
  }
  Dims out = *in;
  if (!starts || !ends || !axes || !steps) {
    // The sliced axes are unknown when their lengths are; every axis when they are unknown.
    if (axes && !axes->empty())
      for (const std::size_t d : axes_of(*axes, in->size())) out[d] = kUnknown;
    else
      out.assign(in->size(), kUnknown);
    return {tensor(c.dtype(0), out)};
  }
  KILN_CHECK(starts->size() == ends->size(), "{} starts and {} ends", starts->size(), ends->size());
  if (axes->empty()) *axes = iota(static_cast<std::int64_t>(starts->size()));
  if (steps->empty()) steps->assign(starts->size(), 1);
  KILN_CHECK(axes->size() == starts->size() && steps->size() == starts->size(),
             "{} starts, {} axes and {} steps must agree", starts->size(), axes->size(), steps->size());
  const std::vector<std::size_t> dims = axes_of(*axes, in->size());
  std::vector<Dims> index;
  for (const std::int64_t n : *in) index.push_back(known(n) ? iota(n) : Dims{});
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t n = (*in)[dims[i]], step = (*steps)[i];
    KILN_CHECK(step != 0, "step 0 on axis {}", (*axes)[i]);
    if (!known(n)) continue;
    // ONNX's clamping: negative indices count from the end, then clamp to [0, n] going
    // forward and [-1, n - 1] going backward.
    std::int64_t start = (*starts)[i] < 0 ? (*starts)[i] + n : (*starts)[i];
    std::int64_t end = (*ends)[i] < 0 ? (*ends)[i] + n : (*ends)[i];
    std::int64_t size = 0;
    if (step > 0) {
      start = std::clamp<std::int64_t>(start, 0, n);
      end = std::clamp<std::int64_t>(end, 0, n);
      size = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<std::int64_t>(start, -1, n - 1);
      end = std::clamp<std::int64_t>(end, -1, n - 1);
      size = start > end ? (start - end - step - 1) / -step : 0;
    }
    out[dims[i]] = size;
    index[dims[i]] = iota(size, start, step);
  }
  InferredValue result = tensor(c.dtype(0), out);
  if (c.in(0).value) result.value = take(*c.in(0).value, index);
  return {result};
}

Outs squeeze(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const Operand axes = ints_from(c, "axes", 1, 13);
  if (!in || (axes.given && !axes.values)) return {tensor(c.dtype(0), std::nullopt)};
  std::vector<std::size_t> dims;
  if (axes.given) {
    dims = axes_of(*axes.values, in->size());
    for (const std::size_t d : dims)
      KILN_CHECK(!known((*in)[d]) || (*in)[d] == 1, "cannot squeeze dim {} of shape {}: its size is not 1", d,
                 text(*in));
  } else {
    if (!all_known(*in)) return {tensor(c.dtype(0), std::nullopt)};
    for (std::size_t d = 0; d < in->size(); ++d)
      if ((*in)[d] == 1) dims.push_back(d);
  }
  Dims out;
  for (std::size_t d = 0; d < in->size(); ++d)
    if (!listed(dims, d)) out.push_back((*in)[d]);
  InferredValue result = tensor(c.dtype(0), out);
  if (c.in(0).value) result.value = c.in(0).value->reshaped(Shape(out));
  return {result};
}

Outs unsqueeze(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const Operand axes = ints_from(c, "axes", 1, 13);
  KILN_CHECK(axes.given, "axes are required");
  if (!in || !axes.values) return {tensor(c.dtype(0), std::nullopt)};
  const std::vector<std::size_t> dims = axes_of(*axes.values, in->size() + axes.values->size());
  Dims out;
  for (std::size_t d = 0, next = 0; d < in->size() + dims.size(); ++d)
    out.push_back(listed(dims, d) ? 1 : (*in)[next++]);
  InferredValue result = tensor(c.dtype(0), out);
  if (c.in(0).value) result.value = c.in(0).value->reshaped(Shape(out));
  return {result};
}

Outs shape(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(DType::i64, 1)};
  const auto r = static_cast<std::int64_t>(in->size());
  std::int64_t start = c.node.attr_int("start", 0), end = c.node.attr_int("end", r);
  start = std::clamp<std::int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<std::int64_t>(end < 0 ? end + r : end, 0, r);
  const Dims dims(in->begin() + start, in->begin() + std::max(start, end));
  if (all_known(dims)) return {known_value(int_tensor(dims, {static_cast<std::int64_t>(dims.size())}))};
  return {tensor(DType::i64, Dims{static_cast<std::int64_t>(dims.size())})};
}

Outs size(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const std::int64_t n = in ? product(*in) : kUnknown;
  if (known(n)) return {known_value(int_tensor({n}, {}))};
  return {tensor(DType::i64, Dims{})};
}

Outs constant(const Context& c) {
  const Node& n = c.node;
  if (const TensorValue* t = n.attr_tensor("value")) return {from_tensor(*t)};
  if (const Attribute* f = n.find("value_float"))
    return {known_value(TensorData::from(std::vector<float>{static_cast<float>(f->f)}, Shape{}))};
  if (const Attribute* f = n.find("value_floats")) {
    const std::vector<float> v(f->floats.begin(), f->floats.end());
    return {known_value(TensorData::from(v, Shape{static_cast<std::int64_t>(v.size())}))};
  }
  if (const Attribute* i = n.find("value_int")) return {known_value(int_tensor({i->i}, {}))};
  if (const Attribute* i = n.find("value_ints"))
    return {known_value(int_tensor(i->ints, {static_cast<std::int64_t>(i->ints.size())}))};
  if (n.find("value_string")) return {tensor(std::nullopt, Dims{})};
  if (const Attribute* s = n.find("value_strings"))
    return {tensor(std::nullopt, Dims{static_cast<std::int64_t>(s->strings.size())})};
  return {tensor(std::nullopt, std::nullopt)};  // a sparse value
}

Outs constant_of_shape(const Context& c) {
  std::optional<DType> dtype = DType::f32;
  double fill = 0;
  if (const TensorValue* t = c.node.attr_tensor("value")) {
    dtype = dtype_of(t->type);
    if (t->data) {
      KILN_CHECK(t->data->numel() == 1, "value must hold one element, got shape {}", t->data->shape());
      fill = t->data->to_vec<double>()[0];
    }
  }
  const std::optional<Dims> dims = c.ints(0);
  if (!dims) {
    const std::optional<Dims>& shape = c.dims(0);
    if (shape && shape->size() == 1 && known(shape->front()))
      return {of_rank(dtype, static_cast<std::size_t>(shape->front()))};
    return {tensor(dtype, std::nullopt)};
  }
  for (const std::int64_t d : *dims) KILN_CHECK(d >= 0, "shape {} has a negative entry", *dims);
  InferredValue out = tensor(dtype, dims);
  if (dtype && product(*dims) <= kValueLimit)
    out.value = TensorData::from(std::vector<double>(static_cast<std::size_t>(product(*dims)), fill), Shape(*dims))
                    .convert(*dtype);
  return {out};
}

Outs expand(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const std::optional<Dims> target = c.ints(1);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  if (target) {
    const Dims dims = broadcast(*in, *target);
    InferredValue out = tensor(c.dtype(0), dims);
    if (c.in(0).value && all_known(dims) && product(dims) <= kValueLimit)
      out.value = broadcast_value(*c.in(0).value, dims);
    return {out};
  }
  const std::optional<Dims>& shape = c.dims(1);
  if (!shape || shape->size() != 1 || !known(shape->front())) return {tensor(c.dtype(0), std::nullopt)};
  // The target is unknown, but an input dim other than 1 is kept wherever the target is.
  const std::size_t rank = std::max(in->size(), static_cast<std::size_t>(shape->front()));
  Dims out(rank, kUnknown);
  for (std::size_t i = 0; i < in->size(); ++i)
    if (known((*in)[i]) && (*in)[i] != 1) out[rank - in->size() + i] = (*in)[i];
  return {tensor(c.dtype(0), out)};
}

Outs tile(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::optional<Dims> repeats = c.ints(1);
  if (!repeats) return {of_rank(c.dtype(0), in->size())};
  KILN_CHECK(repeats->size() == in->size(), "{} repeats for an input of rank {}", repeats->size(), in->size());
  Dims out;
  for (std::size_t d = 0; d < in->size(); ++d) {
    KILN_CHECK((*repeats)[d] >= 0, "repeats {} have a negative entry", *repeats);
    out.push_back(times((*in)[d], (*repeats)[d]));
  }
  return {tensor(c.dtype(0), out)};
}

Outs pad(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::size_t rank = in->size();
  const std::optional<Dims> pads =
      c.opset < 11 ? std::optional(c.node.attr_ints(c.opset < 2 ? "paddings" : "pads")) : c.ints(1);
  std::optional<std::vector<std::size_t>> dims;
  if (c.opset >= 18 && c.has(3)) {
    if (const auto axes = c.ints(3)) dims = axes_of(*axes, rank);
  } else {
    dims.emplace();
    for (std::size_t d = 0; d < rank; ++d) dims->push_back(d);
  }
  if (!pads || !dims) return {of_rank(c.dtype(0), rank)};
  KILN_CHECK(pads->size() == 2 * dims->size(), "{} pads for {} axes", pads->size(), dims->size());
  Dims out = *in;
  for (std::size_t i = 0; i < dims->size(); ++i) {
    const std::size_t d = (*dims)[i];
    out[d] = plus(out[d], (*pads)[i] + (*pads)[i + dims->size()]);
    KILN_CHECK(!known(out[d]) || out[d] >= 0, "pads {} crop more than dim {} of shape {} holds", *pads, d, text(*in));
  }
  return {tensor(c.dtype(0), out)};
}

Outs depth_to_space(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(c.dtype(0), 4)};
  KILN_CHECK(in->size() == 4, "expected an NCHW input, got {}", text(*in));
  const std::int64_t bs = c.node.attr_int("blocksize", 0), ch = (*in)[1];
  const bool to_space = c.node.op_type == "DepthToSpace";
  KILN_CHECK(bs > 0, "blocksize must be positive, got {}", bs);
  if (to_space) {
    KILN_CHECK(!known(ch) || ch % (bs * bs) == 0, "blocksize {} does not divide the {} channels into blocks", bs, ch);
    return {tensor(c.dtype(0),
                   Dims{(*in)[0], known(ch) ? ch / (bs * bs) : kUnknown, times((*in)[2], bs), times((*in)[3], bs)})};
  }
  const auto divided = [&](std::int64_t d) {
    KILN_CHECK(!known(d) || d % bs == 0, "blocksize {} does not divide {}", bs, text(*in));
    return known(d) ? d / bs : kUnknown;
  };
  return {tensor(c.dtype(0), Dims{(*in)[0], times(ch, bs * bs), divided((*in)[2]), divided((*in)[3])})};
}

// ---------------------------------------------------------------- nn

Outs matmul(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c);
  const std::optional<Dims>&a = c.dims(0), &b = c.dims(1);
  if (!a || !b) return {tensor(dtype, std::nullopt)};
  KILN_CHECK(!a->empty() && !b->empty(), "MatMul takes operands of rank 1 or more, got {} and {}", text(*a), text(*b));
  Dims ad = *a, bd = *b;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  KILN_CHECK(!known(ad.back()) || !known(bd[bd.size() - 2]) || ad.back() == bd[bd.size() - 2],
             "the inner dims of {} and {} differ", text(*a), text(*b));
  Dims out = broadcast(Dims(ad.begin(), ad.end() - 2), Dims(bd.begin(), bd.end() - 2));
  if (a->size() > 1) out.push_back(ad[ad.size() - 2]);
  if (b->size() > 1) out.push_back(bd.back());
  return {tensor(dtype, out)};
}

Outs gemm(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c, 0, 2);
  const std::optional<Dims>&a = c.dims(0), &b = c.dims(1);
  if (!a || !b) return {of_rank(dtype, 2)};
  KILN_CHECK(a->size() == 2 && b->size() == 2, "Gemm takes 2-d A and B, got {} and {}", text(*a), text(*b));
  const bool ta = c.node.attr_int("transA", 0) != 0, tb = c.node.attr_int("transB", 0) != 0;
  const std::int64_t m = (*a)[ta ? 1 : 0], k = (*a)[ta ? 0 : 1], k2 = (*b)[tb ? 1 : 0], n = (*b)[tb ? 0 : 1];
  KILN_CHECK(!known(k) || !known(k2) || k == k2, "A {} (transA {}) and B {} (transB {}) do not multiply", text(*a), ta,
             text(*b), tb);
  return {tensor(dtype, Dims{m, n})};
}

// ONNX's output length of a window along one dim (Conv, pooling).
struct Window {
  Dims kernel, stride, dilation, pads;  // pads: n begins, then n ends
  std::string auto_pad;
  bool ceil_mode = false;
};

Dims spatial_attr(const Node& node, std::string_view name, std::size_t count, std::int64_t fallback) {
  Dims v = node.attr_ints(name, Dims(count, fallback));
  KILN_CHECK(v.size() == count, "{} has {} entries, expected {}", name, v.size(), count);
  return v;
}

Window window(const Node& node, std::size_t n, Dims kernel) {
  Window w{std::move(kernel),
           spatial_attr(node, "strides", n, 1),
           spatial_attr(node, "dilations", n, 1),
           spatial_attr(node, "pads", 2 * n, 0),
           node.attr_string("auto_pad", "NOTSET"),
           node.attr_int("ceil_mode", 0) != 0};
  for (std::size_t i = 0; i < n; ++i)
    KILN_CHECK(w.kernel[i] != 0 && w.stride[i] >= 1 && w.dilation[i] >= 1,
               "kernel {}, strides {} and dilations {} must be positive", text(w.kernel), w.stride, w.dilation);
  return w;
}

std::int64_t window_output(const Window& w, std::size_t i, std::int64_t in) {
  const std::size_t n = w.kernel.size();
  if (!known(in)) return kUnknown;
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return (in + w.stride[i] - 1) / w.stride[i];
  if (!known(w.kernel[i])) return kUnknown;
  const bool valid = w.auto_pad == "VALID";
  const std::int64_t begin = valid ? 0 : w.pads[i], end = valid ? 0 : w.pads[n + i];
  const std::int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1, room = in + begin + end - span;
  KILN_CHECK(room >= 0, "an input of size {} (pads {} and {}) is smaller than the window of {}", in, begin, end, span);
  std::int64_t out = (w.ceil_mode ? room + w.stride[i] - 1 : room) / w.stride[i] + 1;
  // A window that would start entirely in the end padding is dropped.
  if (w.ceil_mode && (out - 1) * w.stride[i] >= in + begin) --out;
  return out;
}

Outs conv(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &wd = c.dims(1);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {of_rank(dtype, rank_of(wd))};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  Dims w = wd ? *wd : Dims(x->size(), kUnknown);
  KILN_CHECK(w.size() == x->size(), "the weight {} must have the rank of the input {}", text(w), text(*x));
  Dims kernel(w.begin() + 2, w.end());
  if (c.node.find("kernel_shape")) {
    const Dims attr = spatial_attr(c.node, "kernel_shape", n, 1);
    for (std::size_t i = 0; i < n; ++i) kernel[i] = merge(kernel[i], attr[i], "kernel_shape and the weight's kernel");
  }
  const std::int64_t group = c.node.attr_int("group", 1);
  KILN_CHECK(!known((*x)[1]) || !known(w[1]) || (*x)[1] == w[1] * group,
             "the input {} has {} channels, the weight {} takes {} ({} groups)", text(*x), (*x)[1], text(w),
             w[1] * group, group);
  const Window win = window(c.node, n, kernel);
  Dims out{(*x)[0], w[0]};
  for (std::size_t i = 0; i < n; ++i) out.push_back(window_output(win, i, (*x)[2 + i]));
  return {tensor(dtype, out)};
}

Outs conv_transpose(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &wd = c.dims(1);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {of_rank(dtype, rank_of(wd))};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  const Dims w = wd ? *wd : Dims(x->size(), kUnknown);
  KILN_CHECK(w.size() == x->size(), "the weight {} must have the rank of the input {}", text(w), text(*x));
  const std::int64_t group = c.node.attr_int("group", 1);
  KILN_CHECK(!known((*x)[1]) || !known(w[0]) || (*x)[1] == w[0], "weight {} expects {} input channels, input {} has {}",
             text(w), w[0], text(*x), (*x)[1]);
  Dims kernel(w.begin() + 2, w.end());
  if (c.node.find("kernel_shape")) kernel = spatial_attr(c.node, "kernel_shape", n, 1);
  const Dims stride = spatial_attr(c.node, "strides", n, 1), dilation = spatial_attr(c.node, "dilations", n, 1);
  const Dims output_padding = spatial_attr(c.node, "output_padding", n, 0),
             pads = spatial_attr(c.node, "pads", 2 * n, 0);
  Dims output_shape = c.node.attr_ints("output_shape");
  if (output_shape.size() == n + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  KILN_CHECK(output_shape.empty() || output_shape.size() == n, "output_shape {} must have {} entries", output_shape, n);
  const std::string auto_pad = c.node.attr_string("auto_pad", "NOTSET");
  Dims out{(*x)[0], times(w[1], group)};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t in = (*x)[2 + i];
    std::int64_t size = kUnknown;
    if (!output_shape.empty())
      size = output_shape[i];
    else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      size = times(in, stride[i]);
    else if (known(in) && known(kernel[i])) {
      const std::int64_t full = (in - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i];
      size = auto_pad == "VALID" ? full : full - pads[i] - pads[n + i];
      KILN_CHECK(size >= 1, "input {}, weight {}, strides {}, pads {} and output_padding {} give an empty output",
                 text(*x), text(w), stride, pads, output_padding);
    }
    out.push_back(size);
  }
  return {tensor(dtype, out)};
}

Outs pool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {tensor(dtype, std::nullopt), tensor(DType::i64, std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  KILN_CHECK(c.node.find("kernel_shape") != nullptr, "the kernel_shape attribute is required");
  const Window win = window(c.node, n, spatial_attr(c.node, "kernel_shape", n, 1));
  Dims out{(*x)[0], (*x)[1]};
  for (std::size_t i = 0; i < n; ++i) out.push_back(window_output(win, i, (*x)[2 + i]));
  return {tensor(dtype, out), tensor(DType::i64, out)};
}

Outs global_pool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (!x) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  Dims out(x->size(), 1);
  out[0] = (*x)[0];
  out[1] = (*x)[1];
  return {tensor(c.dtype(0), out)};
}

// BatchNormalization: Y like X; in training mode the running mean and variance, one per channel.
Outs batch_norm(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const InferredValue channels = tensor(c.dtype(0), x && x->size() >= 2 ? std::optional(Dims{(*x)[1]}) : std::nullopt);
  return {tensor(c.dtype(0), x), channels, channels};
}

// LayerNormalization: Y like X; Mean and InvStdDev keep the normalized dims with size 1.
Outs layer_norm(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (!x) return {tensor(c.dtype(0), std::nullopt), tensor(c.dtype(0), std::nullopt), tensor(c.dtype(0), std::nullopt)};
  Dims stats = *x;
  for (std::size_t d = axis_of(c.node.attr_int("axis", -1), x->size()); d < x->size(); ++d) stats[d] = 1;
  return {tensor(c.dtype(0), x), tensor(c.dtype(0), stats), tensor(c.dtype(0), stats)};
}

Outs dropout(const Context& c) {
  return {tensor(c.dtype(0), c.dims(0)), tensor(c.opset >= 10 ? std::optional(DType::boolean) : c.dtype(0), c.dims(0))};
}

// RNN, GRU and LSTM: Y [steps, directions, batch, hidden] and the last states [directions,
// batch, hidden], batch first with layout 1.
Outs recurrent(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const std::optional<DType> dtype = c.dtype(0);
  const bool batch_first = c.node.attr_int("layout", 0) != 0;
  const std::int64_t directions = c.node.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  std::int64_t hidden = c.node.attr_int("hidden_size", kUnknown);
  if (!known(hidden) && c.has(2) && c.dims(2) && c.dims(2)->size() == 3) hidden = (*c.dims(2))[2];
  if (!x) return Outs(3, of_rank(dtype, std::nullopt));
  KILN_CHECK(x->size() == 3, "X must be 3-d, got {}", text(*x));
  const std::int64_t steps = (*x)[batch_first ? 1 : 0], batch = (*x)[batch_first ? 0 : 1];
  const Dims y = batch_first ? Dims{batch, steps, directions, hidden} : Dims{steps, directions, batch, hidden};
  const Dims state = batch_first ? Dims{batch, directions, hidden} : Dims{directions, batch, hidden};
  return {tensor(dtype, y), tensor(dtype, state), tensor(dtype, state)};
}

// Resize (opset 10 on) and Upsample: each resized axis is sizes[i] or floor(scales[i] * in).
Outs resize(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const bool upsample = c.node.op_type == "Upsample";
  std::vector<std::size_t> axes;
  for (std::size_t d = 0; d < in->size(); ++d) axes.push_back(d);
  if (c.node.find("axes")) axes = axes_of(c.node.attr_ints("axes"), in->size());
  const std::size_t scales_at = upsample || c.opset < 11 ? 1 : 2, sizes_at = 3;
  std::optional<std::vector<double>> scales;
  std::optional<Dims> sizes;
  if (upsample && c.opset < 9)
    scales = c.node.attr_floats("scales");
  else if (c.given(scales_at))
    scales = c.reals(scales_at);
  if (!upsample && c.opset >= 11 && c.given(sizes_at)) {
    sizes = c.ints(sizes_at);
    scales.reset();
  }
  const bool stretch = c.node.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch";
  Dims out = *in;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    std::int64_t& d = out[axes[i]];
    if (sizes && stretch) {
      KILN_CHECK(sizes->size() == axes.size(), "sizes must have {} entries for input {}, got {}", axes.size(),
                 text(*in), sizes->size());
      d = (*sizes)[i];
    } else if (scales && !sizes) {
      KILN_CHECK(scales->size() == axes.size(), "scales must have {} entries for input {}, got {}", axes.size(),
                 text(*in), scales->size());
      d = known(d) ? static_cast<std::int64_t>(std::floor((*scales)[i] * static_cast<double>(d))) : kUnknown;
    } else {
      d = kUnknown;
    }
  }
  return {tensor(c.dtype(0), out)};
}

// ---------------------------------------------------------------- reductions and indexing

Outs reduce(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const std::optional<Dims> axes = c.has(1) ? c.ints(1) : std::optional(c.node.attr_ints("axes"));
  const bool keep = c.node.attr_int("keepdims", 1) != 0;
  if (!in || !axes) return {of_rank(c.dtype(0), in && keep ? rank_of(in) : std::nullopt)};
  const bool noop = axes->empty() && c.node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<std::size_t> dims = axes_of(*axes, in->size());
  if (axes->empty() && !noop)
    for (std::size_t d = 0; d < in->size(); ++d) dims.push_back(d);
  Dims out;
  for (std::size_t d = 0; d < in->size(); ++d) {
    if (!listed(dims, d))
      out.push_back((*in)[d]);
    else if (keep)
      out.push_back(1);
  }
  return {tensor(c.dtype(0), out)};
}

Outs arg_reduce(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const bool keep = c.node.attr_int("keepdims", 1) != 0;
  if (!in) return {tensor(DType::i64, std::nullopt)};
  const std::size_t d = axis_of(c.node.attr_int("axis", 0), in->size());
  KILN_CHECK((*in)[d] != 0, "cannot take the {} along dim {} of size 0 in shape {}", c.node.op_type, d, text(*in));
  Dims out = *in;
  if (keep)
    out[d] = 1;
  else
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  return {tensor(DType::i64, out)};
}

Outs top_k(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt), tensor(DType::i64, std::nullopt)};
  const std::optional<std::int64_t> k = c.opset >= 10 ? c.scalar(1) : std::optional(c.node.attr_int("k", -1));
  const std::size_t d = axis_of(c.node.attr_int("axis", -1), in->size());
  Dims out = *in;
  out[d] = kUnknown;
  if (k) {
    KILN_CHECK(*k >= 0 && (!known((*in)[d]) || *k <= (*in)[d]),
               "K = {} is out of range for dim {} of size {} in shape {}", *k, d, (*in)[d], text(*in));
    out[d] = *k;
  }
  return {tensor(c.dtype(0), out), tensor(DType::i64, out)};
}

Outs gather(const Context& c) {
  const std::optional<Dims>&data = c.dims(0), &indices = c.dims(1);
  if (!data || !indices) return {tensor(c.dtype(0), std::nullopt)};
  const std::size_t d = axis_of(c.node.attr_int("axis", 0), data->size());
  Dims out(data->begin(), data->begin() + static_cast<std::ptrdiff_t>(d));
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), data->begin() + static_cast<std::ptrdiff_t>(d) + 1, data->end());
  InferredValue result = tensor(c.dtype(0), out);
  const std::optional<Dims> at = c.ints(1);
  if (c.in(0).value && at) {
    const std::int64_t n = (*data)[d];
    std::vector<Dims> index;
    for (const std::int64_t s : *data) index.push_back(iota(s));
    index[d].clear();
    for (const std::int64_t i : *at) {
      KILN_CHECK(i >= -n && i < n, "indices hold {}, out of range for a dim of size {}", i, n);
      index[d].push_back(i < 0 ? i + n : i);
    }
    result.value = take(*c.in(0).value, index).reshaped(Shape(out));
  }
  return {result};
}

Outs gather_elements(const Context& c) {
  const std::optional<Dims>&data = c.dims(0), &indices = c.dims(1);
  if (data && indices) {
    KILN_CHECK(data->size() == indices->size(), "data {} and indices {} must have one rank", text(*data),
               text(*indices));
    (void)axis_of(c.node.attr_int("axis", 0), data->size());
  }
  return {tensor(c.dtype(0), indices)};
}

Outs gather_nd(const Context& c) {
  const std::optional<Dims>&data = c.dims(0), &indices = c.dims(1);
  if (!data || !indices || indices->empty() || !known(indices->back())) return {tensor(c.dtype(0), std::nullopt)};
  const auto b = static_cast<std::size_t>(c.node.attr_int("batch_dims", 0));
  const auto m = static_cast<std::size_t>(indices->back());
  KILN_CHECK(m >= 1 && b + m <= data->size(),
             "index tuples of length {} do not fit data of shape {} after {} batch dims", m, text(*data), b);
  Dims out(indices->begin(), indices->end() - 1);
  out.insert(out.end(), data->begin() + static_cast<std::ptrdiff_t>(b + m), data->end());
  return {tensor(c.dtype(0), out)};
}

Outs non_zero(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(DType::i64, 2)};
  return {tensor(DType::i64, Dims{std::max<std::int64_t>(1, static_cast<std::int64_t>(in->size())), kUnknown})};
}

Outs one_hot(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(2), std::nullopt)};
  const std::size_t axis = axis_of(c.node.attr_int("axis", -1), in->size() + 1);
  std::int64_t depth = kUnknown;
  if (const auto v = c.reals(1)) {
    KILN_CHECK(v->size() == 1, "depth must hold one value, got {} values", v->size());
    depth = static_cast<std::int64_t>(v->front());
    KILN_CHECK(depth > 0, "depth must be positive, got {}", v->front());
  }
  Dims out = *in;
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  return {tensor(c.dtype(2), out)};
}

Outs eye_like(const Context& c) {
  const std::optional<DType> dtype = c.node.find("dtype") ? held(c.node.attr_int("dtype", 0)) : c.dtype(0);
  return {tensor(dtype, c.dims(0))};
}

Outs range(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c);
  const auto start = c.reals(0), limit = c.reals(1), delta = c.reals(2);
  if (!start || !limit || !delta || !dtype) return {of_rank(dtype, 1)};
  KILN_CHECK(start->size() == 1 && limit->size() == 1 && delta->size() == 1, "start, limit and delta must be scalars");
  KILN_CHECK(delta->front() != 0, "delta must not be 0");
  const auto n =
      static_cast<std::int64_t>(std::max(std::ceil((limit->front() - start->front()) / delta->front()), 0.0));
  InferredValue out = tensor(dtype, Dims{n});
  if (n <= kValueLimit) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      v[static_cast<std::size_t>(i)] = start->front() + static_cast<double>(i) * delta->front();
    out.value = TensorData::from(v, Shape{n}).convert(*dtype);
  }
  return {out};
}

Outs det(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(in->size() >= 2, "expected matrices [..., n, n], got {}", text(*in));
  return {tensor(c.dtype(0), Dims(in->begin(), in->end() - 2))};
}

// Einsum: each subscript's size from the operands (1 broadcasts), an ellipsis' dims
// broadcast from the right, the output's subscripts explicit or implicit (the ellipsis, then
// the letters used once, in order).
Outs einsum(const Context& c) {
  std::string equation;
  for (const char ch : c.node.attr_string("equation", ""))
    if (ch != ' ') equation += ch;
  const std::optional<DType> dtype = same_dtype(c);
  const std::size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t at = 0;;) {
    const std::size_t comma = lhs.find(',', at);
    terms.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  KILN_CHECK(terms.size() == c.size(), "equation '{}' names {} operands, the node has {}", equation, terms.size(),
             c.size());
  const auto letters = [](const std::string& term) {
    std::string out;
    for (const char ch : term)
      if (ch != '.') out += ch;
    return out;
  };
  std::map<char, std::int64_t> sizes;
  std::map<char, int> uses;
  Dims ellipsis;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::optional<Dims>& dims = c.dims(i);
    if (!dims) return {tensor(dtype, std::nullopt)};
    const std::string named = letters(terms[i]);
    const bool has = named.size() != terms[i].size();
    KILN_CHECK(has ? dims->size() >= named.size() : dims->size() == named.size(),
               "term {} of equation '{}' does not fit input {} of shape {}", i, equation, i, text(*dims));
    const std::size_t count = dims->size() - named.size(), at = has ? terms[i].find('.') : named.size();
    const Dims own(dims->begin() + static_cast<std::ptrdiff_t>(at),
                   dims->begin() + static_cast<std::ptrdiff_t>(at + count));
    ellipsis = broadcast(ellipsis, own);
    for (std::size_t j = 0; j < named.size(); ++j) {
      const std::int64_t n = (*dims)[j < at ? j : j + count];
      const auto [it, fresh] = sizes.try_emplace(named[j], n);
      if (!fresh) it->second = broadcast({it->second}, {n}).front();
      ++uses[named[j]];
    }
  }
  Dims out;
  if (arrow != std::string::npos) {
    for (const char ch : equation.substr(arrow + 2)) {
      if (ch == '.') continue;
      KILN_CHECK(sizes.count(ch) == 1, "equation '{}' has the output subscript '{}', which no input has", equation,
                 std::string(1, ch));
      out.push_back(sizes[ch]);
    }
    const std::string rhs = equation.substr(arrow + 2);
    if (rhs.find('.') != std::string::npos)
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(rhs.find('.')), ellipsis.begin(), ellipsis.end());
  } else {
    out = ellipsis;
    for (const auto& [ch, n] : uses)
      if (n == 1) out.push_back(sizes[ch]);
  }
  return {tensor(dtype, out)};
}

// ---------------------------------------------------------------- loss, signal, vision, misc

Outs loss(const Context& c) {
  const std::optional<Dims>& scores = c.dims(0);
  const std::string reduction = c.node.attr_string("reduction", "mean");
  std::optional<Dims> out = Dims{};
  if (reduction == "none") {
    out = scores;
    if (out && out->size() >= 2) out->erase(out->begin() + 1);
  }
  return {tensor(c.dtype(0), out), tensor(c.dtype(0), scores)};
}

Outs window_function(const Context& c) {
  const std::optional<DType> dtype = held(c.node.attr_int("output_datatype", 1));
  const std::optional<std::int64_t> n = c.scalar(0);
  return {tensor(dtype, Dims{n ? *n : kUnknown})};
}

std::int64_t bins(std::int64_t size, bool onesided) {
  if (!known(size)) return kUnknown;
  return onesided ? size / 2 + 1 : size;
}

// An optional one-number input (DFT's length and axis, STFT's step): the fallback when
// omitted, unknown when given but not known before running.
std::int64_t int_input(const Context& c, std::size_t i, std::int64_t fallback) {
  if (!c.given(i)) return fallback;
  return c.scalar(i).value_or(kUnknown);
}

Outs dft(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::int64_t axis = c.opset >= 20 ? int_input(c, 2, -2) : c.node.attr_int("axis", 1);
  if (c.opset >= 20 && c.given(2) && !c.scalar(2)) return {of_rank(c.dtype(0), in->size())};
  const std::size_t dim = axis_of(axis, in->size());
  const bool onesided = c.node.attr_int("onesided", 0) != 0;
  Dims out = *in;
  out[dim] = bins(int_input(c, 1, (*in)[dim]), onesided);
  out.back() = 2;
  return {tensor(c.dtype(0), out)};
}

Outs stft(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(c.dtype(0), 4)};
  KILN_CHECK(in->size() == 3, "expected a signal [batch, length, 1 or 2], got {}", text(*in));
  const std::int64_t step = int_input(c, 1, kUnknown);
  std::int64_t frame = int_input(c, 3, kUnknown);
  if (c.given(2) && c.dims(2) && c.dims(2)->size() == 1) frame = (*c.dims(2))[0];
  std::int64_t frames = kUnknown;
  if (known(step) && known(frame) && known((*in)[1])) frames = 1 + ((*in)[1] - frame) / step;
  return {tensor(c.dtype(0), Dims{(*in)[0], frames, bins(frame, c.node.attr_int("onesided", 1) != 0), 2})};
}

Outs grid_sample(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &grid = c.dims(1);
  if (!x || !grid) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(grid->size() == x->size() && x->size() >= 3,
             "expected an input [N, C, spatial...] and a grid of its rank, got {} and {}", text(*x), text(*grid));
  Dims out{merge((*x)[0], (*grid)[0], "the batch of the input and of the grid"), (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  return {tensor(c.dtype(0), out)};
}

Outs roi_align(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &rois = c.dims(1);
  return {tensor(c.dtype(0), Dims{rois ? (*rois)[0] : kUnknown, x && x->size() > 1 ? (*x)[1] : kUnknown,
                                  c.node.attr_int("output_height", 1), c.node.attr_int("output_width", 1)})};
}

Outs non_max_suppression(const Context&) { return {tensor(DType::i64, Dims{kUnknown, 3})}; }

Outs max_unpool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (c.given(2)) {
    if (const auto out = c.ints(2)) return {tensor(c.dtype(0), out)};
    return {of_rank(c.dtype(0), rank_of(x))};
  }
  if (!x) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...], got {}", text(*x));
  const std::size_t n = x->size() - 2;
  const Dims kernel = spatial_attr(c.node, "kernel_shape", n, 1), stride = spatial_attr(c.node, "strides", n, 1);
  const Dims pads = spatial_attr(c.node, "pads", 2 * n, 0);
  Dims out = *x;
  for (std::size_t i = 0; i < n; ++i)
    if (known(out[2 + i])) out[2 + i] = (out[2 + i] - 1) * stride[i] - pads[i] - pads[n + i] + kernel[i];
  return {tensor(c.dtype(0), out)};
}

// Unique: Y (the unique slices along `axis`, or elements), indices, inverse_indices, counts.
Outs unique(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const InferredValue found = tensor(DType::i64, Dims{kUnknown});
  if (!in) return {tensor(c.dtype(0), std::nullopt), found, found, found};
  if (!c.node.find("axis"))
    return {tensor(c.dtype(0), Dims{kUnknown}), found, tensor(DType::i64, Dims{product(*in)}), found};
  const std::size_t d = axis_of(c.node.attr_int("axis", 0), in->size());
  Dims y = *in;
  y[d] = kUnknown;
  return {tensor(c.dtype(0), y), found, tensor(DType::i64, Dims{(*in)[d]}), found};
}

Outs compress(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!c.node.find("axis")) return {tensor(c.dtype(0), Dims{kUnknown})};
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  Dims out = *in;
  out[axis_of(c.node.attr_int("axis", 0), in->size())] = kUnknown;
  return {tensor(c.dtype(0), out)};
}

Outs center_crop_pad(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::optional<Dims> sizes = c.ints(1);
  Dims listed_axes = c.node.attr_ints("axes");
  if (listed_axes.empty()) listed_axes = iota(static_cast<std::int64_t>(in->size()));
  const std::vector<std::size_t> axes = axes_of(listed_axes, in->size());
  Dims out = *in;
  for (std::size_t i = 0; i < axes.size(); ++i) out[axes[i]] = sizes && i < sizes->size() ? (*sizes)[i] : kUnknown;
  return {tensor(c.dtype(0), out)};
}

Outs col2im(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const std::optional<Dims> image = c.ints(1), block = c.ints(2);
  if (!in || !image || !block) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(in->size() == 3, "expected an input [N, C * prod(block), L], got {}", text(*in));
  const std::int64_t k = product(*block);
  KILN_CHECK(!known((*in)[1]) || (k >= 1 && (*in)[1] % k == 0),
             "the input's dim 1 ({}) must be a multiple of prod(block_shape {})", (*in)[1], *block);
  Dims out{(*in)[0], known((*in)[1]) ? (*in)[1] / k : kUnknown};
  out.insert(out.end(), image->begin(), image->end());
  return {tensor(c.dtype(0), out)};
}

// ---------------------------------------------------------------- the table

using Rule = Outs (*)(const Context&);

const std::map<std::string, Rule, std::less<>>& rules() {
  static const std::map<std::string, Rule, std::less<>> table = [] {
    std::map<std::string, Rule, std::less<>> t;
    const auto add = [&](std::initializer_list<std::string_view> ops, Rule rule) {
      for (const std::string_view op : ops) t.emplace(op, rule);
    };
    add({"Abs",         "Neg",       "Exp",      "Log",       "Sqrt",   "Reciprocal", "Sin",     "Cos",
         "Tan",         "Tanh",      "Erf",      "Floor",     "Ceil",   "Round",      "Sigmoid", "Relu",
         "Sign",        "Softplus",  "Asin",     "Acos",      "Atan",   "Sinh",       "Cosh",    "Asinh",
         "Acosh",       "Atanh",     "Softsign", "LeakyRelu", "Elu",    "Selu",       "Celu",    "ThresholdedRelu",
         "HardSigmoid", "HardSwish", "Mish",     "Gelu",      "Shrink", "Clip",       "Pow"},
        unary);
    add({"Add", "Sub", "Mul", "Div", "Mod", "PRelu", "BitShift", "Sum", "Mean", "Max", "Min"}, binary);
    add({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"},
        to_bool);
    add({"Cast", "CastLike"}, cast);
    add({"Where"}, where);
    add({"Identity"}, identity);
    add({"Reshape"}, reshape);
    add({"Flatten"}, flatten);
    add({"Transpose"}, transpose);
    add({"Concat"}, concat);
    add({"Split"}, split);
    add({"Slice"}, slice);
    add({"Squeeze"}, squeeze);
    add({"Unsqueeze"}, unsqueeze);
    add({"Shape"}, shape);
    add({"Size"}, size);
    add({"Constant"}, constant);
    add({"ConstantOfShape"}, constant_of_shape);
    add({"Expand"}, expand);
    add({"Tile"}, tile);
    add({"Pad"}, pad);
    add({"DepthToSpace", "SpaceToDepth"}, depth_to_space);
    add({"MatMul"}, matmul);
    add({"Gemm"}, gemm);
    add({"Conv"}, conv);
    add({"ConvTranspose"}, conv_transpose);
    add({"MaxPool", "AveragePool", "LpPool"}, pool);
    add({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}, global_pool);
    add({"BatchNormalization"}, batch_norm);
    add({"LayerNormalization"}, layer_norm);
    add({"InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization", "LpNormalization", "Softmax",
         "LogSoftmax", "Hardmax", "LRN", "CumSum", "Trilu", "ReverseSequence", "Scatter", "ScatterElements",
         "ScatterND"},
        same_as_input);
    add({"Dropout"}, dropout);
    add({"RNN", "GRU", "LSTM"}, recurrent);
    add({"Resize", "Upsample"}, resize);
    add({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
         "ReduceLogSumExp", "ReduceSumSquare"},
        reduce);
    add({"ArgMax", "ArgMin"}, arg_reduce);
    add({"TopK"}, top_k);
    add({"Gather"}, gather);
    add({"GatherElements"}, gather_elements);
    add({"GatherND"}, gather_nd);
    add({"NonZero"}, non_zero);
    add({"OneHot"}, one_hot);
    add({"EyeLike"}, eye_like);
    add({"Range"}, range);
    add({"Det"}, det);
    add({"Einsum"}, einsum);
    add({"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}, loss);
    add({"HannWindow", "HammingWindow", "BlackmanWindow"}, window_function);
    add({"DFT"}, dft);
    add({"STFT"}, stft);
    add({"GridSample"}, grid_sample);
    add({"RoiAlign"}, roi_align);
    add({"NonMaxSuppression"}, non_max_suppression);
    add({"MaxUnpool"}, max_unpool);
    add({"Unique"}, unique);
    add({"Compress"}, compress);
    add({"CenterCropPad"}, center_crop_pad);
    add({"Col2Im"}, col2im);
    return t;
  }();
  return table;
}

// A graph input's dims: those given, checked against the declaration, or the declared ones.
std::optional<Dims> input_dims_of(const ValueInfo& input, const std::map<std::string, Dims>& given) {
  const auto it = given.find(input.name);
  if (it == given.end()) {
    if (!input.shape) return std::nullopt;
    Dims dims;
    for (const Dim& d : *input.shape) dims.push_back(d.value >= 0 ? d.value : kUnknown);
    return dims;
  }
  if (input.shape) {
    bool fits = it->second.size() == input.shape->size();
    for (std::size_t d = 0; fits && d < it->second.size(); ++d)
      fits = (*input.shape)[d].value < 0 || (*input.shape)[d].value == it->second[d];
    std::string declared;
    for (const Dim& d : *input.shape)
      declared += (declared.empty() ? "" : ", ") + (d.value >= 0      ? std::to_string(d.value)
                                                    : d.param.empty() ? "?"
                                                                      : d.param);
    KILN_CHECK(fits, "onnx: input '{}' is given dims {}, the model declares [{}]", input.name, it->second, declared);
  }
  return it->second;
}

}  // namespace

std::map<std::string, InferredValue> infer_shapes(const Graph& graph, std::int64_t opset,
                                                  const std::map<std::string, std::vector<std::int64_t>>& input_dims) {
  std::map<std::string, InferredValue> values;
  const auto trim = [](InferredValue& v) {
    if (v.value && v.value->numel() > kValueLimit) v.value.reset();
  };
  for (const TensorValue& init : graph.initializers) {
    InferredValue v = from_tensor(init);
    trim(v);
    values.emplace(init.name, std::move(v));  // the first of a name counts, as in Model
  }
  for (const auto& [name, dims] : input_dims)
    KILN_CHECK(
        std::any_of(graph.inputs.begin(), graph.inputs.end(), [&](const ValueInfo& v) { return v.name == name; }),
        "onnx: infer_shapes: dims are given for '{}', which is not a graph input", name);
  for (const ValueInfo& input : graph.inputs) {
    if (values.count(input.name)) continue;  // IR < 4 lists initializers as inputs
    values.emplace(input.name,
                   tensor(input.is_tensor ? dtype_of(input.type) : std::nullopt, input_dims_of(input, input_dims)));
  }
  static const InferredValue nothing;
  std::vector<const InferredValue*> inputs;
  for (const Node& node : graph.nodes) {
    inputs.clear();
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      const auto it = values.find(name);
      inputs.push_back(it != values.end() ? &it->second : &nothing);
    }
    Outs outs;
    const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
    const auto rule = rules().find(node.op_type);
    if (default_domain && rule != rules().end()) {
      try {
        outs = rule->second(Context{node, inputs, opset});
      } catch (const Error& e) {
        throw Error("onnx: " + node.describe() + " (opset " + std::to_string(opset) + "): " + e.what());
      }
    }
    for (std::size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k].empty()) continue;
      InferredValue v = k < outs.size() ? std::move(outs[k]) : InferredValue{};
      trim(v);
      values.insert_or_assign(node.outputs[k], std::move(v));
    }
  }
  return values;
}

}  // namespace kiln::onnx
