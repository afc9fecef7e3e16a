// Writes zip archives of stored entries, as torch.save does (without its alignment
// padding): the tests build malformed checkpoints with it, and the torch fuzzer wraps
// raw pickles into archives. No gtest here, so that the fuzzers can include it.
#pragma once

#include "zip.hpp"  // detail::crc32, from src/store

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store::test {

inline std::vector<std::byte> to_bytes(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  return {bytes.begin(), bytes.end()};
}

inline void put_le(std::vector<std::byte>& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xffu));
}

// A zip archive of stored entries, as torch.save writes them (without its alignment padding).
inline std::vector<std::byte> make_zip(const std::vector<std::pair<std::string, std::vector<std::byte>>>& entries) {
  std::vector<std::byte> out;
  std::vector<std::byte> central;
  for (const auto& [name, data] : entries) {
    const std::uint32_t crc = detail::crc32(data);
    const std::uint64_t offset = out.size();
    for (auto* part : {&out, &central}) {
      const bool is_central = part == &central;
      put_le(*part, is_central ? 0x02014b50 : 0x04034b50, 4);
      if (is_central) put_le(*part, 20, 2);                                  // version made by
      for (std::uint64_t field : {20, 0, 0, 0, 0}) put_le(*part, field, 2);  // version, flags, method, time, date
      put_le(*part, crc, 4);
      put_le(*part, data.size(), 4);
      put_le(*part, data.size(), 4);
      put_le(*part, name.size(), 2);
      put_le(*part, 0, 2);  // extra field
      if (is_central) {
        for (int field = 0; field < 3; ++field) put_le(*part, 0, 2);  // comment, disk, internal attributes
        put_le(*part, 0, 4);                                          // external attributes
        put_le(*part, offset, 4);
      }
      const auto name_bytes = to_bytes(name);
      part->insert(part->end(), name_bytes.begin(), name_bytes.end());
      if (!is_central) part->insert(part->end(), data.begin(), data.end());
    }
  }
  const std::uint64_t directory_offset = out.size();
  out.insert(out.end(), central.begin(), central.end());
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2);
  put_le(out, 0, 2);
  put_le(out, entries.size(), 2);
  put_le(out, entries.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, directory_offset, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace kiln::store::test
