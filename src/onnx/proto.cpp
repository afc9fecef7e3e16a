// The protobuf wire reader and the parsers of the ONNX messages Kiln reads (ModelProto,
// GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto and the types and shapes
// in it; field numbers from onnx.proto). Every input is taken as hostile: each length is
// checked against the bytes left, nesting is bounded, and a tensor's values must fill its dims.
#include "proto.hpp"

#include "../common/regular_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

namespace kiln::onnx::detail {

// raw_data and external data are little-endian, as are fixed32 and fixed64 fields; TensorData
// is in host order, so the bytes are copied as they are.
static_assert(std::endian::native == std::endian::little, "the ONNX reader assumes a little-endian host");

Scope Scope::nested(std::string inner_label) const {
  KILN_CHECK(depth + 1 < kMaxDepth,
             "{}: messages nest more than {} deep (graphs in the attributes of graphs); the file is malformed or "
             "hostile",
             where(), kMaxDepth);
  return Scope{what, file_begin, options, this, depth + 1, std::move(inner_label)};
}

std::string Scope::where() const {
  std::string out = "onnx: " + std::string(what) + ": " + label;
  // The outermost message (the ModelProto) is left out when it is not the one at fault: every
  // path would start with it.
  for (const Scope* outer = parent; outer != nullptr && outer->parent != nullptr; outer = outer->parent)
    out += " in " + outer->label;
  return out;
}

namespace {

// ---- labels of messages, for Scope

// A name from the file as messages quote it: control bytes (a hostile name could hold line
// breaks that forge log lines) are written as \xNN.
std::string escaped(std::string_view name) {
  std::string out;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else {
      constexpr std::string_view digits = "0123456789abcdef";
      out += "\\x";
      out += digits[byte >> 4];
      out += digits[byte & 15];
    }
  }
  return out;
}

std::string quote_name(std::string_view name) { return "'" + escaped(name) + "'"; }

// "TensorProto 'w'"
std::string named(std::string_view message, std::string_view name) {
  return std::string(message) + " " + quote_name(name);
}

// "TensorProto (initializer #2)", for an entry of a repeated field before its name is read
std::string numbered(std::string_view message, std::string_view field, std::size_t index) {
  return std::string(message) + " (" + std::string(field) + " #" + std::to_string(index) + ")";
}

// ---- the wire format

std::string_view wire_name(std::uint64_t wire) {
  switch (wire) {
    case 0: return "varint";
    case 1: return "64-bit";
    case 2: return "length-delimited";
    case 3: return "group start";
    case 4: return "group end";
    case 5: return "32-bit";
    default: return "undefined";
  }
}

// Reads the varint at `p`, which must end before `end`, and moves `p` past it.
std::uint64_t read_varint(const std::byte*& p, const std::byte* end, const Scope& scope) {
  const std::byte* start = p;
  std::uint64_t value = 0;
  for (int shift = 0;; shift += 7) {
    KILN_CHECK(p != end, "{}: the varint at byte {} is truncated (the message ends inside it)", scope.where(),
               scope.offset_of(start));
    const auto byte = static_cast<std::uint64_t>(*p++);
    // The tenth byte holds only the 64th bit: anything more is a varint over 10 bytes or 64 bits.
    KILN_CHECK(shift < 63 || byte <= 1, "{}: the varint at byte {} is longer than 10 bytes or does not fit 64 bits",
               scope.where(), scope.offset_of(start));
    value |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
}

template <class T> T load_bits(const std::byte* p) {
  T bits;
  std::memcpy(&bits, p, sizeof bits);
  return bits;
}

}  // namespace

bool FieldReader::next() {
  if (next_ == end_) return false;
  tag_at_ = next_;
  const std::uint64_t tag = read_varint(next_, end_, scope_);
  const std::uint64_t wire = tag & 7;
  KILN_CHECK(tag >> 3 != 0 && tag >> 3 < (1u << 29),
             "{}: the field at byte {} has number {}, outside protobuf's 1 to 2^29 - 1", scope_.where(),
             scope_.offset_of(tag_at_), tag >> 3);
  number_ = static_cast<std::uint32_t>(tag >> 3);
  KILN_CHECK(wire != 3 && wire != 4,
             "{}: field {} at byte {} is a group ({}, wire type {}), which ONNX files never use", scope_.where(),
             number_, scope_.offset_of(tag_at_), wire_name(wire), wire);
  const auto left = static_cast<std::size_t>(end_ - next_);
  switch (wire) {
    case 0: value_ = read_varint(next_, end_, scope_); break;
    case 1:
    case 5: {
      const std::size_t size = wire == 1 ? 8 : 4;
      KILN_CHECK(left >= size, "{}: field {} at byte {} is {} and needs {} bytes, but the message has {} left",
                 scope_.where(), number_, scope_.offset_of(tag_at_), wire_name(wire), size, left);
      value_ = size == 8 ? load_bits<std::uint64_t>(next_) : load_bits<std::uint32_t>(next_);
      next_ += size;
      break;
    }
    case 2: {
      const std::uint64_t length = read_varint(next_, end_, scope_);
      const auto remaining = static_cast<std::size_t>(end_ - next_);
      KILN_CHECK(length <= remaining, "{}: field {} at byte {} declares {} bytes, but the message has {} left",
                 scope_.where(), number_, scope_.offset_of(tag_at_), length, remaining);
      payload_ = {next_, static_cast<std::size_t>(length)};
      next_ += length;
      break;
    }
    default:
      KILN_FAIL("{}: field {} at byte {} has wire type {}, which protobuf does not define", scope_.where(), number_,
                scope_.offset_of(tag_at_), wire);
  }
  wire_ = static_cast<WireType>(wire);
  return true;
}

void FieldReader::expect(WireType wire, std::string_view field) const {
  KILN_CHECK(wire_ == wire, "{}: field {} ({}) at byte {} is {} (wire type {}), but {} is {} (wire type {})",
             scope_.where(), field, number_, scope_.offset_of(tag_at_), wire_name(static_cast<std::uint64_t>(wire_)),
             static_cast<int>(wire_), field, wire_name(static_cast<std::uint64_t>(wire)), static_cast<int>(wire));
}

std::int32_t FieldReader::checked_int32(std::uint64_t value, std::string_view field) const {
  // A negative int32 is written as its 64-bit sign extension, so the value must read back as
  // an int64 within int32's range.
  const auto wide = static_cast<std::int64_t>(value);
  KILN_CHECK(wide >= std::numeric_limits<std::int32_t>::min() && wide <= std::numeric_limits<std::int32_t>::max(),
             "{}: field {} ({}) at byte {} holds {}, which does not fit in an int32", scope_.where(), field, number_,
             scope_.offset_of(tag_at_), wide);
  return static_cast<std::int32_t>(wide);
}

std::int64_t FieldReader::int64(std::string_view field) const {
  expect(WireType::varint, field);
  return static_cast<std::int64_t>(value_);
}

std::int32_t FieldReader::int32(std::string_view field) const {
  expect(WireType::varint, field);
  return checked_int32(value_, field);
}

float FieldReader::float32(std::string_view field) const {
  expect(WireType::fixed32, field);
  return std::bit_cast<float>(static_cast<std::uint32_t>(value_));
}

std::string FieldReader::string(std::string_view field) const {
  expect(WireType::length, field);
  return {reinterpret_cast<const char*>(payload_.data()), payload_.size()};
}

std::span<const std::byte> FieldReader::bytes(std::string_view field) const {
  expect(WireType::length, field);
  return payload_;
}

template <class T> void FieldReader::append_values(std::string_view field, std::vector<T>& out) const {
  constexpr bool is_fixed = std::is_floating_point_v<T>;
  constexpr WireType native = std::is_same_v<T, float>    ? WireType::fixed32
                              : std::is_same_v<T, double> ? WireType::fixed64
                                                          : WireType::varint;
  const auto value_of = [&](std::uint64_t bits) -> T {
    if constexpr (std::is_same_v<T, float>)
      return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    else if constexpr (std::is_same_v<T, double>)
      return std::bit_cast<double>(bits);
    else if constexpr (std::is_same_v<T, std::int32_t>)
      return checked_int32(bits, field);
    else
      return static_cast<T>(bits);
  };
  if (wire_ != WireType::length) {
    expect(native, field);
    out.push_back(value_of(value_));
    return;
  }
  const std::byte* p = payload_.data();
  const std::byte* end = p + payload_.size();
  if constexpr (is_fixed) {
    KILN_CHECK(payload_.size() % sizeof(T) == 0,
               "{}: packed field {} ({}) at byte {} holds {} bytes, not a whole number of {}-byte values",
               scope_.where(), field, number_, scope_.offset_of(tag_at_), payload_.size(), sizeof(T));
    out.reserve(out.size() + payload_.size() / sizeof(T));
    using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
    for (; p != end; p += sizeof(T)) out.push_back(value_of(load_bits<Bits>(p)));
  } else {
    while (p != end) out.push_back(value_of(read_varint(p, end, scope_)));
  }
}

void FieldReader::append(std::string_view field, std::vector<std::int64_t>& out) const { append_values(field, out); }
void FieldReader::append(std::string_view field, std::vector<std::int32_t>& out) const { append_values(field, out); }
void FieldReader::append(std::string_view field, std::vector<std::uint64_t>& out) const { append_values(field, out); }
void FieldReader::append(std::string_view field, std::vector<float>& out) const { append_values(field, out); }
void FieldReader::append(std::string_view field, std::vector<double>& out) const { append_values(field, out); }

// ---- TensorProto

namespace {

constexpr std::array<std::string_view, 6> kValuesFieldNames{"float_data", "int32_data",  "string_data",
                                                            "int64_data", "double_data", "uint64_data"};

// What a TensorProto's fields held, before they are checked against each other and the dims.
struct TensorFields {
  std::optional<std::span<const std::byte>> raw_data;
  std::vector<float> float_data;
  std::vector<std::int32_t> int32_data;
  std::vector<std::string> string_data;
  std::vector<std::int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<std::uint64_t> uint64_data;
  bool external = false;  // data_location is EXTERNAL
  std::optional<std::string> location, offset, length;

