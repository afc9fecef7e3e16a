// safetensors: the writer (atomic, streaming) and the validating, memory-mapped reader.
#include "kiln/store/safetensors.hpp"

#include "atomic_file.hpp"
#include "bytes.hpp"
#include "json.hpp"
#include "../common/mapped_file.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <new>

namespace kiln::store {
namespace {

namespace json = detail::json;

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr std::array<DTypeName, dtype_count> kDTypeNames{{{DType::f32, "F32"},
                                                          {DType::f64, "F64"},
                                                          {DType::f16, "F16"},
                                                          {DType::bf16, "BF16"},
                                                          {DType::i32, "I32"},
                                                          {DType::i64, "I64"},
                                                          {DType::u8, "U8"},
                                                          {DType::boolean, "BOOL"}}};

std::string_view safetensors_dtype_name(DType dtype) {
  for (const auto& entry : kDTypeNames)
    if (entry.dtype == dtype) return entry.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kDTypeNames)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// The dtype `data` is stored in under `options`.
DType stored_dtype(const TensorData& data, const SafetensorsWriteOptions& options) {
  return options.float_dtype && is_float(data.dtype()) ? *options.float_dtype : data.dtype();
}

// Writes the file to `sink` (a callable taking std::span<const std::byte>), one tensor
// at a time, so that only one converted tensor is in memory at once.
template <class Sink> void write_safetensors(std::string_view what, const NamedTensors& tensors,
                                             const SafetensorsWriteOptions& options, Sink&& sink) {
  detail::check_float_dtype(what, options.float_dtype);
  std::string header = "{";
  if (!options.metadata.empty()) {
    header += json::quote(kMetadataKey) + ":{";
    bool first = true;
    for (const auto& [key, value] : options.metadata) {
      KILN_CHECK(json::is_valid_utf8(key) && json::is_valid_utf8(value),
                 "{}: metadata entry {} is not valid UTF-8, which the JSON header requires", what, json::quote(key));
      header += fmt::format("{}{}:{}", first ? "" : ",", json::quote(key), json::quote(value));
      first = false;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (const auto& [name, data] : tensors) {
    KILN_CHECK(name != kMetadataKey, "{}: a tensor may not be named {} (the header's metadata key)", what,
               kMetadataKey);
    KILN_CHECK(json::is_valid_utf8(name), "{}: tensor name {} is not valid UTF-8, which the JSON header requires", what,
               json::quote(name));
    const DType dtype = stored_dtype(data, options);
    const std::uint64_t size = static_cast<std::uint64_t>(data.numel()) * dtype_size(dtype);
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", json::quote(name), safetensors_dtype_name(dtype),
                          fmt::join(data.shape().dims(), ","), offset, offset + size);
    offset += size;
  }
  header += "}";
  KILN_CHECK(header.size() <= kMaxHeaderBytes,
             "{}: the header of {} tensors takes {} bytes, more than the {} the "
             "safetensors format allows",
             what, tensors.size(), header.size(), kMaxHeaderBytes);
  // Spaces pad the header so that the data section starts 8-byte aligned, as the
  // reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');

  std::array<std::byte, 8> length{};
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xffu);
  sink(std::span<const std::byte>(length));
  sink(std::as_bytes(std::span(header)));
  for (const auto& [name, data] : tensors) {
    const DType dtype = stored_dtype(data, options);
    if (dtype == data.dtype())
      sink(data.bytes());
    else
      sink(data.convert(dtype).bytes());
  }
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const SafetensorsWriteOptions& options) {
  detail::AtomicFile file(path, "save_safetensors");
  write_safetensors("save_safetensors", tensors, options, [&](std::span<const std::byte> bytes) { file.write(bytes); });
  file.commit();
}

std::vector<std::byte> serialize_safetensors(const NamedTensors& tensors, const SafetensorsWriteOptions& options) {
  std::vector<std::byte> out;
  write_safetensors("serialize_safetensors", tensors, options,
                    [&](std::span<const std::byte> bytes) { out.insert(out.end(), bytes.begin(), bytes.end()); });
  return out;
}

// ---- reading

struct SafetensorsFile::State {
  std::string name;
  std::unique_ptr<kiln::detail::MappedFile> mapping;  // null when reading from memory
  std::span<const std::byte> data;              // the data section
  std::vector<SafetensorsTensorInfo> tensors;   // in data order
  std::map<std::string, std::size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  // Validates the file in `bytes` and fills in the tensors and metadata.
  void parse(std::span<const std::byte> bytes);
};

namespace {

std::string range(std::uint64_t begin, std::uint64_t end) { return fmt::format("[{}, {})", begin, end); }

// Reads one tensor's header entry; `data_size` is the size of the data section.
SafetensorsTensorInfo parse_tensor(const std::string& file, const std::string& name, const json::Value& entry,
                                   std::uint64_t data_size) {
  const std::string where = fmt::format("{}: header: tensor {}", file, json::quote(name));
  KILN_CHECK(entry.kind == json::Value::Kind::object,
             "{} (header byte {}): expected an object with dtype, shape and data_offsets, found {}", where,
             entry.offset, json::kind_name(entry.kind));
  const json::Value* dtype = nullptr;
  const json::Value* shape = nullptr;
  const json::Value* offsets = nullptr;
  for (const auto& [key, value] : entry.object) {
    if (key == "dtype")
      dtype = &value;
    else if (key == "shape")
      shape = &value;
    else if (key == "data_offsets")
      offsets = &value;
    else
      KILN_FAIL("{}: unknown key {} (expected dtype, shape and data_offsets)", where, json::quote(key));
  }
  KILN_CHECK(dtype && shape && offsets, "{}: has no '{}'", where, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

  SafetensorsTensorInfo info;
  info.name = name;
  KILN_CHECK(dtype->kind == json::Value::Kind::string, "{}: dtype must be a string, found {}", where,
             json::kind_name(dtype->kind));
  const std::optional<DType> parsed = parse_dtype(dtype->text);
  KILN_CHECK(parsed.has_value(), "{}: dtype {} is not one Kiln reads (F32, F64, F16, BF16, I32, I64, U8, BOOL)", where,
             json::quote(dtype->text));
  info.dtype = *parsed;

  KILN_CHECK(shape->kind == json::Value::Kind::array, "{}: shape must be an array of non-negative integers, found {}",
             where, json::kind_name(shape->kind));
  // The product of the non-zero dims must fit int64, so that Shape::numel never overflows.
  std::int64_t nonzero_product = 1;
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < shape->array.size(); ++i) {
    const std::optional<std::uint64_t> dim = shape->array[i].as_uint64();
    KILN_CHECK(dim && *dim <= static_cast<std::uint64_t>(INT64_MAX),
               "{}: shape must be an array of non-negative integers; dim {} is {}", where, i,
               shape->array[i].kind == json::Value::Kind::number ? shape->array[i].text
                                                                 : std::string(json::kind_name(shape->array[i].kind)));
    dims.push_back(static_cast<std::int64_t>(*dim));
    if (*dim != 0) {
      const auto product = detail::checked_mul(nonzero_product, static_cast<std::int64_t>(*dim));
      KILN_CHECK(product.has_value(), "{}: shape {} has more elements than fit in 64 bits", where, Shape(dims));
      nonzero_product = *product;
    }
  }
  info.shape = Shape(dims);

  KILN_CHECK(offsets->kind == json::Value::Kind::array && offsets->array.size() == 2 && offsets->array[0].as_uint64() &&
                 offsets->array[1].as_uint64(),
             "{}: data_offsets must be two non-negative integers [begin, end]", where);
  info.data_begin = *offsets->array[0].as_uint64();
  info.data_end = *offsets->array[1].as_uint64();
  KILN_CHECK(info.data_begin <= info.data_end, "{}: data_offsets {} end before they begin", where,
             range(info.data_begin, info.data_end));
  KILN_CHECK(info.data_end <= data_size, "{}: data_offsets {} run past the end of the data section ({} bytes)", where,
             range(info.data_begin, info.data_end), data_size);
  const auto bytes = detail::checked_mul(static_cast<std::uint64_t>(info.shape.numel()),
                                         static_cast<std::uint64_t>(dtype_size(info.dtype)));
  KILN_CHECK(bytes && *bytes == info.data_end - info.data_begin,
             "{}: shape {} of {} needs {} bytes, but data_offsets {} hold {}", where, info.shape, dtype->text,
             bytes ? fmt::format("{}", *bytes) : std::string("more than 2^64"), range(info.data_begin, info.data_end),
             info.data_end - info.data_begin);
  return info;
}

}  // namespace

void SafetensorsFile::State::parse(std::span<const std::byte> bytes) {
  const std::string& file = name;
  KILN_CHECK(bytes.size() >= 8,
             "{}: the file has {} bytes, fewer than the 8-byte header length a safetensors file starts with", file,
             bytes.size());
  const auto header_size = detail::load_le<std::uint64_t>(bytes.data());
  // The format's own limit (the reference reader refuses larger headers too); it also
  // bounds the memory the parsed JSON takes.
  KILN_CHECK(header_size <= kMaxHeaderBytes,
             "{}: the header length (file bytes 0-7) is {}, more than the {} bytes "
             "the safetensors format allows",
             file, header_size, kMaxHeaderBytes);
  KILN_CHECK(header_size <= bytes.size() - 8,
             "{}: the header length (file bytes 0-7) is {}, but only {} bytes follow it: the file is truncated or not "
             "safetensors",
             file, header_size, bytes.size() - 8);
  const auto header_text = detail::as_chars(bytes.subspan(8, header_size));
  data = bytes.subspan(8 + header_size);
  const std::uint64_t data_size = data.size();

  const json::Value header = json::parse(header_text, file + ": header", 8);
  KILN_CHECK(header.kind == json::Value::Kind::object, "{}: header: expected a JSON object, found {}", file,
             json::kind_name(header.kind));
  for (const auto& [key, entry] : header.object) {
    if (key == kMetadataKey) {
      if (entry.kind == json::Value::Kind::null) continue;
      KILN_CHECK(entry.kind == json::Value::Kind::object, "{}: header: {} must be an object of strings, found {}", file,
                 kMetadataKey, json::kind_name(entry.kind));
      for (const auto& [metadata_key, value] : entry.object) {
        KILN_CHECK(value.kind == json::Value::Kind::string, "{}: header: {} entry {} must be a string, found {}", file,
                   kMetadataKey, json::quote(metadata_key), json::kind_name(value.kind));
        metadata.emplace(metadata_key, value.text);
      }
      continue;
    }
    tensors.push_back(parse_tensor(file, key, entry, data_size));
  }

  // The byte ranges must tile the data section: sorted by start, each begins where the
  // previous one ended, the first at 0 and the last at the end. (Empty tensors take no
  // bytes; ties order by end so that one sits before a tensor starting at the same byte,
  // and keep the header's order among themselves.)
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  std::uint64_t covered = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& info : tensors) {
    if (info.data_begin < covered) {
      KILN_FAIL("{}: header: tensors {} (data {}) and {} (data {}) overlap", file, json::quote(previous->name),
                range(previous->data_begin, previous->data_end), json::quote(info.name),
                range(info.data_begin, info.data_end));
    }
    KILN_CHECK(info.data_begin == covered, "{}: header: data bytes {} belong to no tensor (before tensor {} at {})",
               file, range(covered, info.data_begin), json::quote(info.name), range(info.data_begin, info.data_end));
    covered = info.data_end;
    previous = &info;
  }
  KILN_CHECK(
      covered == data_size,
      "{}: the data section has {} bytes (file offsets {} to {}), but the tensors cover only the first {}: bytes "
      "{} belong to no tensor",
      file, data_size, 8 + header_size, bytes.size(), covered, range(covered, data_size));
  for (std::size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const State> state) : state_(std::move(state)) {}

namespace {
// A header whose parsing runs out of memory is a kiln::Error like any other bad file.
[[noreturn]] void out_of_memory(const std::string& name, std::size_t size) {
  KILN_FAIL("{}: out of memory while reading the header of this {}-byte file", name, size);
}
}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto state = std::make_shared<State>();
  state->name = path.string();
  state->mapping = std::make_unique<kiln::detail::MappedFile>(path, path.string(), detail::kWeightsFileAdvice);
  try {
    state->parse(state->mapping->bytes());
  } catch (const std::bad_alloc&) {
    out_of_memory(state->name, state->mapping->bytes().size());
  }
  return SafetensorsFile(std::move(state));
}

SafetensorsFile SafetensorsFile::from_memory(std::span<const std::byte> bytes, std::string name) {
  auto state = std::make_shared<State>();
  state->name = std::move(name);
  try {
    state->parse(bytes);
  } catch (const std::bad_alloc&) {
    out_of_memory(state->name, bytes.size());
  }
  return SafetensorsFile(std::move(state));
}

const std::string& SafetensorsFile::name() const { return state_->name; }
const std::vector<SafetensorsTensorInfo>& SafetensorsFile::tensors() const { return state_->tensors; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return state_->metadata; }

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(state_->tensors.size());
  for (const auto& info : state_->tensors) names.push_back(info.name);
  return names;
}

