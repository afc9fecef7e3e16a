// kiln/onnx/graph.hpp's entry points: they map a file and hand its bytes to the message
// parsers of proto.cpp.
#include "kiln/onnx/graph.hpp"

#include "../common/regular_file.hpp"
#include "proto.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace kiln::onnx {

// ---- entry points

namespace {

// A file mapped read-only, so that a large model is not copied before its tensors are.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    // O_NONBLOCK: a FIFO is refused at once by regular_file_size, never waited on.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    KILN_CHECK(fd >= 0, "onnx: {}: cannot open: {}", path.string(), std::strerror(errno));
    struct Descriptor {  // closed on every way out; the mapping keeps the file open by itself
      int fd;
      ~Descriptor() { ::close(fd); }
    } file{fd};
    size_ =
        kiln::detail::regular_file_size(fd, "onnx: " + path.string(), "ONNX files are read from regular files only");
    if (size_ == 0) return;
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    KILN_CHECK(mapped != MAP_FAILED, "onnx: {}: cannot map {} bytes into memory: {}", path.string(), size_,
               std::strerror(errno));
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

// External data lies beside the file; "model.onnx" has the folder ".", not "".
ParseOptions options_beside(const std::filesystem::path& path) {
  const std::filesystem::path folder = path.parent_path();
  return ParseOptions{.external_data_dir = folder.empty() ? std::filesystem::path(".") : folder};
}

detail::Scope outermost(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options,
                        std::string label) {
  return detail::Scope{what, bytes.data(), &options, nullptr, 0, std::move(label)};
}

}  // namespace

ModelFile parse_model(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options) {
  return detail::read_model(bytes, outermost(bytes, what, options, "ModelProto"));
}

ModelFile load_model(const std::filesystem::path& path) {
  const MappedFile file(path);
  return parse_model(file.bytes(), path.string(), options_beside(path));
}

TensorValue parse_tensor(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options) {
  return detail::read_tensor(bytes, outermost(bytes, what, options, "TensorProto"));
}

TensorValue load_tensor(const std::filesystem::path& path) {
  const MappedFile file(path);
  return parse_tensor(file.bytes(), path.string(), options_beside(path));
}

}  // namespace kiln::onnx
