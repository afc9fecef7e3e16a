// A reader for zip archives whose entries are stored uncompressed (what torch.save
// writes): the central directory, ZIP64 records where sizes or offsets need them, and
// CRC-32 checks of the entries read. Everything is validated against the archive's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::store::detail {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0: stored; anything else is compressed
  std::uint16_t flags = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t size = 0;         // uncompressed
  std::uint64_t stored_size = 0;  // compressed (equal to size for stored entries)
  std::uint64_t data_offset = 0;  // where the entry's bytes start in the archive
};

class ZipArchive {
 public:
  // Reads the central directory of the archive in `bytes` (which must outlive this
  // object); `source` names it in error messages.
  ZipArchive(std::span<const std::byte> bytes, std::string source);

  // Whether the bytes end with a zip end-of-central-directory record at all.
  static bool looks_like_zip(std::span<const std::byte> bytes);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;
  // The bytes of a stored entry, after checking its CRC-32; a compressed or encrypted
  // entry is an error naming it.
  std::span<const std::byte> read(const ZipEntry& entry) const;

 private:
  std::span<const std::byte> bytes_;
  std::string source_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// The CRC-32 (IEEE 802.3, as zip uses) of `bytes`.
std::uint32_t crc32(std::span<const std::byte> bytes);

}  // namespace kiln::store::detail