  // The number of values in each ValuesField, in the enum's order.
  std::array<std::size_t, 6> counts() const {
    return {float_data.size(), int32_data.size(),  string_data.size(),
            int64_data.size(), double_data.size(), uint64_data.size()};
  }
};

// One entry of external_data (a StringStringEntryProto): location, offset and length are what
// reading needs; checksum and keys of later versions are ignored.
void read_external_entry(std::span<const std::byte> bytes, Scope scope, TensorFields& fields) {
  std::string key, value;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    if (reader.number() == 1)
      key = reader.string("key");
    else if (reader.number() == 2)
      value = reader.string("value");
  }
  if (key == "location")
    fields.location = std::move(value);
  else if (key == "offset")
    fields.offset = std::move(value);
  else if (key == "length")
    fields.length = std::move(value);
}

// The number of elements of the dims. Each must be >= 0, and the product of the non-zero ones
// must fit in int64, so that no later Shape arithmetic on them can overflow.
std::int64_t element_count(const TensorValue& tensor, const Scope& scope) {
  std::int64_t nonzero = 1;
  bool empty = false;
  for (std::size_t i = 0; i < tensor.dims.size(); ++i) {
    const std::int64_t dim = tensor.dims[i];
    KILN_CHECK(dim >= 0, "{}: dims[{}] is {}; dims {} must all be >= 0", scope.where(), i, dim, tensor.dims);
    if (dim == 0)
      empty = true;
    else
      KILN_CHECK(!__builtin_mul_overflow(nonzero, dim, &nonzero), "{}: dims {} hold more elements than fit in 64 bits",
                 scope.where(), tensor.dims);
  }
  return empty ? 0 : nonzero;
}

std::string byte_count(std::uint64_t bytes, bool overflows) {
  return overflows ? std::string("more than 2^64") : std::to_string(bytes);
}

std::optional<std::uint64_t> parse_decimal(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc{} || end != text->data() + text->size() || text->empty()) return std::nullopt;
  return value;
}

