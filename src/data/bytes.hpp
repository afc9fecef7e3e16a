// Reading a whole file into memory, and gunzipping it when its bytes say gzip: the
// first step of every reader in kiln::data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data::detail {

// The bytes of `path`; `reader` names the caller in errors (missing file, a directory...).
// Only regular files are read: a FIFO, a device or a socket is an error, at once (a FIFO
// that nobody writes to would otherwise block forever, and /dev/zero never ends).
std::vector<std::uint8_t> read_file(std::string_view reader, const std::filesystem::path& path);

// True when the bytes begin with gzip's magic number (1f 8b).
bool is_gzip(std::span<const std::uint8_t> bytes);

// A gzip stream may inflate to at most gunzip_ratio times its compressed size, or to
// gunzip_floor bytes where that is more: real datasets compress 1.1:1 (CIFAR's pixels) to
// 5:1 (MNIST, numeric CSV), while deflate reaches 1032:1 on runs of one byte, so a 1 MB
// file could otherwise inflate to a gigabyte before any check sees it.
inline constexpr std::size_t gunzip_ratio = 16;
inline constexpr std::size_t gunzip_floor = std::size_t{16} << 20;
// The most bytes `compressed` gzip bytes may inflate to.
std::size_t gunzip_budget(std::size_t compressed);

// The decompressed content of a gzip stream (several members are concatenated). A corrupt
// or truncated stream, bytes after it that are not another member, or more output than
// gunzip_budget allows, is a kiln::Error naming `reader`, `name` and the compressed byte
// offset or the sizes at fault. Decompression stops once `limit` bytes are out: a result
// of exactly `limit` bytes may have had more behind it (unchecked), so a reader that knows
// its size passes that size plus one.
std::vector<std::uint8_t> gunzip(std::string_view reader, std::string_view name, std::span<const std::uint8_t> bytes,
                                 std::size_t limit = SIZE_MAX);

// A file's content, gunzipped when it is gzip; `name` is set to what errors should call
// it: the path, with " (gunzipped)" after it for a gzip file.
std::vector<std::uint8_t> read_maybe_gzip(std::string_view reader, const std::filesystem::path& path,
                                          std::string& name);

// The big-endian 32-bit unsigned integer at `at`.
inline std::uint32_t read_be32(const std::uint8_t* at) {
  return (std::uint32_t{at[0]} << 24) | (std::uint32_t{at[1]} << 16) | (std::uint32_t{at[2]} << 8) |
         std::uint32_t{at[3]};
}

}  // namespace kiln::data::detail
