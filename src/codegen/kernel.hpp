// The elementwise kernel around a rendered expression (cstyle.hpp), for every C-like
// language, from a table of the parts that differ between them (a KernelDialect): buffer
// and argument declarations, the entry point, the thread index, type names and casts, and
// (the helper functions come with the rendering, each in its language). What every language shares is written once here:
// where each input element is read (flat, strided or a single element), the f16 / bf16
// and bool loads and stores, and the index arithmetic over the layout's integers. GLSL
// (glsl.hpp, for Vulkan) and CUDA C++ (cuda.hpp) are two dialects. Private to Kiln.
#pragma once

#include "codegen/cstyle.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/core/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::codegen {

// f16 and bf16: stored in 16 bits, computed in float.
inline bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// The layout integers a kernel reads (a buffer in GLSL, an argument in CUDA): [0] the
// element count n, [1] the rank, [2, 2 + kMaxRank) the output's dims, then for each input k
// (and after them the output, when it is strided) at kFirstLayout + k * kLayoutStride its
// element offset and kMaxRank strides.
inline constexpr std::size_t kMaxRank = 8;
inline constexpr int kLayoutStride = 1 + static_cast<int>(kMaxRank);
inline constexpr int kFirstLayout = 2 + static_cast<int>(kMaxRank);
// Where a kernel of `inputs` inputs that reads its parameters from the layout finds them:
// after every input's layout and the output's (whether or not the output is strided), two
// integers per parameter, the low and high 32 bits of its value in the program's type.
constexpr int param_layout(std::size_t inputs) {
  return kFirstLayout + kLayoutStride * (static_cast<int>(inputs) + 1);
}
// The two layout integers of parameter `value` in type t (f32: its bits and 0; f64, i64:
// the low and high words; i32, u8: the value and 0).
inline std::array<std::int32_t, 2> param_words(double value, ScalarType t) {
  std::uint64_t bits = 0;
  switch (t) {
    case ScalarType::f32: bits = std::bit_cast<std::uint32_t>(static_cast<float>(value)); break;
    case ScalarType::f64: bits = std::bit_cast<std::uint64_t>(value); break;
    case ScalarType::i32: bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(value)); break;
    case ScalarType::i64: bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(value)); break;
    case ScalarType::u8: bits = static_cast<std::uint8_t>(value); break;
    case ScalarType::boolean: KILN_FAIL("codegen: a bool program has no parameters");
  }
  return {static_cast<std::int32_t>(static_cast<std::uint32_t>(bits)), static_cast<std::int32_t>(static_cast<std::uint32_t>(bits >> 32))};
}

// One output of a kernel: out<k>[i] = value, stored as `dtype`.
struct KernelOutput {
  DType dtype = DType::f32;
  std::string value;           // the rendered expression over in0, in1... (and p0, p1...)
  bool value_is_bool = false;  // the expression is a bool, stored as 0 / 1 bytes
  std::vector<Let> lets = {};  // declared before the value (after the earlier outputs' lets)
};

// What one kernel computes: out0[i] = value0(in0[i], in1[i]...), out1[i] = value1(...)...:
// several outputs of the same elements share the invocation, so each input is read once.
struct ElementwiseKernel {
  std::string name = "kiln_elementwise";  // the entry point, where the language names it
  std::vector<DType> inputs;
  std::vector<KernelOutput> outputs;  // one or more
  std::string helpers;  // the functions the values call, declared as the dialect declares functions
  // f16 / bf16 operands move as their 16 bits (a uint) instead of converting to float and
  // back: copies keep every bit, NaN payloads included.
  bool raw_bits = false;
  // Scalar parameters p0, p1... of type param_type: kernel arguments where the dialect has
  // them (CUDA), else read from the layout integers (GLSL: KernelDialect::param_load).
  int params = 0;
  ScalarType param_type = ScalarType::f32;
  int workgroup_size = 256;  // invocations per workgroup, where the kernel declares it (GLSL)
};

// The kernel of a program's outputs [first, first + count), rendered in `language`: its
// inputs, values, helpers and parameters (the entry's name and workgroup size are the
// caller's). Every backend that generates kernels makes them from programs this way.
inline ElementwiseKernel program_kernel(const Language& language, const Program& program, std::size_t first,
                                        std::size_t count) {
  const std::span<const ProgramOutput> outputs = program.outputs().subspan(first, count);
  std::vector<NodePtr> roots;
  for (const ProgramOutput& out : outputs) roots.push_back(out.root);
  Expressions e = render(language, roots, program.type());
  ElementwiseKernel k;
  k.inputs.assign(program.inputs().begin(), program.inputs().end());
  for (std::size_t o = 0; o < outputs.size(); ++o)
    k.outputs.push_back({outputs[o].dtype, std::move(e.values[o]), outputs[o].root->mask, std::move(e.lets[o])});
  k.helpers = std::move(e.helpers);
  k.raw_bits = std::all_of(outputs.begin(), outputs.end(), [](const ProgramOutput& out) { return moves_only(out.root); });
  k.params = program.param_count();
  k.param_type = program.type();
  return k;
}