// The file external data is in: `location` relative to ParseOptions::external_data_dir. The
// location must stay inside that folder, so that a downloaded model cannot read any file of
// the machine: absolute paths and '..' are refused. (Symbolic links are followed: a model
// cache such as Hugging Face's links every file to a blob outside the model's folder.)
std::filesystem::path external_path(const TensorFields& fields, const Scope& scope) {
  KILN_CHECK(fields.location.has_value(), "{}: data_location is EXTERNAL, but external_data has no 'location' entry",
             scope.where());
  const std::string& location = *fields.location;
  const std::filesystem::path relative(location);
  KILN_CHECK(!location.empty() && location.find('\0') == std::string::npos && !relative.has_root_path(),
             "{}: external_data location '{}' is not a path relative to the model's folder", scope.where(), location);
  for (const auto& part : relative)
    KILN_CHECK(part != "..", "{}: external_data location '{}' leads out of the model's folder ('..')", scope.where(),
               location);
  const std::filesystem::path& folder = scope.options->external_data_dir;
  KILN_CHECK(!folder.empty(),
             "{}: the data is in the external file '{}', but no folder to find it in was given (load the model with "
             "load_model, or set ParseOptions::external_data_dir)",
             scope.where(), location);
  return folder / relative;
}

// The `need` bytes of an external-data tensor, read from its file at its offset.
std::vector<std::byte> read_external(const TensorValue& tensor, const ElementInfo& info, const TensorFields& fields,
                                     std::uint64_t need, bool need_overflows, const Scope& scope) {
  const std::filesystem::path path = external_path(fields, scope);
  const std::optional<std::uint64_t> offset = fields.offset ? parse_decimal(fields.offset) : 0;
  KILN_CHECK(offset.has_value(), "{}: external_data offset '{}' is not a non-negative integer", scope.where(),
             *fields.offset);
  const std::optional<std::uint64_t> length = parse_decimal(fields.length);
  KILN_CHECK(length || !fields.length, "{}: external_data length '{}' is not a non-negative integer", scope.where(),
             *fields.length);

  // O_NONBLOCK: a FIFO is refused at once below, never waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KILN_CHECK(fd >= 0, "{}: cannot open the external data file {}: {}", scope.where(), path.string(),
             std::strerror(errno));
  struct Descriptor {
    int fd;
    ~Descriptor() { ::close(fd); }
  } file{fd};
  const std::uint64_t size = ::kiln::detail::regular_file_size(
      fd, scope.where() + ": external data file " + path.string(), "external data is read from regular files only");
  KILN_CHECK(*offset <= size, "{}: external_data offset {} is past the end of {} ({} bytes)", scope.where(), *offset,
             path.string(), size);
  const std::uint64_t count = length.value_or(size - *offset);
  KILN_CHECK(count <= size - *offset, "{}: external_data offset {} and length {} run past the end of {} ({} bytes)",
             scope.where(), *offset, count, path.string(), size);
  KILN_CHECK(!need_overflows && count == need, "{}: external data '{}' holds {} bytes, dims {} of {} need {}",
             scope.where(), *fields.location, count, tensor.dims, info.name, byte_count(need, need_overflows));

  std::vector<std::byte> bytes(static_cast<std::size_t>(count));
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(*offset + done));
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK(n > 0, "{}: cannot read {}: {}", scope.where(), path.string(),
               n == 0 ? "the file ended early" : std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

// `values` converted one by one to Out (convert(value, index)) and laid out as TensorData bytes.
template <class Out, class In, class Convert>
std::vector<std::byte> store_values(const std::vector<In>& values, Convert convert) {
  std::vector<std::byte> bytes(values.size() * sizeof(Out));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Out value = convert(values[i], i);
    std::memcpy(bytes.data() + i * sizeof(Out), &value, sizeof(Out));
  }
  return bytes;
}

