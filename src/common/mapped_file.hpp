// A file mapped read-only into memory (mmap), so that parsers see it as bytes and only the
// pages they touch are read from disk: the weights readers of libkiln_store and the ONNX
// reader of libkiln_onnx. Private to src/.
#pragma once

#include "regular_file.hpp"

#include "kiln/core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace kiln::detail {

class MappedFile {
 public:
  // Maps the whole file; throws kiln::Error when it cannot be opened or is not a regular
  // file (a FIFO is refused at once, never waited on): "<what>: cannot open: ...", or
  // "<what>: is a FIFO ..., not a regular file; <advice>". An empty file maps to no bytes.
  MappedFile(const std::filesystem::path& path, const std::string& what, std::string_view advice) {
    // O_NONBLOCK: opening a FIFO that no one writes to returns at once (and is refused
    // below) instead of waiting forever for a writer; regular files ignore the flag.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    KILN_CHECK(fd >= 0, "{}: cannot open: {}", what, std::strerror(errno));
    struct Descriptor {  // closed on every way out; a mapping keeps the file open by itself
      int fd;
      ~Descriptor() { ::close(fd); }
    } file{fd};
    size_ = regular_file_size(file.fd, what, advice);
    if (size_ == 0) return;
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
    KILN_CHECK(mapped != MAP_FAILED, "{}: cannot map {} bytes into memory: {}", what, size_, std::strerror(errno));
    data_ = static_cast<const std::byte*>(mapped);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kiln::detail
