// Elementwise programs (include/kiln/codegen/program.hpp): their construction, which checks
// and numbers the code, and the ids of their structures: one table for the process, so
// that every library and program numbers a structure alike. Thread-safe.
//
// A program is built at every flush of Fusion<B>, so its construction is on the recording
// path: the code is deduplicated through a table of the steps' fields and the id interned
// from the code's bytes, with no text made; the readable key is made only when asked.
#include "kiln/codegen/program.hpp"

#include <bit>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace kiln::codegen {
namespace detail {

std::uint64_t intern_key(const std::string& key) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::uint64_t> ids;
  const std::lock_guard lock(mutex);
  return ids.emplace(key, ids.size() + 1).first->second;
}

}  // namespace detail

namespace {

// A step's fields as one value, to find an equal step already in the code.
struct StepFields {
  std::uint8_t kind;
  bool mask;
  std::array<std::uint32_t, 3> args;
  std::uint64_t value;  // the constant's bits: -0 and 0 differ
  int index;
  bool operator==(const StepFields&) const = default;
};
struct StepFieldsHash {
  std::size_t operator()(const StepFields& f) const {
    std::uint64_t h = f.kind * 0x9E3779B97F4A7C15ull ^ (f.mask ? 0x5555u : 0u);
    for (std::uint32_t a : f.args) h = (h ^ a) * 0x100000001B3ull;
    h = (h ^ f.value) * 0x100000001B3ull;
    return static_cast<std::size_t>((h ^ static_cast<std::uint64_t>(f.index)) * 0x9E3779B97F4A7C15ull);
  }
};

template <class T> void append(std::string& bytes, const T& v) {
  char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  bytes.append(raw, sizeof(T));
}

}  // namespace

Program::Program(ScalarType type, std::vector<DType> inputs, int params, std::vector<ProgramOutput> outputs)
    : type_(type), inputs_(std::move(inputs)), params_(params), outputs_(std::move(outputs)) {
  KILN_CHECK(!outputs_.empty(), "elementwise program: no outputs");
  KILN_CHECK(params_ >= 0, "elementwise program: {} parameters", params_);
  std::unordered_map<const Node*, std::uint32_t> slot_of_node;
  std::unordered_map<StepFields, std::uint32_t, StepFieldsHash> slot_of_step;
  auto visit = [&](auto& self, const Node& n) -> std::uint32_t {
    if (auto it = slot_of_node.find(&n); it != slot_of_node.end()) return it->second;
    Instruction step{n.kind, n.mask, {}, n.value, n.index};
    if (n.kind == Kind::input) {
      KILN_CHECK(n.index < static_cast<int>(inputs_.size()), "elementwise program: in{} of {} inputs", n.index,
                 inputs_.size());
      const DType d = inputs_[static_cast<std::size_t>(n.index)];
      KILN_CHECK(n.mask == (d == DType::boolean) && (n.mask || scalar_type_of(d) == type_),
                 "elementwise program: in{} is {} but the program computes in {}{}", n.index, d,
                 scalar_type_name(type_), n.mask ? " and reads it as a bool" : "");
      step.value = 0;
    } else if (n.kind == Kind::param) {
      KILN_CHECK(n.index < params_, "elementwise program: p{} of {} parameters", n.index, params_);
      step.value = 0;
    } else if (n.kind == Kind::constant) {
      step.index = 0;
    } else {
      const KindInfo& info = kind_info(n.kind);
      KILN_CHECK(info.types != Types::floats || is_float(type_), "elementwise program: {} needs a float type, got {}",
                 info.name, scalar_type_name(type_));
      KILN_CHECK(info.types != Types::integers || is_integer(type_),
                 "elementwise program: {} needs an integer type, got {}", info.name, scalar_type_name(type_));
      KILN_CHECK(type_ != ScalarType::boolean || n.mask, "elementwise program: a bool program has the number {}",
                 info.name);
      for (std::size_t i = 0; i < n.args.size(); ++i) step.args[i] = self(self, *n.args[i]);
      reduces_rows_ = reduces_rows_ || is_row_reduction(n.kind);
      step.value = 0;
      step.index = 0;
    }
    const StepFields fields{static_cast<std::uint8_t>(step.kind), step.mask, step.args,
                            std::bit_cast<std::uint64_t>(step.value), step.index};
    auto [it, added] = slot_of_step.emplace(fields, static_cast<std::uint32_t>(code_.size()));
    if (added) code_.push_back(step);
    slot_of_node.emplace(&n, it->second);
    return it->second;
  };
  for (const ProgramOutput& out : outputs_) {
    KILN_CHECK(out.root != nullptr, "elementwise program: a null output tree");
    KILN_CHECK(out.root->mask ? out.dtype == DType::boolean : scalar_type_of(out.dtype) == type_,
               "elementwise program: an output of dtype {} from a {} value of a {} program", out.dtype,
               out.root->mask ? "bool" : "numeric", scalar_type_name(type_));
    output_slots_.push_back(visit(visit, *out.root));
  }
  for (const ProgramOutput& out : outputs_)
    KILN_CHECK(!out.per_row || reduces_rows_, "elementwise program: a per-row output in a program with no row reduction");
  // The structure as bytes: equal bytes, equal programs (what key() spells out).
  std::string bytes;
  bytes.reserve(16 + inputs_.size() + code_.size() * 24 + output_slots_.size() * 5);
  append(bytes, type_);
  append(bytes, static_cast<std::uint32_t>(inputs_.size()));
  for (DType d : inputs_) append(bytes, d);
  append(bytes, params_);
  append(bytes, static_cast<std::uint32_t>(code_.size()));
  for (const Instruction& step : code_) {
    append(bytes, step.kind);
    append(bytes, step.mask);
    for (int i = 0; i < kind_arity(step.kind); ++i) append(bytes, step.args[static_cast<std::size_t>(i)]);
    if (step.kind == Kind::constant) append(bytes, std::bit_cast<std::uint64_t>(step.value));
    if (step.kind == Kind::input || step.kind == Kind::param) append(bytes, step.index);
  }
  for (std::size_t k = 0; k < output_slots_.size(); ++k) {
    append(bytes, output_slots_[k]);
    append(bytes, outputs_[k].dtype);
    append(bytes, outputs_[k].per_row);
  }
  id_ = detail::intern_key(bytes);
}

