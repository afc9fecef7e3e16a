// What onnx::Model<B> (kiln/onnx/model.hpp) runs nodes with: the values that flow through a
// graph, the arguments a node's kernel receives, the table of kernels by op type, and the
// helpers the kernels share (axes, integer inputs read on the host, elementwise programs of
// ONNX's own). Kernels are written once over any backend B, with B's primitives and the
// provided ones (kiln/backend/provided.hpp); the files kiln/onnx/ops_*.hpp each add a group.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/codegen/expr.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/core/error.hpp"
#include "kiln/onnx/graph.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::onnx {

// An op, or a form of an op, that Kiln does not run (an op type missing from the table, an
// attribute value it does not implement, an element type it does not hold). A kiln::Error,
// told apart so that the node-test runner can count "unsupported" apart from "failed".
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& message) : Error(message) {}
};

template <class... Args>
[[noreturn]] void unsupported(::kiln::detail::Message<sizeof...(Args)> message, const Args&... args) {
  try {
    ::kiln::detail::fail(message, args...);
  } catch (const Error& e) {
    throw Unsupported(e.what());
  }
}

// A value of the graph: a tensor on the backend, or on the host, or both. Initializers,
// constants and shapes start on the host, where kernels that need their numbers (Reshape's
// shape, Slice's starts) read them without a transfer; a kernel that computes with a value
// takes it on the backend, uploaded once. A kernel's results are on the backend.
//
// Besides tensors of Kiln's dtypes, a Value holds what ONNX graphs pass around that Kiln's
// tensors are not: tensors of the integer types Kiln has no dtype of (INT8, INT16, UINT16 held
// in i32, UINT32 and UINT64 in i64, marked with their element type), STRING tensors (on the
// host only), sequences of values, and the empty optional.
template <class B> class Value {
 public:
  using Primitive = typename B::Primitive;
  using Device = typename B::Device;
  enum class Kind : std::uint8_t { tensor, strings, sequence, none };

  Value() = default;
  Value(Primitive tensor) : tensor_(std::make_shared<std::optional<Primitive>>(std::move(tensor))) {}
  static Value host(TensorData data, const Device& device) {
    Value v;
    v.host_ = std::make_shared<TensorData>(std::move(data));
    v.tensor_ = std::make_shared<std::optional<Primitive>>();
    v.device_ = device;
    return v;
  }
  // A tensor of an integer element type held in a wider dtype (held_dtype_of(type)).
  static Value typed(Value tensor, ElementType type) {
    const std::optional<DType> held = held_dtype_of(type);
    KILN_CHECK(held && tensor.kind_ == Kind::tensor && *held == tensor.dtype(), "onnx: a {} tensor is held as {}, not {}",
               element_type_name(type), held ? dtype_name(*held) : "nothing", tensor.describe());
    tensor.type_ = dtype_of(type) ? ElementType::undefined : type;
    return tensor;
  }
  // A STRING tensor (row-major values).
  static Value strings(Shape shape, std::vector<std::string> values) {
    KILN_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "onnx: {} strings for a STRING tensor of {}",
               values.size(), shape);
    Value v;
    v.kind_ = Kind::strings;
    v.rest_ = std::make_shared<const Rest>(Rest{std::move(shape), {}, std::move(values)});
    return v;
  }
  // A sequence of tensors (or of sequences) of one element type.
  static Value sequence(std::vector<Value> elements, ElementType type) {
    Value v;
    v.kind_ = Kind::sequence;
    v.type_ = type;
    v.rest_ = std::make_shared<const Rest>(Rest{Shape{}, std::move(elements), {}});
    return v;
  }
  // An optional without a value.
  static Value none() {
    Value v;
    v.kind_ = Kind::none;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::tensor || kind_ == Kind::strings; }
  // The ONNX element type of a tensor, or of a sequence's elements.
  ElementType type() const {
    if (kind_ == Kind::strings) return ElementType::string;
    if (type_ != ElementType::undefined || kind_ != Kind::tensor) return type_;
    return element_type_of(dtype());
  }
  // Whether it is a tensor of a type held in a wider dtype (INT8...).
  bool widened() const { return kind_ == Kind::tensor && type_ != ElementType::undefined; }
  // "a sequence of FLOAT tensors", "an INT8 tensor", for messages.
  std::string describe() const {
    switch (kind_) {
      case Kind::sequence: return "a sequence of " + element_type_name(type_) + " tensors";
      case Kind::none: return "an empty optional";
      default: {
        const std::string name = element_type_name(type());
        return (name[0] == 'I' || name == "UNDEFINED" ? "an " : "a ") + name + " tensor";
      }
    }
  }

  Shape shape() const {
    if (kind_ == Kind::strings) return rest_->shape;
    expect_tensor();
    return host_ ? host_->shape() : B::shape(**tensor_);
  }
  DType dtype() const {
    if (kind_ == Kind::strings) unsupported("Kiln's ops take no STRING tensors");
    expect_tensor();
    return host_ ? host_->dtype() : B::dtype(**tensor_);
  }
  std::size_t rank() const { return shape().rank(); }

  // The tensor on the backend (uploaded on first use; the copies of a Value share it).
  const Primitive& tensor() const {
    if (kind_ == Kind::strings) unsupported("Kiln's ops take no STRING tensors");
    expect_tensor();
    if (!*tensor_) *tensor_ = B::from_data(*host_, device_);
    return **tensor_;
  }
  // The tensor's values on the host (read back on first use).
  const TensorData& data() const {
    if (kind_ == Kind::strings) unsupported("Kiln's ops take no STRING tensors");
    expect_tensor();
    if (!host_) host_ = std::make_shared<TensorData>(B::into_data(**tensor_));
    return *host_;
  }
  bool on_host() const { return host_ != nullptr; }
  const std::vector<std::string>& string_values() const {
    KILN_CHECK(kind_ == Kind::strings, "expected a STRING tensor, got {}", describe());
    return rest_->strings;
  }
  const std::vector<Value>& elements() const {
    KILN_CHECK(kind_ == Kind::sequence, "expected a sequence, got {}", describe());
    return rest_->elements;
  }

 private:
  struct Rest {
    Shape shape;                       // a STRING tensor's
    std::vector<Value> elements;       // a sequence's
    std::vector<std::string> strings;  // a STRING tensor's
  };
  void expect_tensor() const {
    KILN_CHECK(kind_ == Kind::tensor || kind_ == Kind::strings, "expected a tensor, got {}", describe());
  }

  std::shared_ptr<std::optional<Primitive>> tensor_;
  mutable std::shared_ptr<TensorData> host_;
  std::shared_ptr<const Rest> rest_;
  Device device_{};
  Kind kind_ = Kind::tensor;
  ElementType type_ = ElementType::undefined;  // a widened tensor's or a sequence's element type
};

