// kiln/onnx/graph.hpp's entry points: they map a file and hand its bytes to the message
// parsers of proto.cpp.
#include "kiln/onnx/graph.hpp"

#include "../common/mapped_file.hpp"
#include "proto.hpp"

#include <array>
#include <cerrno>
#include <cstring>

namespace kiln::onnx {

// ---- entry points

namespace {

// ONNX files are mapped (src/common/mapped_file.hpp), so that a large model is not copied
// before its tensors are.
kiln::detail::MappedFile mapped(const std::filesystem::path& path) {
  return {path, "onnx: " + path.string(), "ONNX files are read from regular files only"};
}

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
  const kiln::detail::MappedFile file = mapped(path);
  return parse_model(file.bytes(), path.string(), options_beside(path));
}

TensorValue parse_tensor(std::span<const std::byte> bytes, std::string_view what, const ParseOptions& options) {
  return detail::read_tensor(bytes, outermost(bytes, what, options, "TensorProto"));
}

TensorValue load_tensor(const std::filesystem::path& path) {
  const kiln::detail::MappedFile file = mapped(path);
  return parse_tensor(file.bytes(), path.string(), options_beside(path));
}

DataValue parse_value(std::span<const std::byte> bytes, ValueInfo::Kind kind, std::string_view what) {
  const ParseOptions options;
  const std::string_view label = kind == ValueInfo::Kind::sequence   ? "SequenceProto"
                                 : kind == ValueInfo::Kind::optional ? "OptionalProto"
                                                                     : "TensorProto";
  return detail::read_value(bytes, kind, outermost(bytes, what, options, std::string(label)));
}

DataValue load_value(const std::filesystem::path& path, ValueInfo::Kind kind) {
  const kiln::detail::MappedFile file = mapped(path);
  return parse_value(file.bytes(), kind, path.string());
}

}  // namespace kiln::onnx