// int32_data's values as Out, a narrower type each value must fit: int32_data holds UINT8,
// BOOL, FLOAT16 and BFLOAT16 values too (the 16-bit floats as their bit patterns).
template <class Out> std::vector<std::byte> narrow_values(const std::vector<std::int32_t>& values, std::int32_t lo,
                                                          std::int32_t hi, const ElementInfo& info,
                                                          const Scope& scope) {
  return store_values<Out>(values, [&](std::int32_t value, std::size_t i) {
    KILN_CHECK(value >= lo && value <= hi, "{}: int32_data[{}] is {}, outside the range of {} ({} to {})",
               scope.where(), i, value, info.name, lo, hi);
    return static_cast<Out>(value);
  });
}

// The bytes of a tensor (of a type Kiln holds) whose values are in its element type's field, in
// the dtype that holds it; nullopt for a UINT64 value beyond int64.
std::optional<std::vector<std::byte>> typed_bytes(const ElementInfo& info, const TensorFields& fields,
                                                  const Scope& scope) {
  const auto same = [](auto value, std::size_t) { return value; };
  switch (info.type) {
    case ElementType::int8: return narrow_values<std::int32_t>(fields.int32_data, -128, 127, info, scope);
    case ElementType::int16: return narrow_values<std::int32_t>(fields.int32_data, -32768, 32767, info, scope);
    case ElementType::uint16: return narrow_values<std::int32_t>(fields.int32_data, 0, 0xffff, info, scope);
    case ElementType::uint32:
    case ElementType::uint64: {
      const std::uint64_t hi = info.type == ElementType::uint32 ? 0xffffffffu : INT64_MAX;
      for (std::size_t i = 0; i < fields.uint64_data.size(); ++i) {
        const std::uint64_t value = fields.uint64_data[i];
        if (info.type == ElementType::uint64 && value > hi) return std::nullopt;
        KILN_CHECK(value <= hi, "{}: uint64_data[{}] is {}, outside the range of {}", scope.where(), i, value, info.name);
      }
      return store_values<std::int64_t>(fields.uint64_data,
                                        [](std::uint64_t value, std::size_t) { return static_cast<std::int64_t>(value); });
    }
    default: break;
  }
  switch (*info.dtype) {
    case DType::f32: return store_values<float>(fields.float_data, same);
    case DType::f64: return store_values<double>(fields.double_data, same);
    case DType::i64: return store_values<std::int64_t>(fields.int64_data, same);
    case DType::i32: return store_values<std::int32_t>(fields.int32_data, same);
    case DType::u8: return narrow_values<std::uint8_t>(fields.int32_data, 0, 0xff, info, scope);
    case DType::f16:
    case DType::bf16: return narrow_values<std::uint16_t>(fields.int32_data, 0, 0xffff, info, scope);
    case DType::boolean:
      return store_values<std::uint8_t>(fields.int32_data,
                                        [](std::int32_t value, std::size_t) { return std::uint8_t{value != 0}; });
  }
  return {};
}

