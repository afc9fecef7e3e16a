#include "atomic_file.hpp"

#include "kiln/core/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace kiln::store::detail {
namespace {

// Small writes are gathered into one buffer of this size; larger ones go straight through.
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// A name no other writer (thread or process) picks at the same time: pid, a per-process
// counter and the clock; O_EXCL catches the rest.
std::filesystem::path temporary_name(const std::filesystem::path& target, int attempt) {
  static std::atomic<unsigned> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::string name = fmt::format(".{}.tmp-{}-{}-{:x}", target.filename().string(), ::getpid(),
                                       counter.fetch_add(1), static_cast<unsigned long long>(ticks) + attempt);
  return target.parent_path() / name;
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target, std::string what)
    : target_(std::move(target)), what_(std::move(what)) {
  KILN_CHECK(!target_.filename().empty(), "{}: '{}' does not name a file", what_, target_.string());
  if (target_.parent_path().empty()) target_ = std::filesystem::path(".") / target_;
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temporary_ = temporary_name(target_, attempt);
    // 0666 minus the umask: the permissions a plain new file would get.
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int error = errno;
    KILN_FAIL("{}: cannot write {}: creating a temporary file in its directory failed: {}", what_, target_.string(),
              std::strerror(error));
  }
  buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFile::fail(const std::string& step, int error) {
  ::close(fd_);
  ::unlink(temporary_.c_str());
  fd_ = -1;
  KILN_FAIL("{}: cannot write {}: {} failed: {}; the file was left as it was", what_, target_.string(), step,
            std::strerror(error));
}

void AtomicFile::flush_buffer() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t written = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(fmt::format("writing the temporary file {}", temporary_.string()), errno);
    }
    done += static_cast<std::size_t>(written);
  }
  buffer_.clear();
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  KILN_CHECK(fd_ >= 0, "{}: {} was already committed or failed", what_, target_.string());
  while (!bytes.empty()) {
    const std::size_t take = std::min(bytes.size(), kBufferBytes - buffer_.size());
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
    bytes = bytes.subspan(take);
    if (buffer_.size() == kBufferBytes) flush_buffer();
  }
}

void AtomicFile::commit() {
  KILN_CHECK(fd_ >= 0, "{}: {} was already committed or failed", what_, target_.string());
  flush_buffer();
  if (::fsync(fd_) != 0) fail("flushing the temporary file to disk (fsync)", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    const int error = errno;
    ::unlink(temporary_.c_str());
    KILN_FAIL("{}: cannot write {}: closing the temporary file failed: {}; the file was left as it was", what_,
              target_.string(), std::strerror(error));
  }
  fd_ = -1;
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary_.c_str());
    KILN_FAIL("{}: cannot write {}: renaming the temporary file over it failed: {}; the file was left as it was", what_,
              target_.string(), std::strerror(error));
  }
  // The rename itself is durable only once the directory is flushed too.
  const int directory = ::open(target_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
}

}  // namespace kiln::store::detail
