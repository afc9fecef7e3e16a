// A file mapped read-only into memory (mmap), so that parsers see it as bytes and only
// the pages they touch are read from disk.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace kiln::store::detail {

class MappedFile {
 public:
  // Maps the whole file; throws kiln::Error naming the path when it cannot be opened or
  // is not a regular file (a FIFO is refused at once, never waited on). An empty file
  // maps to no bytes.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kiln::store::detail
