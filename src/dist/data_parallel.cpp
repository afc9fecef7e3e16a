// DataParallel's non-template parts (kiln/dist/data_parallel.hpp): the check and broadcast of
// a module's state at the start, and the bucketed averaging of gradients.
#include "kiln/dist/data_parallel.hpp"

#include <algorithm>
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
  broadcast_slots(state, true);
}

void broadcast_slots(const nn::ModuleState& state, bool params) {
  // One broadcast of every value, packed.
  std::vector<const nn::Slot*> slots;
  std::vector<TensorData> values;
  std::size_t bytes = 0;
  for (const nn::Slot& slot : state.slots) {
    if (slot.param && !params) continue;
    slots.push_back(&slot);
    values.push_back(slot.into_data());
    bytes += values.back().bytes().size();
  }
  if (bytes == 0) return;  // the same on every rank: the modules were checked to agree
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
    slots[i]->assign(value);
  }
}

struct GradientReducer::Impl {
  struct Bucket {
    DType dtype = DType::f32;
    std::vector<std::size_t> slots;
    TensorData flat;           // the slots' gradients back to back; averaged in place
    std::size_t ready = 0;     // slots added this step
  };
  std::size_t bucket_bytes;
  std::vector<SlotLayout> layout;
  std::vector<std::size_t> bucket_of, offset_of;  // by slot: its bucket, its byte offset there
  std::vector<Bucket> buckets;
  std::vector<std::uint8_t> here;                  // by slot: added on this rank this step
  TensorData anywhere;                             // by slot, after finish: some rank had it
  std::size_t next = 0;                            // the first bucket not started
  bool open = false;                               // between begin and finish
  BackgroundReducer reducer;                       // the buckets' all-reduces, on a thread of their own

  void plan() {
    buckets.clear();
    bucket_of.assign(layout.size(), 0);
    offset_of.assign(layout.size(), 0);
    // The last parameters first: backward finishes them first.
    std::size_t filled = 0;
    for (std::size_t i = layout.size(); i-- > 0;) {
      const std::size_t size = static_cast<std::size_t>(layout[i].shape.numel()) * dtype_size(layout[i].dtype);
      if (buckets.empty() || buckets.back().dtype != layout[i].dtype || (filled > 0 && filled + size > bucket_bytes)) {
        buckets.emplace_back();
        buckets.back().dtype = layout[i].dtype;
        filled = 0;
      }
      bucket_of[i] = buckets.size() - 1;
      offset_of[i] = filled;
      buckets.back().slots.push_back(i);
      filled += size;
    }
    for (Bucket& bucket : buckets) {
      std::size_t bytes = 0;
      for (const std::size_t i : bucket.slots)
        bytes += static_cast<std::size_t>(layout[i].shape.numel()) * dtype_size(layout[i].dtype);
      bucket.flat = TensorData(std::vector<std::byte>(bytes), Shape{static_cast<std::int64_t>(bytes / dtype_size(bucket.dtype))},
                               bucket.dtype);
    }
  }
  // Starts the buckets whose gradients are all there, in bucket order.
  void start_ready() {
    while (next < buckets.size() && buckets[next].ready == buckets[next].slots.size()) {
      reducer.queue(buckets[next].flat, ReduceOp::mean);
      ++next;
    }
  }
  static bool same(const std::vector<SlotLayout>& a, const std::vector<SlotLayout>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].shape != b[i].shape || a[i].dtype != b[i].dtype) return false;
    return true;
  }
};

GradientReducer::GradientReducer(std::size_t bucket_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->bucket_bytes = std::max<std::size_t>(bucket_bytes, 1);
}
GradientReducer::~GradientReducer() = default;

void GradientReducer::begin(std::vector<SlotLayout> layout, std::string_view op) {
  Impl& s = *impl_;
  KILN_CHECK(!s.open, "{}: the gradients of the step before were not finished (a backward pass that threw?)", op);
  // The same trainable parameters on every rank (one may have been frozen on one rank only).
  std::int64_t elements = 0;
  std::uint64_t hash = 1469598103934665603ull;
  for (const SlotLayout& slot : layout) {
    elements += slot.shape.numel();
    hash = (hash ^ static_cast<std::uint64_t>(slot.dtype)) * 1099511628211ull;
    for (const std::int64_t d : slot.shape) hash = (hash ^ static_cast<std::uint64_t>(d)) * 1099511628211ull;
  }
  const std::int64_t trainable[] = {static_cast<std::int64_t>(layout.size()), elements, static_cast<std::int64_t>(hash >> 1)};
  KILN_CHECK(first_disagreement(trainable) < 0,
             "{}: the ranks have different trainable parameters (rank {} has {} of {} elements); freeze and unfreeze "
             "the same parameters on every rank",
             op, rank(), layout.size(), elements);
  if (!Impl::same(layout, s.layout) || s.buckets.empty()) {
    s.layout = std::move(layout);
    s.plan();
  }
  for (Impl::Bucket& bucket : s.buckets) bucket.ready = 0;
  s.here.assign(s.layout.size(), 0);
  s.next = 0;
  s.open = true;
}