template <class B> class GraphRunner;

// A graph attribute of a node (If's branches, Loop's and Scan's body), made ready to run by
// the node's GraphRunner. `captures` are the positions, among the values the node's subgraphs
// read from outside them (Args::captured), of the ones this subgraph reads, in the order its
// runner takes them.
template <class B> struct Subgraph {
  std::string attribute;
  std::shared_ptr<const GraphRunner<B>> runner;
  std::vector<std::size_t> captures;
};

// An activation that the runner folded into the node computing its input (GraphRunner: a
// Conv, Gemm or MatMul whose one reader is a Relu, on a backend with convolution or matmul
// epilogues). The node's kernel applies `formula` to its result: inside the convolution or
// the product where the backend takes it (B::conv2d_program, B::matmul_program), after it
// otherwise (epilogue_program, apply_epilogue).
struct Epilogue {
  std::string op_type;  // the activation's
  std::function<codegen::Expr(const codegen::Expr&)> formula;
};

// What a kernel receives: its node, its inputs (nullopt where the node omits an optional
// one), the model's opset and the device; for a node with subgraphs, the subgraphs and the
// outer values they read; for a node with an activation folded in, that activation.
template <class B> struct Args {
  using Primitive = typename B::Primitive;
  const Node& node;
  std::span<const std::optional<Value<B>>> inputs;
  std::int64_t opset;
  typename B::Device device;
  std::span<const Subgraph<B>> subgraphs = {};
  std::span<const std::optional<Value<B>>> captured = {};
  const Epilogue* epilogue = nullptr;

  std::size_t size() const { return inputs.size(); }
  bool has(std::size_t i) const { return i < inputs.size() && inputs[i].has_value(); }
  const Value<B>& value(std::size_t i) const {
    KILN_CHECK(has(i), "input {} is required and missing", i);
    return *inputs[i];
  }
  const Primitive& operator[](std::size_t i) const { return value(i).tensor(); }
  Shape shape(std::size_t i) const { return value(i).shape(); }
  DType dtype(std::size_t i) const { return value(i).dtype(); }

  // An integer input's values (shapes, axes, starts), read on the host.
  std::vector<std::int64_t> ints(std::size_t i) const {
    const TensorData& d = value(i).data();
    KILN_CHECK(is_int(d.dtype()), "input {} must be an integer tensor, got {} {}", i, d.shape(), d.dtype());
    return d.to_vec<std::int64_t>();
  }
  // A one-element input's value (Clip's min, ConstantOfShape's value...).
  double scalar(std::size_t i) const {
    const TensorData& d = value(i).data();
    KILN_CHECK(d.numel() == 1, "input {} must hold one value, got shape {}", i, d.shape());
    return d.to_vec<double>()[0];
  }
  // Runs the subgraph of graph attribute `attribute` on `inputs` (its formal inputs, in
  // order); returns its outputs. Defined in kiln/onnx/model.hpp, after GraphRunner.
  std::vector<Value<B>> run_subgraph(std::string_view attribute, std::vector<Value<B>> inputs) const;
  // The subgraph of a graph attribute (its runner: declared outputs...); a kiln::Error when absent.
  const Subgraph<B>& subgraph(std::string_view attribute) const;
};

