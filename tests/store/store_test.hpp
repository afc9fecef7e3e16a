// Helpers for the weights-I/O tests: fixture paths, files and scratch directories, exact
// tensor comparison, error-message checks, and builders for hand-made zip archives and
// pickles (malformed checkpoints are easier to read as code than as binary fixtures).
#pragma once

#include <kiln/store/named_tensors.hpp>

#include "zip_writer.hpp"

#include <gtest/gtest.h>

#include "expect_error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store::test {

inline std::filesystem::path fixture(std::string_view name) {
  return std::filesystem::path(KILN_STORE_FIXTURES) / name;
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory, removed with its content at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-store-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }
  // The names of the files in the directory, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// Same dtype, shape and bytes (bit-identical, so NaN payloads and -0.0 count).
inline void expect_same(const TensorData& actual, const TensorData& expected, std::string_view what) {
  SCOPED_TRACE(std::string(what));
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.shape(), expected.shape());
  ASSERT_EQ(actual.bytes().size(), expected.bytes().size());
  EXPECT_TRUE(std::equal(actual.bytes().begin(), actual.bytes().end(), expected.bytes().begin()));
}

inline void expect_same(const NamedTensors& actual, const NamedTensors& expected) {
  EXPECT_EQ(actual.names(), expected.names());
  for (const auto& [name, data] : expected)
    if (actual.contains(name)) expect_same(actual.at(name), data, name);
}


// ---- hand-made pickles and checkpoints

// Builds pickle programs opcode by opcode (protocol 2, as torch.save writes).
class Pickle {
 public:
  Pickle() { raw("\x80\x02"); }
  Pickle& raw(std::string_view bytes) {
    bytes_ += bytes;
    return *this;
  }
  Pickle& op(char opcode) {
    bytes_ += opcode;
    return *this;
  }
  Pickle& str(std::string_view text) {
    bytes_ += 'X';
    for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((text.size() >> (8 * i)) & 0xffu);
    bytes_ += text;
    return *this;
  }
  // BININT1, BININT2 or BININT, the shortest that holds `value`; LONG1 of 8 bytes beyond 32 bits.
  Pickle& integer(std::int64_t value) {
    if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()) {
      bytes_ += "\x8a\x08";
      for (int i = 0; i < 8; ++i) bytes_ += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xffu);
      return *this;
    }
    const int size = value >= 0 && value < 256 ? 1 : value >= 0 && value < 65536 ? 2 : 4;
    bytes_ += size == 1 ? 'K' : size == 2 ? 'M' : 'J';
    for (int i = 0; i < size; ++i) bytes_ += static_cast<char>((static_cast<std::uint32_t>(value) >> (8 * i)) & 0xffu);
    return *this;
  }
  Pickle& global(std::string_view module, std::string_view name) {
    bytes_ += 'c';
    bytes_ += module;
    bytes_ += '\n';
    bytes_ += name;
    bytes_ += '\n';
    return *this;
  }
  Pickle& ints(std::initializer_list<std::int64_t> values) {
    op('(');
    for (const std::int64_t value : values) integer(value);
    return op('t');
  }
  // _rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, sizes, strides, False, OrderedDict())
  Pickle& tensor(std::string_view type, std::string_view key, std::int32_t numel, std::int32_t offset,
                 std::initializer_list<std::int64_t> sizes, std::initializer_list<std::int64_t> strides) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", type).str(key).str("cpu").integer(numel).op('t').op('Q');
    integer(offset).ints(sizes).ints(strides).raw("\x89");
    global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  // The program, ended by STOP.
  std::vector<std::byte> done() const { return to_bytes(bytes_ + "."); }

 private:
  std::string bytes_;
};

// A torch.save-like archive holding `pickle` and the given storages (key → bytes).
inline std::vector<std::byte> torch_archive(const std::vector<std::byte>& pickle,
                                            std::vector<std::pair<std::string, std::vector<std::byte>>> storages = {}) {
  std::vector<std::pair<std::string, std::vector<std::byte>>> entries{{"archive/data.pkl", pickle}};
  for (auto& [key, data] : storages) entries.emplace_back("archive/data/" + key, std::move(data));
  entries.emplace_back("archive/version", to_bytes("3\n"));
  return make_zip(entries);
}

template <class T> std::vector<std::byte> raw_bytes(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

}  // namespace kiln::store::test
