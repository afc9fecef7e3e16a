// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the
// raw data. Saving is atomic; reading maps the file and validates the whole header before
// any tensor is loaded. Compiled into kiln::store (libkiln_store); see docs/store.md.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/store/named_tensors.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::store {

struct SafetensorsWriteOptions {
  // Stores every floating-point tensor in this dtype (f16 or bf16 halve an f32 file);
  // integer and bool tensors keep theirs. Unset: each tensor keeps its dtype.
  std::optional<DType> float_dtype;
  // Free-form strings, stored under the header's "__metadata__" key.
  std::map<std::string, std::string> metadata;
};

// Writes `tensors`, in their order, to `path`. Atomic: the bytes go to a temporary file
// in the same directory, which is flushed to disk (fsync) and then renamed over `path`;
// when anything fails, `path` keeps its old content and the temporary file is removed.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const SafetensorsWriteOptions& options = {});
// The bytes save_safetensors would write.
std::vector<std::byte> serialize_safetensors(const NamedTensors& tensors, const SafetensorsWriteOptions& options = {});

// One tensor of a safetensors file, as its header describes it.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  // Its bytes [data_begin, data_end), counted from the start of the data section
  // (which is at file offset 8 + header length).
  std::uint64_t data_begin = 0;
  std::uint64_t data_end = 0;
};

// A validated safetensors file. Opening checks the header completely (JSON syntax, dtypes,
// shapes against byte ranges, ranges that tile the data section without gaps or overlap,
// unique names); loading a tensor copies its bytes out of the memory map. Copies share
// the mapping, which lives as long as the last copy.
class SafetensorsFile {
 public:
  // Memory-maps `path` read-only. The file must not shrink while it is open.
  static SafetensorsFile open(const std::filesystem::path& path);
  // Reads a safetensors image in memory, without copying it: `bytes` must outlive this
  // object and its copies. `name` stands for the file in error messages.
  static SafetensorsFile from_memory(std::span<const std::byte> bytes, std::string name = "<memory>");

  // The path, or the name given to from_memory.
  const std::string& name() const;
  // Every tensor, in the order of their data in the file.
  const std::vector<SafetensorsTensorInfo>& tensors() const;
  std::vector<std::string> names() const;
  bool contains(std::string_view tensor) const;
  const SafetensorsTensorInfo& info(std::string_view tensor) const;
  const std::map<std::string, std::string>& metadata() const;

  // One tensor, in its stored dtype or converted to `dtype` (floats to ints truncate
  // toward zero, as TensorData::convert does).
  TensorData load(std::string_view tensor, std::optional<DType> dtype = std::nullopt) const;
  // Every tensor, in file order; floating-point ones converted to `float_dtype` when it
  // is given (integer and bool tensors keep their dtype).
  NamedTensors load_all(std::optional<DType> float_dtype = std::nullopt) const;

 private:
  struct State;
  explicit SafetensorsFile(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
};

// SafetensorsFile::open(path).load_all(float_dtype).
NamedTensors load_safetensors(const std::filesystem::path& path, std::optional<DType> float_dtype = std::nullopt);

}  // namespace kiln::store
