#include "pickle.hpp"

#include "bytes.hpp"
#include "kiln/core/error.hpp"

#include <bit>
#include <charconv>
#include <optional>
#include <unordered_map>

namespace kiln::store::detail::pickle {

Value Heap::make_string(Kind kind, std::string text) {
  strings.push_back(std::move(text));
  return {.kind = kind, .ref = strings.size() - 1};
}
Value Heap::make_sequence(Kind kind, std::vector<Value> items) {
  sequences.push_back(std::move(items));
  return {.kind = kind, .ref = sequences.size() - 1};
}
Value Heap::make_dict() {
  dicts.emplace_back();
  return {.kind = Kind::dict, .ref = dicts.size() - 1};
}

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  return out;
}

std::string Heap::describe(Value value) const {
  switch (value.kind) {
    case Kind::none: return "None";
    case Kind::boolean: return value.integer ? "True" : "False";
    case Kind::integer: return fmt::format("the int {}", value.integer);
    case Kind::floating: return fmt::format("the float {}", value.floating);
    case Kind::string: return fmt::format("the string '{}'", printable(text(value).substr(0, 64)));
    case Kind::bytes: return fmt::format("{} bytes", text(value).size());
    case Kind::tuple: return fmt::format("a tuple of {}", items(value).size());
    case Kind::list: return fmt::format("a list of {}", items(value).size());
    case Kind::set: return fmt::format("a set of {}", items(value).size());
    case Kind::dict: return fmt::format("a dict of {}", entries(value).size());
    case Kind::global: return fmt::format("the global {}", printable(global(value).qualified()));
    case Kind::object: return "an object";
  }
  return "?";
}

namespace {

// Opcodes by protocol (see Python's Lib/pickletools.py for their full descriptions).
// clang-format off
enum Opcode : std::uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P', BINPERSID = 'Q', REDUCE = 'R',
  STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U', UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a',
  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i',
  LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  // protocol 2
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87,
  NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  // protocol 4
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90, FROZENSET = 0x91,
  NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};
// clang-format on

// The name of an opcode that exists but is refused, or nullptr.
const char* refused_opcode(std::uint8_t op) {
  switch (op) {
    case PERSID: return "PERSID (a text persistent id)";
    case STRING: return "STRING (a protocol-0 quoted string)";
    case UNICODE: return "UNICODE (a protocol-0 escaped string)";
    case INST: return "INST (instantiates a class)";
    case OBJ: return "OBJ (instantiates a class)";
    case NEWOBJ: return "NEWOBJ (instantiates a class)";
    case NEWOBJ_EX: return "NEWOBJ_EX (instantiates a class)";
    case EXT1:
    case EXT2:
    case EXT4: return "EXT1/EXT2/EXT4 (the copyreg extension registry)";
    case BYTEARRAY8: return "BYTEARRAY8";
    case NEXT_BUFFER: return "NEXT_BUFFER (out-of-band buffers)";
    case READONLY_BUFFER: return "READONLY_BUFFER (out-of-band buffers)";
    default: return nullptr;
  }
}

class Machine {
 public:
  Machine(std::span<const std::byte> bytes, std::string_view source, Heap& heap, Environment& environment)
      : bytes_(bytes), source_(source), heap_(heap), environment_(environment) {}

  Value run() {
    while (pos_ < bytes_.size()) {
      op_at_ = pos_;
      const auto op = static_cast<std::uint8_t>(bytes_[pos_++]);
      try {
        if (op == STOP) {
          const Value result = pop();
          if (!marks_.empty() || !stack_.empty())
            fail("STOP leaves {} values and {} marks on the stack", stack_.size(), marks_.size());
          if (pos_ != bytes_.size()) fail("{} bytes follow STOP", bytes_.size() - pos_);
          return result;
        }
        step(op);
      } catch (const Error& error) {
        KILN_FAIL("{}: pickle byte {} (opcode 0x{}{}): {}", source_, op_at_, fmt::format("{:02x}", op),
                  op >= 0x20 && op < 0x7f ? fmt::format(" '{}'", static_cast<char>(op)) : std::string(), error.what());
      }
    }
    KILN_FAIL("{}: the pickle ends at byte {} without a STOP opcode (it is truncated)", source_, bytes_.size());
  }

 private:
  template <class... Args> [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
  }

