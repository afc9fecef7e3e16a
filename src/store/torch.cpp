// PyTorch checkpoints (torch.save's zip format): the archive layout, the allow-list of
// what the pickle may construct, and the materialization of tensor views into
// contiguous TensorData.
#include "kiln/store/torch.hpp"

#include "bytes.hpp"
#include "../common/mapped_file.hpp"
#include "pickle.hpp"
#include "zip.hpp"

#include "kiln/core/error.hpp"

#include <fmt/ranges.h>

#include <array>
#include <new>
#include <cstring>
#include <map>

namespace kiln::store {
namespace {

namespace pk = detail::pickle;
using detail::checked_add;
using detail::checked_mul;

// Materialized tensors may total at most this many times the checkpoint's size, plus
// kExpansionAllowance. Views can repeat their storage's elements (an expanded tensor has
// stride 0) and one tensor can stand under several names (tied weights), but a small
// hostile file must not be able to ask for terabytes.
constexpr std::uint64_t kExpansionFactor = 16;
constexpr std::uint64_t kExpansionAllowance = std::uint64_t{32} << 20;
// Nested dicts are flattened up to this depth.
constexpr int kMaxDictDepth = 32;
// Tensors of more dims than this are refused, so that a hostile size tuple shared by
// many tensors cannot cost time in each of them.
constexpr std::size_t kMaxRank = 64;

// torch.<Name>Storage, the storage types a tensor's persistent id names.
struct StorageType {
  std::string_view name;
  std::optional<DType> dtype;  // nullopt: a real PyTorch type Kiln has no dtype for
  std::string_view torch_dtype;
};
constexpr std::array<StorageType, 17> kStorageTypes{{
    {"FloatStorage", DType::f32, "float32"},
    {"DoubleStorage", DType::f64, "float64"},
    {"HalfStorage", DType::f16, "float16"},
    {"BFloat16Storage", DType::bf16, "bfloat16"},
    {"IntStorage", DType::i32, "int32"},
    {"LongStorage", DType::i64, "int64"},
    {"ByteStorage", DType::u8, "uint8"},
    {"BoolStorage", DType::boolean, "bool"},
    {"CharStorage", std::nullopt, "int8"},
    {"ShortStorage", std::nullopt, "int16"},
    {"ComplexFloatStorage", std::nullopt, "complex64"},
    {"ComplexDoubleStorage", std::nullopt, "complex128"},
    {"QInt8Storage", std::nullopt, "qint8"},
    {"QUInt8Storage", std::nullopt, "quint8"},
    {"QInt32Storage", std::nullopt, "qint32"},
    {"QUInt4x2Storage", std::nullopt, "quint4x2"},
    {"UntypedStorage", std::nullopt, "untyped bytes"},
}};

const StorageType* storage_type(const pk::Global& global) {
  if (global.module != "torch") return nullptr;
  for (const StorageType& type : kStorageTypes)
    if (type.name == global.name) return &type;
  return nullptr;
}

enum ObjectTag : std::int64_t { kStorage = 1, kTensor = 2 };

struct Storage {
  std::string key;
  DType dtype;
  std::uint64_t numel;
  const detail::ZipEntry* entry;
};

struct TensorView {
  std::size_t storage;
  std::int64_t offset;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
};

// What the pickle of a state dict may construct, and nothing else.
class TorchEnvironment final : public pk::Environment {
 public:
  TorchEnvironment(const detail::ZipArchive& zip, std::string prefix) : zip_(zip), prefix_(std::move(prefix)) {}

  void check_global(const pk::Global& global) override {
    if (const StorageType* type = storage_type(global)) {
      KILN_CHECK(type->dtype.has_value(),
                 "pickle global {}: {} tensors are not supported (Kiln's dtypes are f32, f64, f16, bf16, i32, i64, u8 "
                 "and bool)",
                 global.qualified(), type->torch_dtype);
      return;
    }
    const std::string name = global.qualified();
    KILN_CHECK(name == "collections.OrderedDict" || name == "torch._utils._rebuild_tensor_v2" ||
                   name == "torch._utils._rebuild_parameter" || name == "torch.Size",
               "pickle global {} is not allowed: Kiln's unpickler constructs only collections.OrderedDict, "
               "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, torch.Size and tensor storages, "
               "and never imports or runs anything else",
               pk::printable(name));
  }

