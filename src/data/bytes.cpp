#include "bytes.hpp"

#include "../common/regular_file.hpp"
#include "kiln/core/error.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

namespace kiln::data::detail {

namespace {

// Closes a file descriptor whatever happens.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::vector<std::uint8_t> read_file(std::string_view reader, const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO that no one writes to returns at once instead of waiting
  // for a writer; it changes nothing for the regular files read below.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) {
    const int error = errno;
    KILN_CHECK(error != ENOENT, "{}: {}: no such file", reader, path.string());
    KILN_FAIL("{}: {}: cannot open: {}", reader, path.string(), std::strerror(error));
  }
  const std::size_t size = kiln::detail::regular_file_size(
      file.fd, fmt::format("{}: {}", reader, path.string()),
      "readers take regular files only (their size is known before reading), so copy the data into a file first");
  std::vector<std::uint8_t> bytes(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(file.fd, bytes.data() + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    KILN_CHECK(got >= 0, "{}: {}: cannot read byte {} of its {}: {}", reader, path.string(), done, size,
               std::strerror(errno));
    KILN_CHECK(got > 0, "{}: {}: read {} of its {} bytes (the file shrank while being read)", reader, path.string(),
               done, size);
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

std::size_t gunzip_budget(std::size_t compressed) {
  return std::max(gunzip_floor, compressed > SIZE_MAX / gunzip_ratio ? SIZE_MAX - 1 : compressed * gunzip_ratio);
}

bool is_gzip(std::span<const std::uint8_t> bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

namespace {

// Ends a z_stream whatever happens.
struct Inflater {
  z_stream stream{};
  bool open = false;
  ~Inflater() {
    if (open) inflateEnd(&stream);
  }
};

}  // namespace

std::vector<std::uint8_t> gunzip(std::string_view reader, std::string_view name, std::span<const std::uint8_t> bytes,
                                 std::size_t limit) {
  KILN_CHECK(is_gzip(bytes), "{}: {}: not gzip data (it does not start with the bytes 1f 8b)", reader, name);
  Inflater inflater;
  z_stream& z = inflater.stream;
  // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer), not a zlib one.
  KILN_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, "{}: {}: cannot start zlib: {}", reader, name,
             z.msg ? z.msg : "out of memory");
  inflater.open = true;

  // A file without a size in its header (CSV, CIFAR) is inflated as far as the budget; one
  // whose header gives its size (IDX) passes that size plus one as `limit`.
  const std::size_t budget = gunzip_budget(bytes.size());
  const std::size_t cap = std::min(limit, budget + 1);
  std::vector<std::uint8_t> out;
  // The trailer's ISIZE is the last member's size mod 2^32: a first guess, within the cap.
  std::size_t guess = bytes.size() * 4;
  if (bytes.size() >= 18) {
    const std::uint8_t* end = bytes.data() + bytes.size();
    guess = std::max<std::size_t>(guess, std::uint32_t{end[-4]} | (std::uint32_t{end[-3]} << 8) |
                                             (std::uint32_t{end[-2]} << 16) | (std::uint32_t{end[-1]} << 24));
  }
  guess = std::min(std::max<std::size_t>(guess, 4096), cap);
  out.resize(guess);

  std::size_t in_at = 0, out_at = 0;
  constexpr std::size_t chunk = std::numeric_limits<uInt>::max() / 2;  // avail_in/out are 32-bit
  for (;;) {
    if (out_at == out.size()) {
      if (out_at >= limit) break;  // the caller needs no more: what follows is left unread
      KILN_CHECK(out_at < cap,
                 "{}: {}: the gzip stream inflates to more than {} bytes, {} times its {} compressed bytes: refused "
                 "as a likely decompression bomb (a gzip file may inflate to {} times its size, or {} bytes if that "
                 "is more); to read it, gunzip it first: plain files have no such limit",
                 reader, name, budget, gunzip_ratio, bytes.size(), gunzip_ratio, gunzip_floor);
      out.resize(std::min(std::max<std::size_t>(out.size() * 2, 4096), cap));
    }
    z.next_in = const_cast<Bytef*>(bytes.data() + in_at);
    z.avail_in = static_cast<uInt>(std::min(chunk, bytes.size() - in_at));
    z.next_out = out.data() + out_at;
    z.avail_out = static_cast<uInt>(std::min(chunk, out.size() - out_at));
    const uInt in_before = z.avail_in, out_before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    in_at += in_before - z.avail_in;
    out_at += out_before - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_at == bytes.size()) break;
      // Another gzip member may follow (as `cat a.gz b.gz` makes); anything else is garbage.
      KILN_CHECK(is_gzip(bytes.subspan(in_at)),
                 "{}: {}: {} bytes follow the end of the gzip stream at compressed byte {} (first byte 0x{}): "
                 "the file is corrupt",
                 reader, name, bytes.size() - in_at, in_at, fmt::format("{:02x}", bytes[in_at]));
      KILN_CHECK(inflateReset(&z) == Z_OK, "{}: {}: cannot restart zlib", reader, name);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT)
      KILN_FAIL("{}: {}: corrupt gzip data near compressed byte {} of {}: {}", reader, name, in_at, bytes.size(),
                z.msg ? z.msg : "invalid data");
    KILN_CHECK(rc != Z_MEM_ERROR, "{}: {}: out of memory while decompressing", reader, name);
    KILN_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, "{}: {}: zlib failed ({}) near compressed byte {}", reader, name, rc,
               in_at);
    if (in_at == bytes.size() && z.avail_out > 0)
      KILN_FAIL(
          "{}: {}: the gzip stream is truncated: it ends after {} compressed bytes ({} bytes decompressed) "
          "without its end marker and checksum",
          reader, name, bytes.size(), out_at);
  }
  out.resize(out_at);
  return out;
}

std::vector<std::uint8_t> read_maybe_gzip(std::string_view reader, const std::filesystem::path& path,
                                          std::string& name) {
  std::vector<std::uint8_t> bytes = read_file(reader, path);
  name = path.string();
  if (!is_gzip(bytes)) return bytes;
  bytes = gunzip(reader, name, bytes);
  name += " (gunzipped)";
  return bytes;
}

}  // namespace kiln::data::detail