// Raw little-endian values of a type held wider (INT8, INT16, UINT16, UINT32, UINT64) as the
// bytes of the dtype that holds them; nullopt for a UINT64 value beyond int64.
std::optional<std::vector<std::byte>> widened(const ElementInfo& info, std::span<const std::byte> raw) {
  const std::size_t count = raw.size() / info.size;
  const std::size_t out_size = dtype_size(*info.held);
  std::vector<std::byte> out(count * out_size);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* p = raw.data() + i * info.size;
    std::int64_t value = 0;
    switch (info.type) {
      case ElementType::int8: value = load_bits<std::int8_t>(p); break;
      case ElementType::int16: value = load_bits<std::int16_t>(p); break;
      case ElementType::uint16: value = load_bits<std::uint16_t>(p); break;
      case ElementType::uint32: value = load_bits<std::uint32_t>(p); break;
      default: {
        const std::uint64_t u = load_bits<std::uint64_t>(p);
        if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
        value = static_cast<std::int64_t>(u);
      }
    }
    if (out_size == 4) {
      const auto v32 = static_cast<std::int32_t>(value);
      std::memcpy(out.data() + i * 4, &v32, 4);
    } else {
      std::memcpy(out.data() + i * 8, &value, 8);
    }
  }
  return out;
}

// Checks the values the fields hold against the element type and dims, and fills tensor.data
// when Kiln holds the element type.
void fill_values(TensorValue& tensor, const TensorFields& fields, const Scope& scope) {
  KILN_CHECK(static_cast<std::int32_t>(tensor.type) > 0,
             "{}: data_type is {}; a tensor needs one of TensorProto.DataType's element types", scope.where(),
             static_cast<std::int32_t>(tensor.type) == 0 ? std::string("missing (UNDEFINED)")
                                                         : std::to_string(static_cast<std::int32_t>(tensor.type)));
  const std::int64_t count = element_count(tensor, scope);
  const ElementInfo* info = element_info(tensor.type);
  // A type of a later ONNX version (8-bit floats, 4-bit integers): Kiln holds none of them, and
  // their packing is not checked here; the type and dims are kept for messages.
  if (info == nullptr) return;
  const Shape shape(tensor.dims);
  const auto counts = fields.counts();

  if (fields.external || fields.raw_data) {
    const std::string_view source = fields.external ? "external data" : "raw_data";
    KILN_CHECK(!(fields.external && fields.raw_data), "{}: holds both raw_data and external data", scope.where());
    for (std::size_t i = 0; i < counts.size(); ++i)
      KILN_CHECK(counts[i] == 0, "{}: holds values in both {} and {}", scope.where(), source, kValuesFieldNames[i]);
    KILN_CHECK(info->size != 0, "{}: a STRING tensor's values are in string_data, not in {}", scope.where(), source);
    std::uint64_t need = 0;
    const bool need_overflows = __builtin_mul_overflow(static_cast<std::uint64_t>(count), info->size, &need);
    std::vector<std::byte> bytes;
    if (fields.external) {
      // The location is checked whatever the type; the file is read only for a type Kiln holds.
      if (!info->held) {
        (void)external_path(fields, scope);
        return;
      }
      bytes = read_external(tensor, *info, fields, need, need_overflows, scope);
    } else {
      const std::span<const std::byte> raw = *fields.raw_data;
      KILN_CHECK(!need_overflows && raw.size() == need, "{}: raw_data holds {} bytes, dims {} of {} need {}",
                 scope.where(), raw.size(), tensor.dims, info->name, byte_count(need, need_overflows));
      if (!info->held) return;
      bytes.assign(raw.begin(), raw.end());
    }
    if (info->held != info->dtype) {
      auto wide = widened(*info, bytes);
      if (!wide) return;  // a UINT64 value beyond int64: the tensor is not held
      bytes = std::move(*wide);
    }
    // A bool is one byte, 0 or 1; any other byte would be undefined behaviour to read as bool.
    if (info->dtype == DType::boolean)
      for (std::byte& b : bytes) b = std::byte{b != std::byte{0}};
    tensor.data = TensorData(std::move(bytes), shape, *info->held);
    return;
  }

  const auto field = static_cast<std::size_t>(info->field);
  for (std::size_t i = 0; i < counts.size(); ++i)
    KILN_CHECK(i == field || counts[i] == 0, "{}: {} holds {} values, but {} values belong in {} (or raw_data)",
               scope.where(), kValuesFieldNames[i], counts[i], info->name, kValuesFieldNames[field]);
  // count <= 2^63 - 1 and per_element <= 2: the product fits in uint64.
  const std::uint64_t need = static_cast<std::uint64_t>(count) * info->per_element;
  KILN_CHECK(counts[field] == need, "{}: {} holds {} values, dims {} of {} need {}", scope.where(),
             kValuesFieldNames[field], counts[field], tensor.dims, info->name, need);
  if (info->type == ElementType::string) {
    tensor.strings = fields.string_data;
    return;
  }
  if (!info->held) return;
  if (auto bytes = typed_bytes(*info, fields, scope)) tensor.data = TensorData(std::move(*bytes), shape, *info->held);
}

}  // namespace