  pk::Value call(pk::Heap& heap, const pk::Global& callable, pk::Value args) override {
    // Nothing below adds to heap.sequences, so the reference stays valid.
    const std::vector<pk::Value>& arguments = heap.items(args);
    const std::string name = callable.qualified();
    if (name == "collections.OrderedDict") {
      KILN_CHECK(arguments.empty(), "collections.OrderedDict is called with {} arguments; a state dict has none",
                 arguments.size());
      return heap.make_dict();
    }
    if (name == "torch.Size") {
      KILN_CHECK(arguments.size() == 1 && arguments[0].kind == pk::Kind::tuple,
                 "torch.Size takes one tuple of ints, not {}", heap.describe(args));
      return arguments[0];
    }
    if (name == "torch._utils._rebuild_parameter") {
      KILN_CHECK(arguments.size() == 3 && is(arguments[0], kTensor),
                 "torch._utils._rebuild_parameter takes (tensor, requires_grad, hooks), not {}", heap.describe(args));
      return arguments[0];
    }
    if (name == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(heap, arguments);
    KILN_FAIL("{} is a type, not something a state dict calls", pk::printable(name));
  }

  pk::Value persistent_load(pk::Heap& heap, pk::Value id) override {
    // ('storage', torch.<Type>Storage, key, location, numel): the storage's bytes are the
    // archive entry <prefix>data/<key>.
    const bool shaped = id.kind == pk::Kind::tuple && heap.items(id).size() == 5;
    const std::vector<pk::Value> fields = shaped ? heap.items(id) : std::vector<pk::Value>{};
    KILN_CHECK(shaped && fields[0].kind == pk::Kind::string && heap.text(fields[0]) == "storage" &&
                   fields[1].kind == pk::Kind::global && fields[2].kind == pk::Kind::string &&
                   fields[3].kind == pk::Kind::string && fields[4].kind == pk::Kind::integer && fields[4].integer >= 0,
               "a persistent id must be ('storage', storage type, key, location, numel), found {}", heap.describe(id));
    const StorageType* type = storage_type(heap.global(fields[1]));
    KILN_CHECK(type != nullptr, "persistent id names {}, which is not a storage type", heap.describe(fields[1]));
    const std::string& key = heap.text(fields[2]);
    const auto numel = static_cast<std::uint64_t>(fields[4].integer);

    if (const auto it = by_key_.find(key); it != by_key_.end()) {
      // A shared storage: every tensor that views it must agree on what it is.
      const Storage& storage = storages_[it->second];
      KILN_CHECK(storage.dtype == *type->dtype && storage.numel == numel,
                 "storage '{}' is loaded as {} elements of {} and again as {} elements of {}", pk::printable(key),
                 storage.numel, storage.dtype, numel, *type->dtype);
      return {.kind = pk::Kind::object, .integer = kStorage, .ref = it->second};
    }
    const std::string entry_name = prefix_ + "data/" + key;
    const detail::ZipEntry* entry = zip_.find(entry_name);
    KILN_CHECK(entry != nullptr, "storage '{}' has no archive entry '{}'", pk::printable(key),
               pk::printable(entry_name));
    const auto bytes = checked_mul<std::uint64_t>(numel, dtype_size(*type->dtype));
    KILN_CHECK(bytes && *bytes == entry->size,
               "storage '{}' holds {} elements of {} ({} bytes), but its archive entry '{}' has {} bytes",
               pk::printable(key), numel, *type->dtype, bytes ? fmt::format("{}", *bytes) : std::string("over 2^64"),
               pk::printable(entry_name), entry->size);
    storages_.push_back({key, *type->dtype, numel, entry});
    by_key_.emplace(key, storages_.size() - 1);
    return {.kind = pk::Kind::object, .integer = kStorage, .ref = storages_.size() - 1};
  }

  void build(pk::Heap& heap, pk::Value object, pk::Value state) override {
    // A module's state_dict() is an OrderedDict with a `_metadata` attribute (version
    // numbers per submodule), set by BUILD; Kiln has no use for it.
    KILN_CHECK(object.kind == pk::Kind::dict && (state.kind == pk::Kind::dict || state.kind == pk::Kind::none),
               "BUILD may only set attributes of a dict, not apply {} to {}", heap.describe(state),
               describe(heap, object));
  }

  static bool is(pk::Value value, ObjectTag tag) { return value.kind == pk::Kind::object && value.integer == tag; }
  static std::string describe(const pk::Heap& heap, pk::Value value) {
    if (is(value, kTensor)) return "a tensor";
    if (is(value, kStorage)) return "a storage";
    return heap.describe(value);
  }

  const std::vector<Storage>& storages() const { return storages_; }
  const TensorView& tensor(pk::Value value) const { return tensors_[value.ref]; }

 private:
  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  // backward_hooks[, metadata]); shape and bounds are checked when the tensor is read.
  pk::Value rebuild_tensor(const pk::Heap& heap, const std::vector<pk::Value>& args) {
    auto ints = [&](pk::Value tuple, std::string_view what) {
      KILN_CHECK(tuple.kind == pk::Kind::tuple, "_rebuild_tensor_v2: {} must be a tuple of ints, found {}", what,
                 describe(heap, tuple));
      KILN_CHECK(heap.items(tuple).size() <= kMaxRank, "_rebuild_tensor_v2: a {} of {} dims; Kiln reads at most {}",
                 what, heap.items(tuple).size(), kMaxRank);
      std::vector<std::int64_t> out;
      for (const pk::Value item : heap.items(tuple)) {
        KILN_CHECK(item.kind == pk::Kind::integer && item.integer >= 0,
                   "_rebuild_tensor_v2: {} must be non-negative ints, found {}", what, describe(heap, item));
        out.push_back(item.integer);
      }
      return out;
    };
    KILN_CHECK(args.size() == 6 || args.size() == 7,
               "_rebuild_tensor_v2 takes (storage, offset, size, stride, requires_grad, hooks[, metadata]), not {} "
               "arguments",
               args.size());
    KILN_CHECK(is(args[0], kStorage), "_rebuild_tensor_v2: the storage is {}", describe(heap, args[0]));
    KILN_CHECK(args[1].kind == pk::Kind::integer && args[1].integer >= 0,
               "_rebuild_tensor_v2: the storage offset must be a non-negative int, found {}", describe(heap, args[1]));
    KILN_CHECK(args[4].kind == pk::Kind::boolean, "_rebuild_tensor_v2: requires_grad must be a bool, found {}",
               describe(heap, args[4]));
    KILN_CHECK(args[5].kind == pk::Kind::dict && heap.entries(args[5]).empty(),
               "_rebuild_tensor_v2: backward hooks must be an empty dict, found {}", describe(heap, args[5]));
    TensorView view{args[0].ref, args[1].integer, ints(args[2], "size"), ints(args[3], "stride")};
    KILN_CHECK(view.sizes.size() == view.strides.size(), "_rebuild_tensor_v2: {} sizes but {} strides",
               view.sizes.size(), view.strides.size());
    // (ints() refused negative sizes and strides.) A dim of size 1 is never stepped along: its stride is irrelevant, and the gather below
    // would add and subtract it (a stride of 2^63 - 1 overflowed there).
    for (std::size_t d = 0; d < view.sizes.size(); ++d)
      if (view.sizes[d] == 1) view.strides[d] = 0;
    tensors_.push_back(std::move(view));
    return {.kind = pk::Kind::object, .integer = kTensor, .ref = tensors_.size() - 1};
  }

  const detail::ZipArchive& zip_;
  std::string prefix_;
  std::vector<Storage> storages_;
  std::map<std::string, std::size_t, std::less<>> by_key_;
  std::vector<TensorView> tensors_;
};

// Copies the elements of `view` (of `element` bytes each) from `storage` into `out`, in
// row-major order.
template <std::size_t Element> void gather(const std::byte* storage, const TensorView& view, std::byte* out) {
  const std::size_t rank = view.sizes.size();
  if (rank == 0) {
    std::memcpy(out, storage + view.offset * Element, Element);
    return;
  }
  const std::int64_t inner = view.sizes[rank - 1];
  const std::int64_t inner_stride = view.strides[rank - 1];
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t base = view.offset;  // the element offset of index[0..rank-2], inner index 0
  while (true) {
    const std::byte* from = storage + base * static_cast<std::int64_t>(Element);
    for (std::int64_t i = 0; i < inner; ++i, out += Element)
      std::memcpy(out, from + i * inner_stride * static_cast<std::int64_t>(Element), Element);
    // Advance the outer dims like an odometer.
    std::size_t dim = rank - 1;
    while (dim-- > 0) {
      base += view.strides[dim];
      if (++index[dim] < view.sizes[dim]) break;
      base -= view.strides[dim] * view.sizes[dim];
      index[dim] = 0;
    }
    if (dim == static_cast<std::size_t>(-1)) return;
  }
}

class StateDictReader {
 public:
  StateDictReader(const std::string& source, const detail::ZipArchive& zip, TorchEnvironment& environment,
                  const pk::Heap& heap, const TorchLoadOptions& options, std::uint64_t file_size)
      : source_(source),
        zip_(zip),
        environment_(environment),
        heap_(heap),
        options_(options),
        budget_(options.max_bytes ? options.max_bytes : file_size * kExpansionFactor + kExpansionAllowance) {}

