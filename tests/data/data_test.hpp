// Helpers for the data tests: scratch directories and files, gzip compression (zlib, as
// the gzip tool writes), hand-made IDX and CIFAR files, and error-message checks.
#pragma once

#include <kiln/core/error.hpp>
#include <kiln/core/tensor_data.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data::test {

using Bytes = std::vector<std::uint8_t>;

// A fresh directory, removed with its content at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-data-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline void write_text(const std::filesystem::path& path, std::string_view text) {
  write_file(path, Bytes(text.begin(), text.end()));
}

// The bytes as a gzip file (one member, with header and CRC-32 trailer).
inline Bytes gzip(const Bytes& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  Bytes out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 32);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
  return out;
}

inline void put_be32(Bytes& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

// An IDX file: magic (0, 0, type, rank), big-endian dims, then `data` as given.
inline Bytes idx_file(std::uint8_t type, std::initializer_list<std::uint32_t> dims, const Bytes& data) {
  Bytes out{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (const std::uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// n bytes counting up from `start` (mod 256).
inline Bytes counting(std::size_t n, std::uint8_t start = 0) {
  Bytes out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(start + i);
  return out;
}

template <class T> std::vector<T> values(const TensorData& data) {
  const auto span = data.as<T>();
  return std::vector<T>(span.begin(), span.end());
}


}  // namespace kiln::data::test
