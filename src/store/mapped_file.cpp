#include "mapped_file.hpp"

#include "../common/regular_file.hpp"
#include "kiln/core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::store::detail {

MappedFile::MappedFile(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO that no one writes to returns at once (and is refused
  // below) instead of waiting forever for a writer; regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KILN_CHECK(fd >= 0, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct Descriptor {  // closed on every way out; a mapping keeps the file open by itself
    int fd;
    ~Descriptor() { ::close(fd); }
  } file{fd};
  size_ = kiln::detail::regular_file_size(
      file.fd, path.string(),
      "weights are read from regular files only (they are mapped into memory), so copy the data into a file first");
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
    KILN_CHECK(mapped != MAP_FAILED, "{}: cannot map {} bytes into memory: {}", path.string(), size_,
               std::strerror(errno));
    data_ = static_cast<const std::byte*>(mapped);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace kiln::store::detail
