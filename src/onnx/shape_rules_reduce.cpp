// src/onnx/shape_rules_reduce.cpp: the shape rules of the reductions and indexing ops
// (kiln/onnx/ops_reduce.hpp): Reduce*, ArgMax/ArgMin, TopK, the Gathers, NonZero, OneHot,
// EyeLike, Range, Det and Einsum. Named by the table in src/onnx/shapes.cpp, over the
// shared pieces of src/onnx/shape_rules.hpp.
#include "shape_rules.hpp"

#include <cmath>
#include <map>

namespace kiln::onnx::shape_rules {

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
  const std::int64_t n = range_count(start->front(), limit->front(), delta->front());
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

}  // namespace kiln::onnx::shape_rules
