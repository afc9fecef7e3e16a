// A small strict JSON parser (RFC 8259) for the safetensors header, and the quoting the
// writer needs. Strict: no comments, no trailing commas, no duplicate keys, valid UTF-8,
// no lone surrogates, a nesting limit; the first error throws kiln::Error with the byte
// offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::store::detail::json {

struct Member;

struct Value {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;  // a string's decoded value, or a number as written
  std::vector<Value> array;
  std::vector<Member> object;  // in document order, keys unique
  std::size_t offset = 0;      // where the value starts, in bytes

  // A number that is a non-negative integer fitting 64 bits, written without fraction or
  // exponent ("12", not "12.0" or "1.2e1"); nullopt otherwise.
  std::optional<std::uint64_t> as_uint64() const;
};

struct Member {
  std::string key;
  Value value;
};

// Parses `text` as one JSON value (white space around it allowed). Errors read
// "<context>: invalid JSON at byte N (<where>): <what>", N counted from the start of
// `text` plus `base_offset` for `where`.
Value parse(std::string_view text, std::string_view context, std::size_t base_offset = 0);

// Whether `text` is valid UTF-8 (JSON strings must be).
bool is_valid_utf8(std::string_view text);

// `value` as a JSON string literal, quotes included (`value` must be valid UTF-8).
std::string quote(std::string_view value);

// The name of a kind, for error messages ("an array").
std::string_view kind_name(Value::Kind kind);

}  // namespace kiln::store::detail::json