  // ---- reading the program
  std::span<const std::byte> take(std::uint64_t count) {
    if (count > bytes_.size() - pos_)
      fail("needs {} bytes of argument, but the pickle ends after {}", count, bytes_.size() - pos_);
    const auto out = bytes_.subspan(pos_, static_cast<std::size_t>(count));
    pos_ += static_cast<std::size_t>(count);
    return out;
  }
  template <class T> T read() { return load_le<T>(take(sizeof(T)).data()); }
  std::string_view read_line() {
    const std::string_view rest = as_chars(bytes_.subspan(pos_));
    const std::size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) fail("its text argument has no terminating newline");
    pos_ += newline + 1;
    return rest.substr(0, newline);
  }
  std::int64_t parse_decimal(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || text.empty())
      fail("'{}' is not an integer that fits 64 bits", printable(text.substr(0, 64)));
    return value;
  }
  Value read_string(Kind kind, std::uint64_t size) {
    const auto bytes = take(size);
    return heap_.make_string(kind, std::string(as_chars(bytes)));
  }
  // LONG1 / LONG4: a little-endian two's-complement integer of `size` bytes.
  Value read_long(std::uint64_t size) {
    if (size > 8) fail("an integer of {} bytes does not fit 64 bits", size);
    const auto bytes = take(size);
    std::uint64_t value = 0;
    for (std::size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<std::uint64_t>(bytes[i]);
    if (size > 0 && size < 8 && (static_cast<std::uint8_t>(bytes[size - 1]) & 0x80u))
      value |= ~std::uint64_t{0} << (8 * size);
    return integer(static_cast<std::int64_t>(value));
  }
  static Value integer(std::int64_t value) { return {.kind = Kind::integer, .integer = value}; }
  static Value boolean(bool value) { return {.kind = Kind::boolean, .integer = value}; }

  // ---- the stack, marks and memo
  std::size_t frame_start() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value value) { stack_.push_back(value); }
  Value pop() {
    if (stack_.size() <= frame_start()) fail("the stack is empty (above the last mark)");
    const Value value = stack_.back();
    stack_.pop_back();
    return value;
  }
  Value& top() {
    if (stack_.size() <= frame_start()) fail("the stack is empty (above the last mark)");
    return stack_.back();
  }
  // The values above the last mark, which is removed.
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail("there is no MARK to pop to");
    const std::size_t start = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
    stack_.resize(start);
    return items;
  }
  Value memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry {} was never stored", index);
    return it->second;
  }
  void memo_put(std::uint64_t index) { memo_[index] = top(); }

  std::vector<Value>& list_target(Kind kind, std::string_view op) {
    Value& target = top();
    if (target.kind != kind)
      fail("{} needs a {} below its items, found {}", op, kind == Kind::set ? "set" : "list", heap_.describe(target));
    return heap_.sequences[target.ref];
  }
  void set_items(std::vector<Value> items) {
    if (items.size() % 2 != 0) fail("{} items cannot form key/value pairs", items.size());
    Value& target = top();
    if (target.kind != Kind::dict) fail("setting items needs a dict below them, found {}", heap_.describe(target));
    auto& entries = heap_.dicts[target.ref];
    for (std::size_t i = 0; i < items.size(); i += 2) entries.emplace_back(items[i], items[i + 1]);
  }
  Value string_arg(Value value, std::string_view what) {
    if (value.kind != Kind::string) fail("{} must be a string, found {}", what, heap_.describe(value));
    return value;
  }
  void push_global(std::string module, std::string name) {
    Global global{std::move(module), std::move(name)};
    environment_.check_global(global);
    heap_.globals.push_back(std::move(global));
    push({.kind = Kind::global, .ref = heap_.globals.size() - 1});
  }

  void step(std::uint8_t op) {
    switch (op) {
      case PROTO: {
        const auto version = read<std::uint8_t>();
        if (version > 5) fail("pickle protocol {} is newer than 5, the highest known", version);
        break;
      }
      case FRAME: {
        const auto size = read<std::uint64_t>();
        if (size > bytes_.size() - pos_) fail("a frame of {} bytes runs past the end of the pickle", size);
        break;
      }
      case MARK: marks_.push_back(stack_.size()); break;
      case POP:
        if (stack_.size() > frame_start())
          stack_.pop_back();
        else
          pop_mark();
        break;
      case POP_MARK: pop_mark(); break;
      case DUP: push(top()); break;

      case NONE: push({}); break;
      case NEWTRUE: push(boolean(true)); break;
      case NEWFALSE: push(boolean(false)); break;
      case INT: {
        const std::string_view text = read_line();
        if (text == "00" || text == "01")
          push(boolean(text == "01"));
        else
          push(integer(parse_decimal(text)));
        break;
      }
      case LONG: {
        std::string_view text = read_line();
        if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
        push(integer(parse_decimal(text)));
        break;
      }
      case BININT: push(integer(read<std::int32_t>())); break;
      case BININT1: push(integer(read<std::uint8_t>())); break;
      case BININT2: push(integer(read<std::uint16_t>())); break;
      case LONG1: push(read_long(read<std::uint8_t>())); break;
      case LONG4: {
        const auto size = read<std::int32_t>();
        if (size < 0) fail("LONG4 has a negative length {}", size);
        push(read_long(static_cast<std::uint64_t>(size)));
        break;
      }
      case FLOAT: {
        const std::string_view text = read_line();
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || text.empty())
          fail("'{}' is not a float", printable(text.substr(0, 64)));
        push({.kind = Kind::floating, .floating = value});
        break;
      }
      case BINFLOAT: {
        // The only big-endian value in pickle.
        const auto bytes = take(8);
        std::uint64_t bits = 0;
        for (const std::byte b : bytes) bits = (bits << 8) | static_cast<std::uint64_t>(b);
        push({.kind = Kind::floating, .floating = std::bit_cast<double>(bits)});
        break;
      }

      case BINUNICODE: push(read_string(Kind::string, read<std::uint32_t>())); break;
      case SHORT_BINUNICODE: push(read_string(Kind::string, read<std::uint8_t>())); break;
      case BINUNICODE8: push(read_string(Kind::string, read<std::uint64_t>())); break;
      case BINSTRING: {
        const auto size = read<std::int32_t>();
        if (size < 0) fail("BINSTRING has a negative length {}", size);
        push(read_string(Kind::string, static_cast<std::uint64_t>(size)));
        break;
      }
      case SHORT_BINSTRING: push(read_string(Kind::string, read<std::uint8_t>())); break;
      case BINBYTES: push(read_string(Kind::bytes, read<std::uint32_t>())); break;
      case SHORT_BINBYTES: push(read_string(Kind::bytes, read<std::uint8_t>())); break;
      case BINBYTES8: push(read_string(Kind::bytes, read<std::uint64_t>())); break;

      case EMPTY_TUPLE: push(heap_.make_sequence(Kind::tuple, {})); break;
      case TUPLE: push(heap_.make_sequence(Kind::tuple, pop_mark())); break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        std::vector<Value> items(op - TUPLE1 + 1);
        for (std::size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(heap_.make_sequence(Kind::tuple, std::move(items)));
        break;
      }
      case EMPTY_LIST: push(heap_.make_sequence(Kind::list, {})); break;
      case LIST: push(heap_.make_sequence(Kind::list, pop_mark())); break;
      case APPEND: {
        const Value item = pop();
        list_target(Kind::list, "APPEND").push_back(item);
        break;
      }
      case APPENDS: {
        std::vector<Value> items = pop_mark();
        auto& list = list_target(Kind::list, "APPENDS");
        list.insert(list.end(), items.begin(), items.end());
        break;
      }
      case EMPTY_SET: push(heap_.make_sequence(Kind::set, {})); break;
      case FROZENSET: push(heap_.make_sequence(Kind::set, pop_mark())); break;
      case ADDITEMS: {
        std::vector<Value> items = pop_mark();
        auto& set = list_target(Kind::set, "ADDITEMS");
        set.insert(set.end(), items.begin(), items.end());
        break;
      }
      case EMPTY_DICT: push(heap_.make_dict()); break;
      case DICT: {
        std::vector<Value> items = pop_mark();
        push(heap_.make_dict());
        set_items(std::move(items));
        break;
      }
      case SETITEM: {
        const Value value = pop();
        const Value key = pop();
        set_items({key, value});
        break;
      }
      case SETITEMS: set_items(pop_mark()); break;

      case PUT: memo_put(static_cast<std::uint64_t>(parse_decimal(read_line()))); break;
      case BINPUT: memo_put(read<std::uint8_t>()); break;
      case LONG_BINPUT: memo_put(read<std::uint32_t>()); break;
      case MEMOIZE: memo_put(memo_.size()); break;
      case GET: push(memo_get(static_cast<std::uint64_t>(parse_decimal(read_line())))); break;
      case BINGET: push(memo_get(read<std::uint8_t>())); break;
      case LONG_BINGET: push(memo_get(read<std::uint32_t>())); break;

      case GLOBAL: {
        std::string module(read_line());
        std::string name(read_line());
        push_global(std::move(module), std::move(name));
        break;
      }
      case STACK_GLOBAL: {
        const Value name = string_arg(pop(), "STACK_GLOBAL's name");
        const Value module = string_arg(pop(), "STACK_GLOBAL's module");
        push_global(heap_.text(module), heap_.text(name));
        break;
      }
      case REDUCE: {
        const Value args = pop();
        const Value callable = pop();
        if (callable.kind != Kind::global)
          fail("REDUCE calls {}, which is not a callable global", heap_.describe(callable));
        if (args.kind != Kind::tuple) fail("REDUCE's arguments must be a tuple, found {}", heap_.describe(args));
        push(environment_.call(heap_, heap_.globals[callable.ref], args));
        break;
      }
      case BUILD: {
        const Value state = pop();
        environment_.build(heap_, top(), state);
        break;
      }
      case BINPERSID: push(environment_.persistent_load(heap_, pop())); break;

      default:
        if (const char* name = refused_opcode(op))
          fail("opcode {} is not supported by Kiln's restricted unpickler", name);
        fail("unknown opcode (not part of pickle protocols 0-5): the data is corrupt or not a pickle");
    }
  }

  std::span<const std::byte> bytes_;
  std::string_view source_;
  Heap& heap_;
  Environment& environment_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value> memo_;
};

}  // namespace

Value run(std::span<const std::byte> bytes, std::string_view source, Heap& heap, Environment& environment) {
  return Machine(bytes, source, heap, environment).run();
}

}  // namespace kiln::store::detail::pickle
