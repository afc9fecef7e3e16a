// src/onnx/shape_rules_elementwise_layout.cpp: the shape rules of the elementwise ops
// (kiln/onnx/ops_elementwise.hpp: broadcasting, Cast, Where, and the contents of the
// arithmetic and comparisons on small known tensors, computed here) and of the layout ops
// (kiln/onnx/ops_layout.hpp: Reshape, Transpose, Concat, Split, Slice, Squeeze, Shape,
// Constant, Expand, Pad...), which carry known contents through. Named by the table in
// src/onnx/shapes.cpp, over the shared pieces of src/onnx/shape_rules.hpp.
#include "shape_rules.hpp"

#include <cmath>
#include <functional>
#include <numeric>

namespace kiln::onnx::shape_rules {

// ---------------------------------------------------------------- elementwise

namespace {

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

}  // namespace

Outs same_as_input(const Context& c) { return {tensor(c.dtype(0), c.dims(0))}; }
Outs unary(const Context& c) { return elementwise(c, c.dtype(0)); }
Outs binary(const Context& c) { return elementwise(c, same_dtype(c)); }
Outs to_bool(const Context& c) {
  (void)same_dtype(c);
  return elementwise(c, DType::boolean);
}

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

namespace {

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

}  // namespace

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
    const SliceExtent e = slice_extent(n, (*starts)[i], (*ends)[i], step);
    out[dims[i]] = e.size;
    index[dims[i]] = iota(e.size, e.first, step);
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
    dtype = held_dtype_of(t->type);
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

}  // namespace kiln::onnx::shape_rules
