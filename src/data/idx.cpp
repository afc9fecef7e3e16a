#include "kiln/data/idx.hpp"

#include "bytes.hpp"
#include "kiln/core/error.hpp"

#include <array>
#include <cstring>
#include <string>

namespace kiln::data {

namespace {

struct IdxType {
  std::uint8_t code;
  const char* name;
  std::size_t size;  // bytes per element in the file
  DType dtype;       // what it becomes
};
constexpr std::array<IdxType, 6> idx_types{{{0x08, "ubyte", 1, DType::u8},
                                            {0x09, "byte", 1, DType::i32},
                                            {0x0B, "short", 2, DType::i32},
                                            {0x0C, "int", 4, DType::i32},
                                            {0x0D, "float", 4, DType::f32},
                                            {0x0E, "double", 8, DType::f64}}};

// Big-endian element k of the data section, converted to what T stores.
template <class T> void decode(const std::uint8_t* data, std::uint8_t code, std::size_t count, T* out) {
  for (std::size_t k = 0; k < count; ++k) {
    if (code == 0x09) {
      out[k] = static_cast<T>(static_cast<std::int8_t>(data[k]));
    } else if (code == 0x0B) {
      out[k] = static_cast<T>(static_cast<std::int16_t>((data[2 * k] << 8) | data[2 * k + 1]));
    } else if (code == 0x0C) {
      out[k] = static_cast<T>(static_cast<std::int32_t>(detail::read_be32(data + 4 * k)));
    } else if (code == 0x0D) {
      const std::uint32_t bits = detail::read_be32(data + 4 * k);
      float value;
      std::memcpy(&value, &bits, 4);
      out[k] = static_cast<T>(value);
    } else if (code == 0x0E) {
      const std::uint64_t bits =
          (std::uint64_t{detail::read_be32(data + 8 * k)} << 32) | detail::read_be32(data + 8 * k + 4);
      double value;
      std::memcpy(&value, &bits, 8);
      out[k] = static_cast<T>(value);
    }
  }
}

constexpr std::string_view reader = "read_idx";

// What an IDX header says: the type, the dims, and where the data ends.
struct IdxHeader {
  const IdxType* type = nullptr;
  Shape shape;
  std::uint64_t count = 0;       // elements
  std::size_t header_bytes = 0;  // the magic number and the dims
  std::uint64_t data_bytes = 0;  // count × the type's size
};

// The largest header: the magic number and 255 dims.
constexpr std::size_t max_header_bytes = 4 + 4 * 255;
// The most elements a file may describe: 2^48 of them (2 PiB of doubles) is more than any
// file holds and small enough that shapes, strides and byte counts cannot overflow.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 48;

IdxHeader parse_idx_header(std::span<const std::uint8_t> bytes, std::string_view name) {
  KILN_CHECK(bytes.size() >= 4, "{}: {}: {} bytes are too few for the 4-byte IDX magic number", reader, name,
             bytes.size());
  KILN_CHECK(bytes[0] == 0 && bytes[1] == 0,
             "{}: {}: bad magic number {} (bytes 0-3): an IDX file starts with two zero "
             "bytes, a type code and the number of dims",
             reader, name, fmt::format("{:02x} {:02x} {:02x} {:02x}", bytes[0], bytes[1], bytes[2], bytes[3]));
  IdxHeader out;
  for (const IdxType& t : idx_types)
    if (t.code == bytes[2]) out.type = &t;
  KILN_CHECK(out.type != nullptr,
             "{}: {}: unknown type code 0x{} (byte 2); IDX types are 0x08 ubyte, 0x09 byte, 0x0B short, 0x0C "
             "int, 0x0D float, 0x0E double",
             reader, name, fmt::format("{:02x}", bytes[2]));
  const std::size_t rank = bytes[3];
  KILN_CHECK(rank > 0, "{}: {}: the number of dims (byte 3) is 0", reader, name);
  out.header_bytes = 4 + 4 * rank;
  KILN_CHECK(bytes.size() >= out.header_bytes,
             "{}: {}: truncated header: {} dims need {} header bytes, the file has {}", reader, name, rank,
             out.header_bytes, bytes.size());
  std::vector<std::int64_t> dims(rank);
  // The product of the nonzero dims bounds every partial product (a shape's strides, its
  // numel), so a zero dim cannot let huge others through: [0, 2^32-1, 2^32-1] is refused.
  std::uint64_t nonzero_product = 1, count = 1;
  bool overflow = false;
  for (std::size_t d = 0; d < rank; ++d) {
    const std::uint64_t dim = detail::read_be32(bytes.data() + 4 + 4 * d);
    dims[d] = static_cast<std::int64_t>(dim);
    count *= dim;  // unsigned, and only used when the check below passes, so it cannot have wrapped
    if (dim == 0) continue;
    if (nonzero_product > max_elements / dim) overflow = true;
    if (!overflow) nonzero_product *= dim;
  }
  out.shape = Shape(dims);
  KILN_CHECK(!overflow,
             "{}: {}: dims {} (bytes 4-{}) are too large: their nonzero dims multiply to more than 2^48, more "
             "elements than any file holds",
             reader, name, out.shape, out.header_bytes - 1);
  out.count = count;
  out.data_bytes = count * out.type->size;
  return out;
}

// The tensor of a whole IDX file. `more_follow`: gunzipping stopped at `bytes.size()`,
// with more of the stream left.
TensorData parse_idx_bytes(std::span<const std::uint8_t> bytes, std::string_view name, bool more_follow = false) {
  const IdxHeader parsed = parse_idx_header(bytes, name);
  const IdxType* type = parsed.type;
  const Shape& shape = parsed.shape;
  const std::size_t header = parsed.header_bytes;
  const std::uint64_t data_bytes = parsed.data_bytes;
  const std::uint64_t have = bytes.size() - header;
  KILN_CHECK(have >= data_bytes,
             "{}: {}: truncated: dims {} of {} need {} data bytes after the {}-byte header, but only {} follow ({} "
             "missing)",
             reader, name, shape, type->name, data_bytes, header, have, data_bytes - have);
  KILN_CHECK(!more_follow,
             "{}: {}: unexpected bytes after the data: dims {} of {} end at byte {}, but the gzip stream holds more "
             "(decompression stopped at byte {})",
             reader, name, shape, type->name, header + data_bytes, bytes.size());
  KILN_CHECK(have == data_bytes,
             "{}: {}: {} unexpected bytes after the data (dims {} of {} end at byte {}, the file has {} bytes)", reader,
             name, have - data_bytes, shape, type->name, header + data_bytes, bytes.size());

  const std::uint8_t* data = bytes.data() + header;
  const auto n = static_cast<std::size_t>(parsed.count);
  std::vector<std::byte> out(n * dtype_size(type->dtype));
  switch (type->dtype) {
    case DType::u8:
      if (n > 0) std::memcpy(out.data(), data, n);
      break;
    case DType::i32:
      decode(data, type->code, n, reinterpret_cast<std::int32_t*>(out.data()));
      break;
    case DType::f32:
      decode(data, type->code, n, reinterpret_cast<float*>(out.data()));
      break;
    case DType::f64:
      decode(data, type->code, n, reinterpret_cast<double*>(out.data()));
      break;
    default:
      break;
  }
  return TensorData(std::move(out), shape, type->dtype);
}

const std::vector<std::string> fashion_mnist_classes{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// dir/stem, or dir/stem.gz when only that exists; empty when neither does.
std::filesystem::path find_file(const std::filesystem::path& directory, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    const std::filesystem::path path = directory / name;
    std::error_code ignored;
    if (std::filesystem::is_regular_file(path, ignored)) return path;
  }
  return {};
}

// The images and labels files of a split, or an error saying what is missing and `hint`.
std::pair<std::filesystem::path, std::filesystem::path> mnist_files(std::string_view reader,
                                                                    const std::filesystem::path& directory, Split split,
                                                                    std::string_view hint) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string images_stem = prefix + "-images-idx3-ubyte", labels_stem = prefix + "-labels-idx1-ubyte";
  std::filesystem::path images = find_file(directory, images_stem), labels = find_file(directory, labels_stem);
  for (const auto& [path, stem] : {std::pair{images, images_stem}, std::pair{labels, labels_stem}})
    KILN_CHECK(!path.empty(), "{}: {} has no {} (nor {}.gz){}", reader, (directory / "").string(), stem, stem, hint);
  return {images, labels};
}

}  // namespace