  NamedTensors read(pk::Value root) {
    KILN_CHECK(root.kind == pk::Kind::dict,
               "{}: the checkpoint holds {}, not a dict of tensors (a state_dict); Kiln reads state dicts", source_,
               TorchEnvironment::describe(heap_, root));
    read_as_.emplace(root.ref, "the checkpoint itself");
    collect(root, "", 0);
    return std::move(out_);
  }

 private:
  void collect(pk::Value dict, const std::string& prefix, int depth) {
    KILN_CHECK(depth < kMaxDictDepth, "{}: '{}' nests dicts more than {} deep", source_, pk::printable(prefix),
               kMaxDictDepth);
    // Python keeps a key's first position and its last value.
    std::vector<std::pair<std::string, pk::Value>> items;
    std::map<std::string, std::size_t, std::less<>> position;
    for (const auto& [key, value] : heap_.entries(dict)) {
      if (key.kind != pk::Kind::string) {
        KILN_CHECK(options_.skip_non_tensors, "{}: '{}' has a key that is {}, not a string name", source_,
                   pk::printable(prefix), TorchEnvironment::describe(heap_, key));
        continue;
      }
      const auto [it, inserted] = position.try_emplace(heap_.text(key), items.size());
      if (inserted)
        items.emplace_back(heap_.text(key), value);
      else
        items[it->second].second = value;
    }
    for (const auto& [key, value] : items) {
      const std::string name = prefix + key;
      charge_name(name);
      if (TorchEnvironment::is(value, kTensor)) {
        KILN_CHECK(!out_.contains(name), "{}: two entries flatten to the name '{}'", source_, pk::printable(name));
        TensorData data = materialize(name, environment_.tensor(value));
        if (options_.float_dtype && is_float(data.dtype())) data = data.convert(*options_.float_dtype);
        out_.insert(name, std::move(data));
      } else if (value.kind == pk::Kind::dict) {
        // Each dict is read once: one reached again (a cycle, or a dict shared by two
        // entries) would make the flattening loop or grow exponentially.
        const auto [it, first] = read_as_.emplace(value.ref, "'" + pk::printable(name) + "'");
        KILN_CHECK(first, "{}: entry '{}' is the same dict as {}; Kiln reads a dict only once", source_,
                   pk::printable(name), it->second);
        collect(value, name + ".", depth + 1);
      } else {
        KILN_CHECK(options_.skip_non_tensors,
                   "{}: entry '{}' is {}, not a tensor (set TorchLoadOptions::skip_non_tensors to skip such entries)",
                   source_, pk::printable(name), TorchEnvironment::describe(heap_, value));
      }
    }
  }