bool SafetensorsFile::contains(std::string_view tensor) const { return state_->index.contains(tensor); }

const SafetensorsTensorInfo& SafetensorsFile::info(std::string_view tensor) const {
  const auto it = state_->index.find(tensor);
  KILN_CHECK(it != state_->index.end(), "{}: no tensor named {} (the file has {})", state_->name, json::quote(tensor),
             state_->tensors.size());
  return state_->tensors[it->second];
}

TensorData SafetensorsFile::load(std::string_view tensor, std::optional<DType> dtype) const {
  const SafetensorsTensorInfo& entry = info(tensor);
  const auto bytes = state_->data.subspan(entry.data_begin, entry.data_end - entry.data_begin);
  TensorData data(std::vector<std::byte>(bytes.begin(), bytes.end()), entry.shape, entry.dtype);
  return dtype && *dtype != entry.dtype ? data.convert(*dtype) : data;
}

NamedTensors SafetensorsFile::load_all(std::optional<DType> float_dtype) const {
  detail::check_float_dtype(state_->name + ": load_all", float_dtype);
  NamedTensors out;
  for (const auto& entry : state_->tensors) {
    const bool convert = float_dtype && is_float(entry.dtype);
    out.insert(entry.name, load(entry.name, convert ? float_dtype : std::nullopt));
  }
  return out;
}

NamedTensors load_safetensors(const std::filesystem::path& path, std::optional<DType> float_dtype) {
  return SafetensorsFile::open(path).load_all(float_dtype);
}

}  // namespace kiln::store
