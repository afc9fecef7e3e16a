// DataParallel's non-template parts (kiln/dist/data_parallel.hpp): the check and broadcast of
// a module's state at the start, and the bucketed averaging of gradients.
#include "kiln/dist/data_parallel.hpp"

#include <cstring>
#include <string>

namespace kiln::dist::detail {

namespace {

// A 63-bit FNV-1a hash of a slot's path, dtype and shape: what every rank's slot must match.
std::int64_t slot_hash(const nn::Slot& slot) {
  std::uint64_t hash = 1469598103934665603ull;
  const auto mix = [&hash](std::uint64_t v) { hash = (hash ^ v) * 1099511628211ull; };
  for (const char c : slot.path) mix(static_cast<unsigned char>(c));
  mix(slot.param ? 1 : 2);
  mix(static_cast<std::uint64_t>(slot.dtype()));
  for (const std::int64_t d : slot.shape()) mix(static_cast<std::uint64_t>(d));
  return static_cast<std::int64_t>(hash >> 1);
}

std::string describe(const nn::Slot& slot) {
  return std::string(slot.param ? "parameter " : "buffer ") + slot.path + " (" + std::string(dtype_name(slot.dtype())) +
         " " + slot.shape().str() + ")";
}

}  // namespace

void check_and_broadcast(const nn::ModuleState& state) {
  const std::int64_t count = static_cast<std::int64_t>(state.slots.size());
  KILN_CHECK(first_disagreement(std::span<const std::int64_t>(&count, 1)) < 0,
             "DataParallel: the ranks' modules have different numbers of parameters and buffers (rank {} has {}); "
             "every rank must build the same module",
             rank(), count);
  std::vector<std::int64_t> hashes;
  hashes.reserve(state.slots.size());
  for (const nn::Slot& slot : state.slots) hashes.push_back(slot_hash(slot));
  const std::int64_t at = first_disagreement(hashes);
  KILN_CHECK(at < 0, "DataParallel: the ranks' modules differ at slot {}: rank {} has {}; every rank must build the same module",
             at, rank(), at < 0 ? std::string() : describe(state.slots[static_cast<std::size_t>(at)]));
  // One broadcast of every value, packed.
  std::vector<TensorData> values;
  std::size_t bytes = 0;
  for (const nn::Slot& slot : state.slots) {
    values.push_back(slot.into_data());
    bytes += values.back().bytes().size();
  }
  std::vector<std::byte> packed(bytes);
  std::size_t offset = 0;
  for (const TensorData& value : values) {
    if (!value.bytes().empty()) std::memcpy(packed.data() + offset, value.bytes().data(), value.bytes().size());
    offset += value.bytes().size();
  }
  broadcast_bytes(packed, 0);
  if (rank() == 0) return;
  offset = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    TensorData& value = values[i];
    if (!value.bytes().empty()) std::memcpy(value.bytes().data(), packed.data() + offset, value.bytes().size());
    offset += value.bytes().size();
    state.slots[i].assign(value);
  }
}

void average_gradients(std::vector<GradientSlot>& slots, std::size_t bucket_bytes) {
  // The same trainable parameters on every rank (one may have been frozen on one rank only).
  std::int64_t elements = 0;
  for (const GradientSlot& slot : slots) elements += slot.shape.numel();
  const std::int64_t trainable[] = {static_cast<std::int64_t>(slots.size()), elements};
  KILN_CHECK(first_disagreement(trainable) < 0,
             "DataParallel::sync: the ranks have different trainable parameters (rank {} has {} of {} elements); "
             "freeze and unfreeze the same parameters on every rank",
             rank(), slots.size(), elements);
  // Which gradients exist on some rank: the same buckets on every rank.
  TensorData present(std::vector<std::byte>(slots.size()), Shape{static_cast<std::int64_t>(slots.size())}, DType::u8);
  for (std::size_t i = 0; i < slots.size(); ++i) present.bytes()[i] = std::byte{slots[i].grad ? std::uint8_t{1} : std::uint8_t{0}};
  all_reduce_unchecked(present, ReduceOp::max);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (present.bytes()[i] == std::byte{0} || slots[i].grad) continue;
    slots[i].grad = TensorData(std::vector<std::byte>(static_cast<std::size_t>(slots[i].shape.numel()) * dtype_size(slots[i].dtype)),
                               slots[i].shape, slots[i].dtype);
  }
  // Buckets: consecutive gradients of one dtype, about bucket_bytes each, in module order.
  std::vector<std::size_t> bucket;
  std::size_t filled = 0;
  const auto flush = [&] {
    if (bucket.empty()) return;
    const DType dtype = slots[bucket[0]].grad->dtype();
    std::vector<std::byte> bytes(filled);
    std::size_t offset = 0;
    for (const std::size_t i : bucket) {
      const auto part = slots[i].grad->bytes();
      if (!part.empty()) std::memcpy(bytes.data() + offset, part.data(), part.size());
      offset += part.size();
    }
    const auto numel = static_cast<std::int64_t>(filled / dtype_size(dtype));
    TensorData flat(std::move(bytes), Shape{numel}, dtype);
    all_reduce_unchecked(flat, ReduceOp::mean);
    offset = 0;
    for (const std::size_t i : bucket) {
      const auto part = slots[i].grad->bytes();
      if (!part.empty()) std::memcpy(part.data(), flat.bytes().data() + offset, part.size());
      offset += part.size();
    }
    bucket.clear();
    filled = 0;
  };
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].grad) continue;
    const std::size_t size = slots[i].grad->bytes().size();
    if (!bucket.empty() && (slots[bucket[0]].grad->dtype() != slots[i].grad->dtype() || filled + size > bucket_bytes)) flush();
    bucket.push_back(i);
    filled += size;
  }
  flush();
}

}  // namespace kiln::dist::detail
