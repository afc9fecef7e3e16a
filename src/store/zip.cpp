#include "zip.hpp"

#include "bytes.hpp"
#include "kiln/core/error.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::store::detail {
namespace {

constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr std::uint32_t kZip64EndOfCentralDirectory = 0x06064b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::size_t kEndSize = 22;       // end-of-central-directory record, without comment
constexpr std::size_t kLocatorSize = 20;   // ZIP64 end-of-central-directory locator
constexpr std::size_t kZip64EndSize = 56;  // ZIP64 end-of-central-directory record, fixed part
constexpr std::size_t kCentralSize = 46;   // central directory header, fixed part
constexpr std::size_t kLocalSize = 30;     // local file header, fixed part
constexpr std::uint16_t kZip64Extra = 0x0001;

// The offset of the end-of-central-directory record: the last signature within the final
// 22 + 65535 bytes (the comment is at most 65535 bytes) whose comment reaches the end.
std::optional<std::size_t> find_end_record(std::span<const std::byte> bytes) {
  if (bytes.size() < kEndSize) return std::nullopt;
  const std::size_t lowest = bytes.size() > kEndSize + 0xffff ? bytes.size() - kEndSize - 0xffff : 0;
  for (std::size_t at = bytes.size() - kEndSize + 1; at-- > lowest;) {
    if (load_le<std::uint32_t>(bytes.data() + at) == kEndOfCentralDirectory &&
        at + kEndSize + load_le<std::uint16_t>(bytes.data() + at + 20) == bytes.size())
      return at;
  }
  return std::nullopt;
}

std::string_view method_name(std::uint16_t method) {
  switch (method) {
    case 8: return "deflate";
    case 9: return "deflate64";
    case 12: return "bzip2";
    case 14: return "lzma";
    case 93: return "zstandard";
    case 95: return "xz";
    default: return "compressed";
  }
}

}  // namespace