// Where the kernel reads its inputs and writes its output.
struct KernelLayout {
  bool strided = false;      // each input's element from the output index and its strides
  bool out_strided = false;  // the output too (a view)
  std::vector<bool> scalar;  // flat kernels: input k is one element, read by every invocation
};

// The parts of an elementwise kernel a language spells its own way.
struct KernelDialect {
  std::string_view name;
  std::string_view index_type;           // the element index: "int" (GLSL), "long long" (CUDA)
  std::string_view (*storage_type)(DType);  // a buffer element
  std::string_view (*value_type)(DType);    // what a loaded element computes as (f16 / bf16: float)
  std::string_view (*scalar_type)(ScalarType);
  std::string (*cast)(std::string_view type, std::string_view value);
  // Everything before the helpers: version and extensions, buffers (GLSL); nothing (CUDA,
  // whose prelude comes once per source).
  std::string (*declarations)(const ElementwiseKernel& kernel, const KernelLayout& layout);
  // The entry point's first line, with its arguments: "void main() {", or
  // extern "C" __global__ void name(...) {.
  std::string (*entry)(const ElementwiseKernel& kernel);
  std::string_view thread_index;     // the invocation's element, in index_type
  std::string_view layout_at;        // pattern: the layout's integer {0}
  std::string_view input_at;         // pattern: element {1} of input {0}'s buffer
  std::string_view output_at;        // pattern: element {1} of output {0}'s buffer
  // For row kernels (row_kernel.hpp), one workgroup per row; empty where the language has
  // none yet: the workgroup's number and the invocation's within it, in index_type; a
  // workgroup-shared array ({0} its element type, {1} its name, {2} its length), and the
  // barrier after which every invocation sees the others' writes to it.
  std::string_view group_index = {};
  std::string_view local_index = {};
  std::string_view shared_array = {};
  std::string_view barrier = {};
  // An unsigned index type narrower than index_type, and the largest element count it
  // walks; empty where the language has one index type (GLSL's int).
  std::string_view narrow_index_type = {};
  std::string_view narrow_index_limit = {};
  // Where parameters come from the layout integers: the value of type t from its two words
  // (expressions). Null where they are kernel arguments.
  std::string (*param_load)(ScalarType t, const std::string& low, const std::string& high) = nullptr;
};

// The statements that declare the parameters p0, p1... from the layout, where the dialect
// reads them there (else nothing: they are the kernel's arguments).
inline std::string param_loads(const KernelDialect& d, const ElementwiseKernel& k) {
  std::string s;
  if (d.param_load == nullptr) return s;
  const int base = param_layout(k.inputs.size());
  for (int p = 0; p < k.params; ++p) {
    const std::string low = fmt::format(fmt::runtime(d.layout_at), base + 2 * p);
    const std::string high = fmt::format(fmt::runtime(d.layout_at), base + 2 * p + 1);
    s += fmt::format("  const {} p{} = {};\n", d.scalar_type(k.param_type), p, d.param_load(k.param_type, low, high));
  }
  return s;
}

// The statement that loads input n of k from `element` (its buffer element) as in<n>: bools
// from bytes, f16 / bf16 widened to float (or kept as bits where k moves raw bits).
inline std::string load_input(const KernelDialect& d, const ElementwiseKernel& k, std::size_t n,
                              const std::string& element) {
  const DType t = k.inputs[n];
  if (t == DType::boolean) return fmt::format("const bool in{} = {} != {};", n, element, d.cast(d.storage_type(t), "0"));
  if (is_half(t) && k.raw_bits) return fmt::format("const uint in{} = {};", n, d.cast("uint", element));
  if (is_half(t)) return fmt::format("const float in{} = kiln_{}_to_f32({});", n, dtype_name(t), d.cast("uint", element));
  return fmt::format("const {} in{} = {};", d.value_type(t), n, element);
}

// The statements that declare `lets`, numbers of type `type` and masks bool, each on a line
// of its own after `indent`.
inline std::string let_statements(std::span<const Let> lets, std::string_view type, std::string_view indent) {
  std::string s;
  for (const Let& let : lets) s += fmt::format("{}const {} {} = {};\n", indent, let.mask ? "bool" : type, let.name, let.value);
  return s;
}

// Output o's value as its buffer stores it: bools as 0 / 1, f16 / bf16 rounded from float.
inline std::string stored_value(const KernelDialect& d, const ElementwiseKernel& k, const KernelOutput& o) {
  const std::string_view out_type = d.storage_type(o.dtype);
  if (o.value_is_bool) return fmt::format("({}) ? {} : {}", o.value, d.cast(out_type, "1"), d.cast(out_type, "0"));
  if (is_half(o.dtype) && k.raw_bits) return d.cast(out_type, o.value);
  if (is_half(o.dtype))
    return d.cast(out_type, fmt::format("kiln_f32_to_{}({})", dtype_name(o.dtype), d.cast("float", o.value)));
  return d.cast(out_type, o.value);
}