std::string Program::key() const {
  std::string body;
  for (const Instruction& step : code_) {
    if (!body.empty()) body += ';';
    if (step.kind == Kind::input) {
      body += fmt::format("in{}{}", step.index, step.mask ? "b" : "");
    } else if (step.kind == Kind::param) {
      body += fmt::format("p{}", step.index);
    } else if (step.kind == Kind::constant) {
      body += fmt::format("c{}", step.value);  // shortest exact form; -0 and 0 differ
    } else {
      body += fmt::format("{}(", kind_name(step.kind));
      for (int i = 0; i < kind_arity(step.kind); ++i) body += fmt::format("{}{}", i ? "," : "", step.args[i]);
      body += ')';
    }
  }
  std::string ins, outs;
  for (DType d : inputs_) ins += fmt::format("{}{}", ins.empty() ? "" : ",", dtype_name(d));
  for (std::size_t k = 0; k < output_slots_.size(); ++k)
    outs += fmt::format("{}{}:{}{}", outs.empty() ? "" : ",", output_slots_[k], dtype_name(outputs_[k].dtype),
                        outputs_[k].per_row ? ":row" : "");
  return fmt::format("{}|{}|p{}|{}|{}", scalar_type_name(type_), ins, params_, body, outs);
}

std::vector<bool> inputs_read(std::span<const NodePtr> roots, std::size_t inputs) {
  std::vector<bool> used(inputs, false);
  std::unordered_set<const Node*> visited;
  auto mark = [&](auto& self, const Node& n) -> void {
    if (!visited.insert(&n).second) return;
    if (n.kind == Kind::input) used[static_cast<std::size_t>(n.index)] = true;
    for (const NodePtr& a : n.args) self(self, *a);
  };
  for (const NodePtr& r : roots) mark(mark, *r);
  return used;
}

}  // namespace kiln::codegen