std::uint32_t crc32(std::span<const std::byte> bytes) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xffffffffu;
  for (const std::byte b : bytes) crc = table[(crc ^ static_cast<std::uint32_t>(b)) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

bool ZipArchive::looks_like_zip(std::span<const std::byte> bytes) { return find_end_record(bytes).has_value(); }

ZipArchive::ZipArchive(std::span<const std::byte> bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
  const std::byte* base = bytes.data();
  const std::optional<std::size_t> end = find_end_record(bytes);
  KILN_CHECK(end.has_value(),
             "{}: not a zip archive: no end-of-central-directory record in its last bytes (the file is truncated or "
             "of another kind)",
             source_);
  const std::size_t at = *end;
  const auto disk = load_le<std::uint16_t>(base + at + 4);
  const auto directory_disk = load_le<std::uint16_t>(base + at + 6);
  std::uint64_t count = load_le<std::uint16_t>(base + at + 10);
  const auto count_on_disk = load_le<std::uint16_t>(base + at + 8);
  std::uint64_t directory_size = load_le<std::uint32_t>(base + at + 12);
  std::uint64_t directory_offset = load_le<std::uint32_t>(base + at + 16);
  std::size_t directory_end = at;  // where the central directory must end

  // ZIP64: a locator right before the end record points to a 64-bit end record.
  if (at >= kLocatorSize && load_le<std::uint32_t>(base + at - kLocatorSize) == kZip64Locator) {
    const std::size_t locator = at - kLocatorSize;
    const auto record = load_le<std::uint64_t>(base + locator + 8);
    KILN_CHECK(load_le<std::uint32_t>(base + locator + 4) == 0 && load_le<std::uint32_t>(base + locator + 16) <= 1,
               "{}: multi-disk zip archives are not supported", source_);
    KILN_CHECK(record <= locator && locator - record >= kZip64EndSize &&
                   load_le<std::uint32_t>(base + record) == kZip64EndOfCentralDirectory,
               "{}: the ZIP64 locator at byte {} points to byte {}, where there is no ZIP64 end-of-central-directory "
               "record",
               source_, locator, record);
    KILN_CHECK(load_le<std::uint32_t>(base + record + 16) == 0 && load_le<std::uint32_t>(base + record + 20) == 0,
               "{}: multi-disk zip archives are not supported", source_);
    count = load_le<std::uint64_t>(base + record + 32);
    KILN_CHECK(load_le<std::uint64_t>(base + record + 24) == count,
               "{}: multi-disk zip archives are not supported (the ZIP64 record counts entries on another disk)",
               source_);
    directory_size = load_le<std::uint64_t>(base + record + 40);
    directory_offset = load_le<std::uint64_t>(base + record + 48);
    directory_end = static_cast<std::size_t>(record);
  } else {
    KILN_CHECK(disk == 0 && directory_disk == 0 && count_on_disk == count,
               "{}: multi-disk zip archives are not supported", source_);
  }
  KILN_CHECK(directory_offset <= directory_end && directory_size == directory_end - directory_offset,
             "{}: the central directory is said to be bytes [{}, {}+{}), but it must end at byte {} where the end "
             "record starts",
             source_, directory_offset, directory_offset, directory_size, directory_end);
  // Each entry takes at least 46 bytes, which bounds the count before anything is reserved.
  KILN_CHECK(count <= directory_size / kCentralSize,
             "{}: the zip end record counts {} entries, more than its {}-byte central directory can hold", source_,
             count, directory_size);

  std::size_t pos = static_cast<std::size_t>(directory_offset);
  entries_.reserve(static_cast<std::size_t>(count));
  std::vector<std::uint64_t> local_offsets;  // of each entry's local header
  for (std::uint64_t i = 0; i < count; ++i) {
    KILN_CHECK(directory_end - pos >= kCentralSize && load_le<std::uint32_t>(base + pos) == kCentralHeader,
               "{}: zip central directory entry {} of {} at byte {} is missing or corrupt", source_, i, count, pos);
    ZipEntry entry;
    entry.flags = load_le<std::uint16_t>(base + pos + 8);
    entry.method = load_le<std::uint16_t>(base + pos + 10);
    entry.crc32 = load_le<std::uint32_t>(base + pos + 16);
    entry.stored_size = load_le<std::uint32_t>(base + pos + 20);
    entry.size = load_le<std::uint32_t>(base + pos + 24);
    const std::size_t name_size = load_le<std::uint16_t>(base + pos + 28);
    const std::size_t extra_size = load_le<std::uint16_t>(base + pos + 30);
    const std::size_t comment_size = load_le<std::uint16_t>(base + pos + 32);
    const auto start_disk = load_le<std::uint16_t>(base + pos + 34);
    std::uint64_t local_offset = load_le<std::uint32_t>(base + pos + 42);
    const std::size_t record_size = kCentralSize + name_size + extra_size + comment_size;
    KILN_CHECK(directory_end - pos >= record_size,
               "{}: zip central directory entry {} at byte {} runs past the end of the directory", source_, i, pos);
    entry.name = std::string(as_chars(bytes.subspan(pos + kCentralSize, name_size)));

    // ZIP64 extra field: 64-bit values for exactly the fields that hold 0xffffffff, in
    // the order size, stored size, local header offset, start disk.
    const bool need_size = entry.size == 0xffffffffu;
    const bool need_stored = entry.stored_size == 0xffffffffu;
    const bool need_offset = local_offset == 0xffffffffu;
    const bool need_disk = start_disk == 0xffffu;
    if (need_size || need_stored || need_offset || need_disk) {
      std::size_t extra = pos + kCentralSize + name_size;
      const std::size_t extra_end = extra + extra_size;
      bool found = false;
      while (extra_end - extra >= 4) {
        const auto id = load_le<std::uint16_t>(base + extra);
        const std::size_t data_size = load_le<std::uint16_t>(base + extra + 2);
        KILN_CHECK(extra_end - extra - 4 >= data_size, "{}: zip entry '{}' has a corrupt extra field", source_,
                   entry.name);
        if (id == kZip64Extra) {
          std::size_t field = extra + 4;
          const std::size_t needed = 8 * (need_size + need_stored + need_offset) + 4 * need_disk;
          KILN_CHECK(data_size >= needed, "{}: zip entry '{}' has a ZIP64 extra field of {} bytes; it needs {}",
                     source_, entry.name, data_size, needed);
          auto next = [&] {
            const auto value = load_le<std::uint64_t>(base + field);
            field += 8;
            return value;
          };
          if (need_size) entry.size = next();
          if (need_stored) entry.stored_size = next();
          if (need_offset) local_offset = next();
          KILN_CHECK(!need_disk || load_le<std::uint32_t>(base + field) == 0,
                     "{}: multi-disk zip archives are not supported", source_);
          found = true;
          break;
        }
        extra += 4 + data_size;
      }
      KILN_CHECK(found, "{}: zip entry '{}' needs a ZIP64 extra field and has none", source_, entry.name);
    } else {
      KILN_CHECK(start_disk == 0, "{}: multi-disk zip archives are not supported", source_);
    }

    // The local header repeats the name; the data follow it and its own extra field.
    KILN_CHECK(local_offset <= directory_offset && directory_offset - local_offset >= kLocalSize &&
                   load_le<std::uint32_t>(base + local_offset) == kLocalHeader,
               "{}: zip entry '{}': no local file header at byte {}", source_, entry.name, local_offset);
    const std::size_t local_name_size = load_le<std::uint16_t>(base + local_offset + 26);
    const std::size_t local_extra_size = load_le<std::uint16_t>(base + local_offset + 28);
    const std::uint64_t data_offset = local_offset + kLocalSize + local_name_size + local_extra_size;
    KILN_CHECK(data_offset <= directory_offset &&
                   as_chars(bytes.subspan(local_offset + kLocalSize, local_name_size)) == entry.name,
               "{}: zip entry '{}': its local file header at byte {} does not match the central directory", source_,
               entry.name, local_offset);
    KILN_CHECK(entry.stored_size <= directory_offset - data_offset,
               "{}: zip entry '{}': its {} bytes at byte {} run past the start of the central directory (byte {})",
               source_, entry.name, entry.stored_size, data_offset, directory_offset);
    entry.data_offset = data_offset;
    local_offsets.push_back(local_offset);
    const auto [it, inserted] = index_.try_emplace(entry.name, entries_.size());
    KILN_CHECK(inserted, "{}: the zip archive has two entries named '{}'", source_, entry.name);
    entries_.push_back(std::move(entry));
    pos += record_size;
  }
  KILN_CHECK(pos == directory_end, "{}: the zip central directory has {} bytes after its {} entries", source_,
             directory_end - pos, count);
  // No two entries may share bytes: entries over one region would have their CRC checked
  // again and again (1400 entries over 10 MB took 74 s), a zip bomb's trick. A writer such
  // as torch.save lays each entry's header and data after the previous one's.
  std::vector<std::pair<std::uint64_t, std::size_t>> by_offset;  // (local header offset, entry)
  for (std::size_t i = 0; i < entries_.size(); ++i) by_offset.emplace_back(local_offsets[i], i);
  std::sort(by_offset.begin(), by_offset.end());
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const ZipEntry& before = entries_[by_offset[i - 1].second];
    const ZipEntry& after = entries_[by_offset[i].second];
    KILN_CHECK(before.data_offset + before.stored_size <= by_offset[i].first,
               "{}: zip entries '{}' (bytes [{}, {})) and '{}' (from byte {}) overlap; Kiln refuses overlapping "
               "entries",
               source_, before.name, by_offset[i - 1].first, before.data_offset + before.stored_size, after.name,
               by_offset[i].first);
  }
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> ZipArchive::read(const ZipEntry& entry) const {
  KILN_CHECK((entry.flags & 1u) == 0, "{}: zip entry '{}' is encrypted, which Kiln does not read", source_, entry.name);
  KILN_CHECK(entry.method == 0,
             "{}: zip entry '{}' is compressed ({}, method {}); Kiln reads only stored (uncompressed) entries, as "
             "torch.save writes them",
             source_, entry.name, method_name(entry.method), entry.method);
  KILN_CHECK(entry.size == entry.stored_size,
             "{}: zip entry '{}' is stored uncompressed but its sizes differ ({} and {} bytes)", source_, entry.name,
             entry.size, entry.stored_size);
  const auto data = bytes_.subspan(static_cast<std::size_t>(entry.data_offset), static_cast<std::size_t>(entry.size));
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // fuzzers skip it: mutations would never pass it
  const std::uint32_t actual = crc32(data);
  KILN_CHECK(actual == entry.crc32, "{}: zip entry '{}' (bytes [{}, {})) is corrupt: CRC-32 {}, expected {}",
             source_, entry.name, entry.data_offset, entry.data_offset + entry.size, fmt::format("{:08x}", actual),
             fmt::format("{:08x}", entry.crc32));
#endif
  return data;
}

}  // namespace kiln::store::detail
