// A restricted pickle virtual machine: it decodes the pickle opcodes (protocols 0-5; the
// few that would import or instantiate arbitrary classes are refused) into plain values,
// and hands every reference to a global, every call (REDUCE), every persistent id and
// every BUILD to an Environment that decides what is allowed. Nothing is ever imported or
// executed. Values live in a Heap owned by the caller, so cyclic structures cannot leak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store::detail::pickle {

enum class Kind : std::uint8_t {
  none,
  boolean,
  integer,
  floating,
  string,
  bytes,
  tuple,
  list,
  set,
  dict,
  global,
  object
};

// A small handle: scalars inline, everything else by index into the Heap (strings, bytes
// and globals into `strings`/`globals`, tuples/lists/sets into `sequences`, dicts into
// `dicts`); objects an Environment creates carry its own tag and index.
struct Value {
  Kind kind = Kind::none;
  std::int64_t integer = 0;  // boolean and integer values; an object's tag
  double floating = 0;
  std::size_t ref = 0;
};

struct Global {
  std::string module;
  std::string name;
  std::string qualified() const { return module + "." + name; }
};

struct Heap {
  std::vector<std::string> strings;
  std::vector<std::vector<Value>> sequences;
  std::vector<std::vector<std::pair<Value, Value>>> dicts;
  std::vector<Global> globals;

  Value make_string(Kind kind, std::string text);
  Value make_sequence(Kind kind, std::vector<Value> items);
  Value make_dict();

  const std::string& text(Value value) const { return strings[value.ref]; }
  const std::vector<Value>& items(Value value) const { return sequences[value.ref]; }
  const std::vector<std::pair<Value, Value>>& entries(Value value) const { return dicts[value.ref]; }
  const Global& global(Value value) const { return globals[value.ref]; }

  // For error messages: "None", "the int 3", "the string 'a'", "a tuple of 2", ...
  std::string describe(Value value) const;
};

class Environment {
 public:
  virtual ~Environment() = default;
  // GLOBAL / STACK_GLOBAL: throws kiln::Error when `global` may not be referenced.
  virtual void check_global(const Global& global) = 0;
  // REDUCE: the result of calling the (allowed) global `callable` with the tuple `args`.
  virtual Value call(Heap& heap, const Global& callable, Value args) = 0;
  // BINPERSID: the object a persistent id stands for.
  virtual Value persistent_load(Heap& heap, Value id) = 0;
  // BUILD: applies `state` to `object` (which stays on the stack).
  virtual void build(Heap& heap, Value object, Value state) = 0;
};

// Runs the pickle in `bytes` and returns the value STOP leaves. Errors (from the VM or
// the Environment) are kiln::Error naming `source`, the byte offset and the opcode.
Value run(std::span<const std::byte> bytes, std::string_view source, Heap& heap, Environment& environment);

// `text` with bytes outside printable ASCII written as \xNN, for messages.
std::string printable(std::string_view text);

}  // namespace kiln::store::detail::pickle