template <class B> using Kernel = std::function<std::vector<Value<B>>(const Args<B>&)>;

// How an op treats tensors of the integer types held wider (INT8, INT16, UINT16, UINT32,
// UINT64; Value::widened): the ops listed take them because their results stay within the
// values of their inputs, so that nothing needs wrapping to the narrower type. `inputs` says
// which inputs may be of such a type (a bit per input); `source` is the input whose element
// type the results of its held dtype take, or -1 where the results are of other types (bool,
// int64 indices, the base's type for Pow). Cast, CastLike and BitShift type their results
// themselves.
struct WidenedRule {
  int source;
  std::uint32_t inputs;
};
inline std::optional<WidenedRule> widened_rule(std::string_view op) {
  constexpr std::uint32_t all = ~0u;
  static constexpr std::string_view kept[] = {
      "Identity", "Clip",     "Max",       "Min",         "Mod",       "Relu",    "Sign",       "Reshape",
      "Flatten",  "Transpose", "Squeeze",  "Unsqueeze",   "Concat",    "Split",   "Slice",      "Gather",
      "GatherElements", "GatherND", "Expand", "Tile", "Pad", "ReduceMax", "ReduceMin", "ScatterElements",
      "ScatterND", "Compress", "ReverseSequence", "DepthToSpace", "SpaceToDepth", "SequenceConstruct",
      "SequenceInsert", "SequenceAt", "ConcatFromSequence", "SplitToSequence", "Optional",
      "OptionalGetElement"};
  static constexpr std::string_view other[] = {"Equal",  "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                               "Shape",  "Size", "ArgMax",      "ArgMin",  "Cast",
                                               "CastLike", "OptionalHasElement", "SequenceLength", "BitShift"};
  if (std::find(std::begin(kept), std::end(kept), op) != std::end(kept)) return WidenedRule{0, all};
  if (std::find(std::begin(other), std::end(other), op) != std::end(other)) return WidenedRule{-1, all};
  if (op == "Where") return WidenedRule{1, all};
  if (op == "Pow") return WidenedRule{-1, 1u << 1};  // the exponent only: an INT8 base could overflow
  return std::nullopt;
}

// One op type's kernel and the opset versions it implements.
template <class B> struct OpEntry {
  Kernel<B> kernel;
  std::int64_t first_opset = 7;  // older opsets broadcast by attribute, which Kiln does not read
  std::int64_t last_opset = 21;
};

template <class B> using OpTable = std::map<std::string, OpEntry<B>, std::less<>>;

// A group of op types: those one kiln/onnx/ops_*.hpp file registers, named, so that a module
// generated by kiln-onnx2cpp builds a table of the groups its graph uses only (and a program
// links only their kernels).
struct OpGroup {
  std::string_view name;
  std::span<const std::string_view> ops;
};

// A group's registration function over B (add_nn_ops<B>...).
template <class B> using AddOps = void (*)(OpTable<B>&);

// Adds a group's kernels to `table`, checking that the group registers exactly the op types
// it lists: a kernel added without its name in the list would be missing from generated
// modules, whose groups come from the lists.
template <class B> void add_group(OpTable<B>& table, const OpGroup& group, AddOps<B> add) {
  OpTable<B> part;
  add(part);
  bool same = part.size() == group.ops.size();
  for (const std::string_view op : group.ops) same = same && part.count(op) == 1;
  if (!same) {
    std::vector<std::string> registered;
    for (const auto& [op, entry] : part) registered.push_back(op);
    KILN_FAIL("kiln::onnx: the op group {} registers {} but lists {}", group.name, registered, group.ops);
  }
  for (auto& [op, entry] : part) {
    KILN_CHECK(!table.count(op), "kiln::onnx: two op groups register {}", op);
    table.emplace(op, std::move(entry));
  }
}