TensorValue read_tensor(std::span<const std::byte> bytes, Scope scope) {
  TensorValue tensor;
  TensorFields fields;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    switch (reader.number()) {
      case 1: reader.append("dims", tensor.dims); break;
      case 2: tensor.type = static_cast<ElementType>(reader.int32("data_type")); break;
      case 4: reader.append("float_data", fields.float_data); break;
      case 5: reader.append("int32_data", fields.int32_data); break;
      case 6:
        fields.string_data.push_back(reader.string("string_data"));
        break;
      case 7: reader.append("int64_data", fields.int64_data); break;
      case 8:
        tensor.name = reader.string("name");
        if (!tensor.name.empty()) scope.label = named("TensorProto", tensor.name);
        break;
      case 9: fields.raw_data = reader.bytes("raw_data"); break;
      case 10: reader.append("double_data", fields.double_data); break;
      case 11: reader.append("uint64_data", fields.uint64_data); break;
      case 13:
        read_external_entry(reader.bytes("external_data"), scope.nested("StringStringEntryProto (external_data)"),
                            fields);
        break;
      case 14: fields.external = reader.int32("data_location") == 1; break;
      default: break;  // segment, doc_string and fields of later versions
    }
  }
  fill_values(tensor, fields, scope);
  return tensor;
}

// ---- the graph

namespace {

Graph read_graph(std::span<const std::byte> bytes, Scope scope);

using Kind = Attribute::Kind;

// The kind of attribute each value field of AttributeProto holds.
constexpr std::pair<std::uint32_t, Kind> kAttributeValueFields[] = {
    {2, Kind::f},
    {3, Kind::i},
    {4, Kind::s},
    {5, Kind::tensor},
    {6, Kind::graph},
    {7, Kind::floats},
    {8, Kind::ints},
    {9, Kind::strings},
    {10, Kind::tensors},
    {11, Kind::graphs},
    {14, Kind::type_proto},
    {15, Kind::type_protos},
    {22, Kind::sparse_tensor},
    {23, Kind::sparse_tensors},
};

Attribute read_attribute(std::span<const std::byte> bytes, Scope scope) {
  Attribute attribute;
  std::optional<std::int32_t> type;
  // Files of early IR versions have no `type`: the kind is that of the first value field read.
  Kind present = Kind::undefined;
  std::vector<float> floats;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    for (const auto& [number, kind] : kAttributeValueFields)
      if (present == Kind::undefined && reader.number() == number) present = kind;
    switch (reader.number()) {
      case 1:
        attribute.name = reader.string("name");
        scope.label = named("AttributeProto", attribute.name);
        break;
      case 20: type = reader.int32("type"); break;
      case 2: attribute.f = reader.float32("f"); break;
      case 3: attribute.i = reader.int64("i"); break;
      case 4: attribute.s = reader.string("s"); break;
      case 5: attribute.tensor = read_tensor(reader.bytes("t"), scope.nested("TensorProto (t)")); break;
      case 6:
        attribute.graph = std::make_shared<const Graph>(read_graph(reader.bytes("g"), scope.nested("GraphProto (g)")));
        break;
      case 7: reader.append("floats", floats); break;
      case 8: reader.append("ints", attribute.ints); break;
      case 9: attribute.strings.push_back(reader.string("strings")); break;
      case 10:
        attribute.tensors.push_back(read_tensor(
            reader.bytes("tensors"), scope.nested(numbered("TensorProto", "tensors", attribute.tensors.size()))));
        break;
      case 11:
        attribute.graphs.push_back(std::make_shared<const Graph>(read_graph(
            reader.bytes("graphs"), scope.nested(numbered("GraphProto", "graphs", attribute.graphs.size())))));
        break;
      // Sparse tensors and types: no Kiln op takes one, so only the kind is kept.
      case 22: (void)reader.bytes("sparse_tensor"); break;
      case 23: (void)reader.bytes("sparse_tensors"); break;
      case 14: (void)reader.bytes("tp"); break;
      case 15: (void)reader.bytes("type_protos"); break;
      default: break;  // doc_string, ref_attr_name (used in functions only)
    }
  }
  attribute.floats.assign(floats.begin(), floats.end());
  if (type && *type != 0) {
    KILN_CHECK(*type > 0 && *type <= static_cast<std::int32_t>(Kind::type_protos),
               "{}: type is {}, not an AttributeProto.AttributeType (1 to 14)", scope.where(), *type);
    attribute.kind = static_cast<Kind>(*type);
  } else {
    attribute.kind = present;
  }
  return attribute;
}