  // Names count against the budget of bytes too, twice (a dict's name is kept again to
  // describe it): 4000 dicts under one 1 MB key made 4000 names of 1 MB (8 GB), from a file
  // of 1 MB.
  void charge_name(const std::string& name) {
    const std::uint64_t bytes = 2 * static_cast<std::uint64_t>(name.size());
    KILN_CHECK(bytes <= budget_,
               "{}: the names of its entries (as '{}', {} bytes) would bring what it reads past {} bytes, {}; Kiln "
               "refuses this as a likely decompression bomb",
               source_, pk::printable(name.substr(0, 64)) + (name.size() > 64 ? "..." : ""), name.size(),
               budget_ + materialized_, limit_rule());
    budget_ -= bytes;
    materialized_ += bytes;
  }

  // How the budget was set, for the errors.
  std::string limit_rule() const {
    if (options_.max_bytes) return "the limit set by TorchLoadOptions::max_bytes";
    return fmt::format("the limit of {} times the checkpoint's size plus {} MiB (TorchLoadOptions::max_bytes sets "
                       "another)",
                       kExpansionFactor, kExpansionAllowance >> 20);
  }

  TensorData materialize(const std::string& name, const TensorView& view) {
    const Storage& storage = environment_.storages()[view.storage];
    const std::string where = fmt::format("{}: tensor '{}' (a view of storage '{}')", source_, pk::printable(name),
                                          pk::printable(storage.key));
    const Shape shape{std::vector<std::int64_t>(view.sizes)};
    // The product of the non-zero sizes must fit, so that Shape::numel cannot overflow.
    std::int64_t numel = 1;
    bool empty = false;
    for (const std::int64_t size : view.sizes) {
      if (size == 0) {
        empty = true;
        continue;
      }
      const auto product = checked_mul(numel, size);
      KILN_CHECK(product.has_value(), "{}: shape {} has more elements than fit in 64 bits", where, shape);
      numel = *product;
    }
    if (empty) return TensorData({}, shape, storage.dtype);

    // The last element the view reaches must lie inside the storage.
    std::optional<std::int64_t> last = view.offset;
    for (std::size_t d = 0; d < view.sizes.size() && last; ++d) {
      const auto step = checked_mul(view.sizes[d] - 1, view.strides[d]);
      last = step ? checked_add(*last, *step) : std::nullopt;
    }
    KILN_CHECK(last && static_cast<std::uint64_t>(*last) < storage.numel,
               "{}: shape {}, strides [{}] and offset {} reach element {}, but the storage has {} elements", where,
               shape, fmt::join(view.strides, ", "), view.offset,
               last ? fmt::format("{}", *last) : std::string("beyond 2^63"), storage.numel);
    const std::size_t element = dtype_size(storage.dtype);
    const auto bytes = checked_mul<std::uint64_t>(static_cast<std::uint64_t>(numel), element);
    const std::uint64_t limit = budget_ + materialized_;
    KILN_CHECK(bytes && *bytes <= budget_,
               "{}: its {} bytes would bring the tensors read past {} bytes, {} (views that repeat their storage's "
               "elements, or one tensor under very many names); Kiln refuses this as a likely decompression bomb",
               where, bytes ? fmt::format("{}", *bytes) : std::string("over 2^64"), limit, limit_rule());
    budget_ -= *bytes;
    materialized_ += *bytes;

    const std::byte* source = storage_bytes(storage).data();
    std::vector<std::byte> out(static_cast<std::size_t>(*bytes));
    switch (element) {
      case 1: gather<1>(source, view, out.data()); break;
      case 2: gather<2>(source, view, out.data()); break;
      case 4: gather<4>(source, view, out.data()); break;
      default: gather<8>(source, view, out.data()); break;
    }
    return TensorData(std::move(out), shape, storage.dtype);
  }