// The values of an integer type held wider (INT8: -128 to 127...; UINT64: 0 to 2^63 - 1, what
// i64 holds of it).
inline std::pair<std::int64_t, std::int64_t> widened_range(ElementType type) {
  switch (type) {
    case ElementType::int8: return {-128, 127};
    case ElementType::int16: return {-32768, 32767};
    case ElementType::uint16: return {0, 65535};
    case ElementType::uint32: return {0, 4294967295};
    case ElementType::uint64: return {0, INT64_MAX};
    default: KILN_FAIL("onnx: {} is not an integer type held wider", element_type_name(type));
  }
}

// A tensor of the file (an initializer, a Constant's value) as a Value on the host: a type held
// wider marked as such, a STRING tensor as its strings.
template <class B> Value<B> tensor_value(const TensorValue& t, const typename B::Device& device, std::string_view where) {
  if (t.type == ElementType::string) return Value<B>::strings(Shape(t.dims), t.strings);
  Value<B> v = Value<B>::host(t.values(where), device);
  return dtype_of(t.type) ? v : Value<B>::typed(std::move(v), t.type);
}

// ---------------------------------------------------------------- shared helpers
namespace detail {

// An ONNX axis attribute or input (negative counts from the end) as an index, checked.
inline std::size_t axis(std::int64_t axis, std::size_t rank, std::string_view what = "axis") {
  const auto r = static_cast<std::int64_t>(rank);
  KILN_CHECK(axis >= -r && axis < r, "{} {} is out of range for rank {}", what, axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

inline std::vector<std::size_t> axes(std::span<const std::int64_t> values, std::size_t rank) {
  std::vector<std::size_t> out;
  for (const std::int64_t a : values) {
    const std::size_t i = axis(a, rank, "axes entry");
    KILN_CHECK(std::find(out.begin(), out.end(), i) == out.end(), "axes name dim {} twice", i);
    out.push_back(i);
  }
  return out;
}

// The dtype that holds an element type named by an attribute (Cast's `to`, EyeLike's
// `dtype`), or Unsupported for the types Kiln has no dtype for.
inline DType held_dtype(std::int64_t onnx_type) {
  const auto type = static_cast<ElementType>(onnx_type);
  const auto dtype = dtype_of(type);
  if (!dtype) unsupported("Kiln holds no {} tensors", element_type_name(type));
  return *dtype;
}

inline Shape with_dim(Shape shape, std::size_t dim, std::int64_t size) {
  shape[dim] = size;
  return shape;
}

// An elementwise program of ONNX's own, traced once per (name, input dtype) and kept for
// the process: `formula(inputs, params)` builds the output's tree from the inputs' and
// parameters' symbols (codegen::Expr; a codegen::Mask result makes a bool output).
// `inputs` is the number of tensor inputs, all of `dtype`.
template <class Formula>
const codegen::Program& program(std::string_view name, DType dtype, int inputs, int params, Formula&& formula) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<codegen::Program>, std::less<>> programs;
  std::string key = std::string(name) + "|" + std::string(dtype_name(dtype));
  const std::lock_guard lock(mutex);
  auto it = programs.find(key);
  if (it != programs.end()) return *it->second;
  KILN_CHECK(dtype != DType::boolean, "{}: expected a numeric tensor, got bool", name);
  std::vector<codegen::Expr> in, p;
  for (int i = 0; i < inputs; ++i) in.push_back(codegen::Expr::input(i));
  for (int i = 0; i < params; ++i) p.push_back(codegen::Expr::param(i));
  const auto result = formula(std::span<const codegen::Expr>(in), std::span<const codegen::Expr>(p));
  const bool mask = std::is_same_v<std::decay_t<decltype(result)>, codegen::Mask>;
  auto made = std::make_unique<codegen::Program>(codegen::scalar_type_of(dtype), std::vector<DType>(inputs, dtype),
                                                 params, std::vector<codegen::ProgramOutput>{
                                                     {result.node(), mask ? DType::boolean : dtype}});
  return *programs.emplace(std::move(key), std::move(made)).first->second;
}

// Runs a one-output program on `inputs` (broadcast together) with scalar `params`.
template <class B>
typename B::Primitive run(const codegen::Program& program, std::vector<typename B::Primitive> inputs,
                          std::vector<double> params = {}) {
  std::vector<typename B::Primitive> out = B::elementwise(program, inputs, params);
  return std::move(out.front());
}

template <class B> typename B::Primitive reshape(const typename B::Primitive& x, Shape shape) {
  KILN_CHECK(shape.numel() == B::shape(x).numel(), "cannot reshape {} to {}", B::shape(x), shape);
  return B::reshape(x, shape);
}

// x with its dims permuted (perm[i] is the input dim of output dim i), checked.
template <class B>
typename B::Primitive permute(const typename B::Primitive& x, std::span<const std::int64_t> perm) {
  const std::size_t rank = B::shape(x).rank();
  KILN_CHECK(perm.size() == rank, "perm has {} entries for rank {}", perm.size(), rank);
  std::vector<bool> seen(rank, false);
  for (const std::int64_t p : perm) {
    KILN_CHECK(p >= 0 && p < static_cast<std::int64_t>(rank) && !seen[p], "perm {} is not a permutation of 0..{}",
               perm, rank - 1);
    seen[p] = true;
  }
  return B::permute(x, perm);
}

// x broadcast to `shape` (NumPy rules, x's dims aligned to the right).
template <class B> typename B::Primitive broadcast_to(const typename B::Primitive& x, const Shape& shape) {
  Shape s = B::shape(x);
  if (s == shape) return x;
  KILN_CHECK(s.rank() <= shape.rank(), "cannot broadcast {} to {}", s, shape);
  std::vector<std::int64_t> dims(shape.rank() - s.rank(), 1);
  dims.insert(dims.end(), s.begin(), s.end());
  for (std::size_t i = 0; i < dims.size(); ++i)
    KILN_CHECK(dims[i] == shape[i] || dims[i] == 1, "cannot broadcast {} to {}", s, shape);
  const typename B::Primitive r = dims.size() == s.rank() ? x : B::reshape(x, Shape(dims));
  return B::expand(r, shape);
}

// A float scalar tensor of `dtype`, shaped [1, ..., 1] with `rank` dims (for broadcasting).
template <class B>
typename B::Primitive full(const Shape& shape, double value, DType dtype, const typename B::Device& device) {
  return provided::full<B>(shape, value, dtype, device);
}

// Sums / means / maxima over several dims (kept, size 1), by one reduction per dim.
template <class B>
typename B::Primitive reduce(typename B::Primitive x, ops::ReduceOp op, std::span<const std::size_t> dims) {
  if (op == ops::ReduceOp::mean) {
    std::int64_t count = 1;
    for (const std::size_t d : dims) count *= B::shape(x)[d];
    typename B::Primitive s = reduce<B>(std::move(x), ops::ReduceOp::sum, dims);
    return provided::binary_scalar<B, ops::Div>(s, static_cast<double>(count));
  }
  for (const std::size_t d : dims) x = B::reduce(x, op, static_cast<std::int64_t>(d));
  return x;
}

// Removes the size-1 dims `dims` (which reduce kept).
template <class B> typename B::Primitive drop_dims(const typename B::Primitive& x, std::span<const std::size_t> dims) {
  const Shape s = B::shape(x);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < s.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) out.push_back(s[i]);
  return B::reshape(x, Shape(out));
}

// The program of a node's result, with `extra` more inputs added to it first (a bias: in0 +
// in1), then the node's folded activation applied: act(in0 [+ in1]). Traced once per kind.
inline const codegen::Program& epilogue_program(const Epilogue* epilogue, DType dtype, bool bias) {
  const std::string name = std::string("epilogue ") + (epilogue ? epilogue->op_type : "") + (bias ? " +bias" : "");
  return program(name, dtype, bias ? 2 : 1, 0, [&](std::span<const codegen::Expr> in, std::span<const codegen::Expr>) {
    const codegen::Expr x = bias ? in[0] + in[1] : in[0];
    return epilogue ? epilogue->formula(x) : x;
  });
}

// y with the node's folded activation applied (y itself where none is folded in).
template <class B> typename B::Primitive apply_epilogue(const Args<B>& a, const typename B::Primitive& y) {
  if (!a.epilogue) return y;
  return run<B>(epilogue_program(a.epilogue, B::dtype(y), false), {y});
}

}  // namespace detail
}  // namespace kiln::onnx