Node read_node(std::span<const std::byte> bytes, Scope scope) {
  Node node;
  const std::string base = scope.label;  // "NodeProto #3", to which the name and op are added
  const auto relabel = [&] {
    scope.label = base + (node.name.empty() ? "" : " " + quote_name(node.name)) +
                  (node.op_type.empty() ? "" : " (" + escaped(node.op_type) + ")");
  };
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    switch (reader.number()) {
      case 1: node.inputs.push_back(reader.string("input")); break;
      case 2: node.outputs.push_back(reader.string("output")); break;
      case 3:
        node.name = reader.string("name");
        relabel();
        break;
      case 4:
        node.op_type = reader.string("op_type");
        relabel();
        break;
      case 7: node.domain = reader.string("domain"); break;
      case 5:
        node.attributes.push_back(read_attribute(
            reader.bytes("attribute"), scope.nested(numbered("AttributeProto", "attribute", node.attributes.size()))));
        break;
      default: break;  // doc_string
    }
  }
  return node;
}

Dim read_dim(std::span<const std::byte> bytes, Scope scope) {
  Dim dim;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    // dim_value and dim_param are a oneof: the last one read is the one that holds.
    if (reader.number() == 1) {
      // A negative size means "unknown" to the exporters that write one, as -1 does here.
      dim.value = std::max<std::int64_t>(reader.int64("dim_value"), -1);
      dim.param.clear();
    } else if (reader.number() == 2) {
      dim.param = reader.string("dim_param");
      dim.value = -1;
    }
  }
  return dim;
}

std::vector<Dim> read_shape(std::span<const std::byte> bytes, Scope scope) {
  std::vector<Dim> dims;
  FieldReader reader(bytes, scope);
  while (reader.next())
    if (reader.number() == 1)
      dims.push_back(read_dim(reader.bytes("dim"), scope.nested(numbered("Dimension", "dim", dims.size()))));
  return dims;
}

// A TypeProto: a tensor type's element type and shape, a sequence's or optional's type inside;
// maps and sparse tensors are only marked as such.
void read_type(std::span<const std::byte> bytes, Scope scope, ValueInfo& info) {
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    switch (reader.number()) {
      case 1: {
        info.kind = ValueInfo::Kind::tensor;
        const Scope tensor_scope = scope.nested("TypeProto.Tensor (tensor_type)");
        FieldReader tensor(reader.bytes("tensor_type"), tensor_scope);
        while (tensor.next()) {
          if (tensor.number() == 1)
            info.type = static_cast<ElementType>(tensor.int32("elem_type"));
          else if (tensor.number() == 2)
            info.shape = read_shape(tensor.bytes("shape"), tensor_scope.nested("TensorShapeProto"));
        }
        break;
      }
      case 4:
      case 9: {
        // Sequence and Optional: one field, elem_type (1), the TypeProto inside.
        const bool sequence = reader.number() == 4;
        info.kind = sequence ? ValueInfo::Kind::sequence : ValueInfo::Kind::optional;
        const Scope inner_scope = scope.nested(sequence ? "TypeProto.Sequence (sequence_type)"
                                                        : "TypeProto.Optional (optional_type)");
        FieldReader inner(reader.bytes(sequence ? "sequence_type" : "optional_type"), inner_scope);
        auto element = std::make_shared<ValueInfo>();
        while (inner.next())
          if (inner.number() == 1) read_type(inner.bytes("elem_type"), inner_scope.nested("TypeProto (elem_type)"), *element);
        info.type = element->type;
        info.element = std::move(element);
        break;
      }
      case 5:
        (void)reader.bytes("map_type");
        info.kind = ValueInfo::Kind::map;
        break;
      case 8:
        (void)reader.bytes("sparse_tensor_type");
        info.kind = ValueInfo::Kind::sparse_tensor;
        break;
      default: break;  // denotation
    }
  }
}

ValueInfo read_value_info(std::span<const std::byte> bytes, Scope scope) {
  ValueInfo info;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    if (reader.number() == 1) {
      info.name = reader.string("name");
      scope.label = named("ValueInfoProto", info.name);
    } else if (reader.number() == 2) {
      read_type(reader.bytes("type"), scope.nested("TypeProto"), info);
    }
  }
  return info;
}