// The dtypes a kernel's buffers hold: its inputs', then its outputs'.
inline std::vector<DType> buffer_dtypes(const ElementwiseKernel& k) {
  std::vector<DType> dtypes = k.inputs;
  for (const KernelOutput& o : k.outputs) dtypes.push_back(o.dtype);
  return dtypes;
}

// The kernel's source for `dialect`: declarations, helpers, and the entry point.
inline std::string elementwise_kernel(const KernelDialect& d, const ElementwiseKernel& k, const KernelLayout& layout) {
  KILN_CHECK(layout.strided || layout.scalar.empty() || layout.scalar.size() == k.inputs.size(),
             "elementwise_kernel_{}: {} scalar flags for {} inputs", d.name, layout.scalar.size(), k.inputs.size());
  KILN_CHECK(!k.outputs.empty() && (!layout.out_strided || k.outputs.size() == 1),
             "elementwise_kernel_{}: {} outputs (one or more; a strided output is the only one)", d.name,
             k.outputs.size());
  auto at = [&](int i) { return fmt::format(fmt::runtime(d.layout_at), i); };
  std::string s = d.declarations(k, layout);
  s += k.helpers;
  s += d.entry(k);
  s += fmt::format("  const {} i = {};\n  if (i >= {}) return;\n", d.index_type, d.thread_index, at(0));
  s += param_loads(d, k);
  // Strided: the element of each operand (the inputs, then the output where it is a view)
  // for output element i is its offset plus each coordinate of i times its stride. One walk
  // over i's coordinates serves every operand: a division and a remainder per dim, not per
  // dim and operand. Where the dialect has a narrow index type, the walk divides in it
  // whenever the element count fits (a 64-bit division costs several 32-bit ones on a GPU).
  std::vector<std::pair<std::string, int>> walked;  // each operand's variable and layout base
  for (std::size_t n = 0; n < k.inputs.size() && layout.strided; ++n)
    walked.emplace_back(fmt::format("at{}", n), kFirstLayout + static_cast<int>(n) * kLayoutStride);
  if (layout.out_strided) walked.emplace_back("at_out", kFirstLayout + static_cast<int>(k.inputs.size()) * kLayoutStride);
  if (!walked.empty()) {
    for (const auto& [name, base] : walked) s += fmt::format("  {} {} = {};\n", d.index_type, name, at(base));
    auto walk = [&](std::string_view type, std::string_view indent) {
      std::string w = fmt::format("{0}{1} rest = {2};\n"
                                  "{0}for (int d = {3} - 1; d >= 0; --d) {{\n"
                                  "{0}  const {1} size = {4};\n"
                                  "{0}  const {5} c = {6};\n"
                                  "{0}  rest /= size;\n",
                                  indent, type, d.cast(type, "i"), d.cast("int", at(1)),
                                  d.cast(type, fmt::format(fmt::runtime(d.layout_at), "2 + d")), d.index_type,
                                  type == d.index_type ? std::string("rest % size") : d.cast(d.index_type, "rest % size"));
      for (const auto& [name, base] : walked)
        w += fmt::format("{}  {} += c * {};\n", indent, name,
                         fmt::format(fmt::runtime(d.layout_at), fmt::format("{} + d", base + 1)));
      return w + fmt::format("{}}}\n", indent);
    };
    if (d.narrow_index_type.empty()) {
      s += "  {\n" + walk(d.index_type, "    ") + "  }\n";
    } else {
      s += fmt::format("  if ({} <= {}) {{\n", at(0), d.narrow_index_limit);
      s += walk(d.narrow_index_type, "    ");
      s += "  } else {\n" + walk(d.index_type, "    ") + "  }\n";
    }
  }
  for (std::size_t n = 0; n < k.inputs.size(); ++n) {
    const int base = kFirstLayout + static_cast<int>(n) * kLayoutStride;
    const bool scalar = !layout.strided && !layout.scalar.empty() && layout.scalar[n];
    // Flat: element i is read at offset + i, spelled out (not a multiply by a stride from the
    // layout) so that the compiler sees consecutive invocations read consecutive elements.
    std::string index = scalar ? at(base) : fmt::format("{} + i", at(base));
    if (layout.strided) index = fmt::format("at{}", n);
    s += "  " + load_input(d, k, n, fmt::format(fmt::runtime(d.input_at), n, index)) + "\n";
  }
  const std::string out_index = layout.out_strided ? "at_out" : "i";
  // What the values compute in: the program's type, or the raw bits of a program that only
  // moves f16 / bf16 values.
  const std::string_view value_type = k.raw_bits ? "uint" : d.scalar_type(k.param_type);
  for (std::size_t o = 0; o < k.outputs.size(); ++o) {
    s += let_statements(k.outputs[o].lets, value_type, "  ");
    s += fmt::format("  {} = {};\n", fmt::format(fmt::runtime(d.output_at), o, out_index), stored_value(d, k, k.outputs[o]));
  }
  return s + "}\n";
}

}  // namespace kiln::codegen