namespace {

// A gzip-compressed IDX file, inflated no further than its header says it reaches: first
// the header, then the data and one byte more (to see that nothing follows), so that a
// small file cannot inflate to gigabytes before its size is checked.
TensorData parse_idx_gzip(std::span<const std::uint8_t> compressed, std::string_view name) {
  const std::string plain_name = std::string(name) + " (gunzipped)";
  const std::vector<std::uint8_t> head = detail::gunzip(reader, name, compressed, max_header_bytes);
  const IdxHeader header = parse_idx_header(head, plain_name);
  const std::uint64_t size = header.header_bytes + header.data_bytes;
  const std::vector<std::uint8_t> plain = detail::gunzip(reader, name, compressed, size + 1);
  return parse_idx_bytes(plain, plain_name, plain.size() > size);
}

}  // namespace

TensorData parse_idx(std::span<const std::uint8_t> bytes, std::string_view name) {
  if (!detail::is_gzip(bytes)) return parse_idx_bytes(bytes, name);
  return parse_idx_gzip(bytes, name);
}

TensorData read_idx(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = detail::read_file(reader, path);
  return parse_idx(bytes, path.string());
}

namespace {

// read_mnist with the classes named by `names`.
ImageSet read_mnist_named(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                          std::vector<std::string> names) {
  constexpr std::string_view reader = "read_mnist";
  const std::size_t classes = names.size();
  TensorData images = read_idx(images_path);
  const TensorData labels = read_idx(labels_path);
  KILN_CHECK(images.dtype() == DType::u8 && images.shape().rank() == 3,
             "{}: {}: images must be a ubyte IDX file of 3 dims [N, rows, cols], this one holds {} of dims {}", reader,
             images_path.string(), images.dtype(), images.shape());
  KILN_CHECK(labels.dtype() == DType::u8 && labels.shape().rank() == 1,
             "{}: {}: labels must be a ubyte IDX file of 1 dim [N], this one holds {} of dims {}", reader,
             labels_path.string(), labels.dtype(), labels.shape());
  KILN_CHECK(images.shape()[0] == labels.shape()[0], "{}: {} holds {} images but {} holds {} labels", reader,
             images_path.string(), images.shape()[0], labels_path.string(), labels.shape()[0]);
  const auto raw = labels.as<std::uint8_t>();
  std::vector<std::int64_t> values(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    KILN_CHECK(raw[i] < classes, "{}: {}: label {} of item {} (file byte {}) is outside 0..{}", reader,
               labels_path.string(), raw[i], i, 8 + i, classes - 1);
    values[i] = raw[i];
  }
  return ImageSet(std::move(images), std::move(values), std::move(names));
}

}  // namespace

ImageSet read_mnist(const std::filesystem::path& images, const std::filesystem::path& labels, std::size_t classes) {
  KILN_CHECK(classes > 0 && classes <= 256, "read_mnist: {} classes; ubyte labels allow 1 to 256", classes);
  std::vector<std::string> names;
  for (std::size_t c = 0; c < classes; ++c) names.push_back(std::to_string(c));
  return read_mnist_named(images, labels, std::move(names));
}

ImageSet mnist(Split split, const std::filesystem::path& directory) {
  const auto [images, labels] = mnist_files("mnist", directory, split, "");
  return read_mnist(images, labels);
}

ImageSet fashion_mnist(Split split, const std::filesystem::path& directory) {
  const auto [images, labels] =
      mnist_files("fashion_mnist", directory, split,
                  fmt::format(": install Debian's dataset-fashion-mnist package (apt-get install "
                              "dataset-fashion-mnist), which puts the files in {}, or pass the directory that holds "
                              "them",
                              fashion_mnist_directory));
  return read_mnist_named(images, labels, fashion_mnist_classes);
}

}  // namespace kiln::data