Graph read_graph(std::span<const std::byte> bytes, Scope scope) {
  Graph graph;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    switch (reader.number()) {
      case 1:
        graph.nodes.push_back(
            read_node(reader.bytes("node"), scope.nested("NodeProto #" + std::to_string(graph.nodes.size()))));
        break;
      case 2:
        graph.name = reader.string("name");
        scope.label = named("GraphProto", graph.name);
        break;
      case 5:
        graph.initializers.push_back(
            read_tensor(reader.bytes("initializer"),
                        scope.nested(numbered("TensorProto", "initializer", graph.initializers.size()))));
        break;
      case 11:
        graph.inputs.push_back(read_value_info(reader.bytes("input"),
                                               scope.nested(numbered("ValueInfoProto", "input", graph.inputs.size()))));
        break;
      case 12:
        graph.outputs.push_back(read_value_info(
            reader.bytes("output"), scope.nested(numbered("ValueInfoProto", "output", graph.outputs.size()))));
        break;
      case 13:
        graph.value_info.push_back(
            read_value_info(reader.bytes("value_info"),
                            scope.nested(numbered("ValueInfoProto", "value_info", graph.value_info.size()))));
        break;
      // sparse_initializer (15) is not read: TensorValue has no sparse form, and a node that
      // uses one finds no value of that name, which is where the error belongs.
      default: break;
    }
  }
  return graph;
}

void read_opset(std::span<const std::byte> bytes, Scope scope, ModelFile& model) {
  std::string domain;
  std::int64_t version = 0;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    if (reader.number() == 1)
      domain = reader.string("domain");
    else if (reader.number() == 2)
      version = reader.int64("version");
  }
  if (domain == "ai.onnx") domain.clear();  // the default domain's two spellings
  model.opsets[domain] = version;
}

}  // namespace

ModelFile read_model(std::span<const std::byte> bytes, Scope scope) {
  ModelFile model;
  bool has_graph = false;
  std::size_t opset_imports = 0;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    switch (reader.number()) {
      case 1: model.ir_version = reader.int64("ir_version"); break;
      case 2: model.producer_name = reader.string("producer_name"); break;
      case 3: model.producer_version = reader.string("producer_version"); break;
      case 7:
        model.graph = read_graph(reader.bytes("graph"), scope.nested("GraphProto (graph)"));
        has_graph = true;
        break;
      case 8:
        read_opset(reader.bytes("opset_import"),
                   scope.nested(numbered("OperatorSetIdProto", "opset_import", opset_imports++)), model);
        break;
      default: break;  // domain, model_version, doc_string, metadata_props, training_info, functions
    }
  }
  KILN_CHECK(has_graph, "{}: has no graph (field 7); the bytes are not an ONNX model", scope.where());
  return model;
}

// ---- SequenceProto and OptionalProto (the node tests' values that are not tensors)

DataValue read_value(std::span<const std::byte> bytes, ValueInfo::Kind kind, Scope scope) {
  DataValue value;
  value.kind = kind;
  if (kind == ValueInfo::Kind::tensor) {
    value.tensor = read_tensor(bytes, scope);
    return value;
  }
  KILN_CHECK(kind == ValueInfo::Kind::sequence || kind == ValueInfo::Kind::optional,
             "{}: Kiln reads tensors, sequences and optionals, not maps or sparse tensors", scope.where());
  const bool sequence = kind == ValueInfo::Kind::sequence;
  const std::string_view message = sequence ? "SequenceProto" : "OptionalProto";
  std::int32_t elem_type = 0;
  FieldReader reader(bytes, scope);
  while (reader.next()) {
    const std::uint32_t n = reader.number();
    switch (n) {
      case 1: scope.label = named(message, reader.string("name")); break;
      case 2: elem_type = reader.int32("elem_type"); break;
      case 3:
      case 5:
      case 7: {
        const ValueInfo::Kind inner = n == 3 ? ValueInfo::Kind::tensor
                                      : n == 5 ? ValueInfo::Kind::sequence
                                               : ValueInfo::Kind::optional;
        const std::string_view field = n == 3   ? (sequence ? "tensor_values" : "tensor_value")
                                       : n == 5 ? (sequence ? "sequence_values" : "sequence_value")
                                                : (sequence ? "optional_values" : "optional_value");
        KILN_CHECK(sequence || value.elements.empty(), "{}: holds more than one value", scope.where());
        value.elements.push_back(read_value(reader.bytes(field), inner,
                                            scope.nested(numbered(n == 3 ? "TensorProto" : n == 5 ? "SequenceProto"
                                                                                                   : "OptionalProto",
                                                                  field, value.elements.size()))));
        break;
      }
      case 4:
      case 6:
        KILN_FAIL("{}: holds {}, which Kiln does not read", scope.where(), n == 4 ? "sparse tensors" : "maps");
      default: break;
    }
  }
  // elem_type: 1 tensor, 3 sequence, 5 optional (2 sparse tensor, 4 map); 0 only when empty.
  for (const DataValue& e : value.elements) {
    const std::int32_t want = e.kind == ValueInfo::Kind::tensor ? 1 : e.kind == ValueInfo::Kind::sequence ? 3 : 5;
    KILN_CHECK(elem_type == want, "{}: elem_type is {}, but it holds a value of elem_type {}", scope.where(), elem_type,
               want);
  }
  return value;
}

}  // namespace kiln::onnx::detail
