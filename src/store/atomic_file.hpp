// AtomicFile: writes a file so that readers see either its old content or the complete
// new one. Bytes go to a temporary file in the target's directory; commit() flushes it to
// disk, renames it over the target and flushes the directory. Destroying an uncommitted
// AtomicFile (an error on the way) removes the temporary file and leaves the target alone.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace kiln::store::detail {

class AtomicFile {
 public:
  // `what` names the caller in error messages ("save_safetensors").
  AtomicFile(std::filesystem::path target, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void commit();

 private:
  void flush_buffer();
  [[noreturn]] void fail(const std::string& step, int error);

  std::filesystem::path target_;
  std::filesystem::path temporary_;
  std::string what_;
  int fd_ = -1;
  std::vector<std::byte> buffer_;
};

}  // namespace kiln::store::detail