void GradientReducer::add(std::size_t slot, const TensorData& grad) {
  Impl& s = *impl_;
  KILN_CHECK(s.open && slot < s.layout.size(), "DataParallel: gradient {} outside a step of {} parameters", slot,
             s.layout.size());
  KILN_CHECK(grad.dtype() == s.layout[slot].dtype && grad.shape() == s.layout[slot].shape,
             "DataParallel: the gradient of parameter {} is {} {}, but the parameter is {} {}", slot, grad.dtype(),
             grad.shape(), s.layout[slot].dtype, s.layout[slot].shape);
  Impl::Bucket& bucket = s.buckets[s.bucket_of[slot]];
  KILN_CHECK(s.bucket_of[slot] >= s.next, "DataParallel: the gradient of parameter {} came after its bucket was sent",
             slot);
  const auto bytes = grad.bytes();
  if (!bytes.empty()) std::memcpy(bucket.flat.bytes().data() + s.offset_of[slot], bytes.data(), bytes.size());
  if (!s.here[slot]) {
    s.here[slot] = 1;
    ++bucket.ready;
  }
  s.start_ready();
}


void GradientReducer::finish() {
  Impl& s = *impl_;
  KILN_CHECK(s.open, "DataParallel: finish without begin");
  s.open = false;
  // The gradients this rank lacks count as zeros; every bucket goes out, in order.
  for (std::size_t b = s.next; b < s.buckets.size(); ++b) {
    Impl::Bucket& bucket = s.buckets[b];
    for (const std::size_t i : bucket.slots) {
      if (s.here[i]) continue;
      const std::size_t size = static_cast<std::size_t>(s.layout[i].shape.numel()) * dtype_size(s.layout[i].dtype);
      if (size > 0) std::memset(bucket.flat.bytes().data() + s.offset_of[i], 0, size);
      ++bucket.ready;
    }
  }
  s.start_ready();
  s.reducer.wait_all();
  // Which gradients some rank had.
  std::vector<std::byte> flags(s.here.size());
  for (std::size_t i = 0; i < flags.size(); ++i) flags[i] = std::byte{s.here[i]};
  s.anywhere = TensorData(std::move(flags), Shape{static_cast<std::int64_t>(s.here.size())}, DType::u8);
  all_reduce_unchecked(s.anywhere, ReduceOp::max);
}

std::optional<TensorData> GradientReducer::result(std::size_t slot) const {
  const Impl& s = *impl_;
  KILN_CHECK(!s.open && slot < s.layout.size() && s.anywhere.numel() == static_cast<std::int64_t>(s.layout.size()),
             "DataParallel: result {} before finish", slot);
  if (s.anywhere.bytes()[slot] == std::byte{0}) return std::nullopt;
  const SlotLayout& layout = s.layout[slot];
  const std::size_t size = static_cast<std::size_t>(layout.shape.numel()) * dtype_size(layout.dtype);
  const std::byte* from = s.buckets[s.bucket_of[slot]].flat.bytes().data() + s.offset_of[slot];
  return TensorData(std::vector<std::byte>(from, from + size), layout.shape, layout.dtype);
}

void agree(std::span<double> values, ReduceOp op) {
  if (values.empty()) return;
  TensorData data(std::vector<std::byte>(reinterpret_cast<const std::byte*>(values.data()),
                                         reinterpret_cast<const std::byte*>(values.data() + values.size())),
                  Shape{static_cast<std::int64_t>(values.size())}, DType::f64);
  all_reduce_unchecked(data, op);
  // MPI may sum in another order on each rank: rank 0's result, everywhere.
  broadcast_bytes(data.bytes(), 0);
  std::memcpy(values.data(), data.bytes().data(), values.size() * sizeof(double));
}

}  // namespace kiln::dist::detail