  // The storage's archive entry, CRC-checked once however many tensors view it.
  std::span<const std::byte> storage_bytes(const Storage& storage) {
    const auto it = read_.find(storage.key);
    if (it != read_.end()) return it->second;
    return read_.emplace(storage.key, zip_.read(*storage.entry)).first->second;
  }

  const std::string& source_;
  const detail::ZipArchive& zip_;
  TorchEnvironment& environment_;
  const pk::Heap& heap_;
  const TorchLoadOptions& options_;
  std::map<std::string, std::span<const std::byte>, std::less<>> read_;
  std::map<std::size_t, std::string> read_as_;  // dicts read so far (heap index → name)
  std::uint64_t budget_;                        // bytes that tensors may still take
  std::uint64_t materialized_ = 0;
  NamedTensors out_;
};

// The "<name>/" folder that holds data.pkl: torch.save names it after the file.
std::string archive_prefix(const detail::ZipArchive& zip, const std::string& source) {
  std::string prefix;
  bool found = false;
  for (const detail::ZipEntry& entry : zip.entries()) {
    const std::string_view name = entry.name;
    if (name == "data.pkl" || (name.ends_with("/data.pkl") && name.find('/') == name.size() - 9)) {
      KILN_CHECK(!found, "{}: the archive has two pickles, '{}data.pkl' and '{}'", source, pk::printable(prefix),
                 pk::printable(name));
      prefix = std::string(name.substr(0, name.size() - 8));
      found = true;
    }
  }
  KILN_CHECK(found, "{}: the zip archive has no <name>/data.pkl entry: it was not written by torch.save", source);
  return prefix;
}

}  // namespace

namespace {
NamedTensors read_checkpoint(std::span<const std::byte> bytes, const std::string& name, const TorchLoadOptions& options);
}  // namespace

// A file whose reading runs out of memory is a kiln::Error like any other bad file.
NamedTensors load_torch(std::span<const std::byte> bytes, const std::string& name, const TorchLoadOptions& options) {
  try {
    return read_checkpoint(bytes, name, options);
  } catch (const std::bad_alloc&) {
    KILN_FAIL("{}: out of memory while reading this {}-byte checkpoint", name, bytes.size());
  }
}

namespace {
NamedTensors read_checkpoint(std::span<const std::byte> bytes, const std::string& name, const TorchLoadOptions& options) {
  detail::check_float_dtype(name + ": load_torch", options.float_dtype);
  if (!detail::ZipArchive::looks_like_zip(bytes)) {
    // The format before PyTorch 1.6 is a bare pickle starting with a magic number.
    constexpr std::array<unsigned char, 4> legacy{0x80, 0x02, 0x8a, 0x0a};
    const bool is_legacy =
        bytes.size() >= legacy.size() && std::memcmp(bytes.data(), legacy.data(), legacy.size()) == 0;
    KILN_CHECK(!is_legacy,
               "{}: this is the legacy torch.save format (PyTorch < 1.6, or _use_new_zipfile_serialization=False), "
               "which Kiln does not read; save it again with a current torch.save",
               name);
  }
  const detail::ZipArchive zip(bytes, name);
  const std::string prefix = archive_prefix(zip, name);
  if (const detail::ZipEntry* byteorder = zip.find(prefix + "byteorder")) {
    const std::string_view order = detail::as_chars(zip.read(*byteorder));
    KILN_CHECK(order == "little", "{}: the tensors are stored '{}'-endian; Kiln reads little-endian archives", name,
               pk::printable(order));
  }
  const detail::ZipEntry* pickle_entry = zip.find(prefix + "data.pkl");
  TorchEnvironment environment(zip, prefix);
  pk::Heap heap;
  const pk::Value root = pk::run(zip.read(*pickle_entry), name + ": " + prefix + "data.pkl", heap, environment);
  return StateDictReader(name, zip, environment, heap, options, bytes.size()).read(root);
}
}  // namespace

NamedTensors load_torch(const std::filesystem::path& path, const TorchLoadOptions& options) {
  const kiln::detail::MappedFile file(path, path.string(), detail::kWeightsFileAdvice);
  return load_torch(file.bytes(), path.string(), options);
}

}  // namespace kiln::store
