// Indexing kernels: gather and scatter (per-element indices along one dim, torch.gather /
// torch.scatter semantics), index_select and index_add (one index per slice along a dim).
// Indices are i64 or i32, negative ones counting from the end; one out of range is a kiln::Error
// naming the op, the index and the dim size, and no result is returned.
#include "internal.hpp"

#include <atomic>
#include <type_traits>

namespace kiln::cpu {
namespace {

// Calls fn.template operator()<T>() with an unsigned type of the element size: copies need no dtype.
template <class F> void visit_element_bytes(DType dtype, F&& fn) {
  switch (dtype_size(dtype)) {
    case 1: fn.template operator()<std::uint8_t>(); return;
    case 2: fn.template operator()<std::uint16_t>(); return;
    case 4: fn.template operator()<std::uint32_t>(); return;
    default: fn.template operator()<std::uint64_t>(); return;
  }
}

// a + b in the storage type: Bool adds as logical or, half floats through float.
template <class T> T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(a) + static_cast<float>(b));
  else return static_cast<T>(a + b);
}


// Calls fn.template operator()<I>() with the index tensor's element type (i64 or i32).
template <class F> void visit_index_type(std::string_view op, const CpuTensor& index, F&& fn) {
  switch (index.dtype) {
    case DType::i64: fn.template operator()<std::int64_t>(); return;
    case DType::i32: fn.template operator()<std::int32_t>(); return;
    default: KILN_FAIL("{}: indices must be i64 or i32, got {}", op, index.dtype);
  }
}

// Negative indices count from the end; the result may still be out of [0, size).
template <class I> std::int64_t wrap_index(I v, std::int64_t size) {
  const auto j = static_cast<std::int64_t>(v);
  return j < 0 ? j + size : j;
}

// Called after a kernel met an index out of range: read_indices finds the first one and throws
// its error. gather and scatter read indices in place rather than through read_indices, because
// a materialized copy of a large index costs more (fresh pages) than the gather itself.
[[noreturn]] void fail_on_bad_index(std::string_view op, const CpuTensor& index, std::int64_t size) {
  read_indices(op, index, size);
  KILN_FAIL("{}: an index is out of range for a dim of size {}", op, size);
}

// A stride vector (or dims) without entry `dim`.
Extents without_dim(Extents v, std::size_t dim) {
  v.erase(dim);
  return v;
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::gather(const Primitive& x, std::int64_t dim, const Primitive& index) {
  ops::check_dim("gather", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  const std::size_t rank = x.shape.rank();
  ops::check_gather_index(x.shape, index.shape, d);
  const std::int64_t size = x.shape[d];
  CpuTensor out = cpu::empty(index.shape, x.dtype);
  if (out.numel() == 0) {
    ops::check_index_dtype("gather", index.dtype);
    return out;
  }
  if (size == 0) cpu::fail_on_bad_index("gather", index, size);
  // Walk the output; x's offset counts every coordinate but dim's, which comes from the index.
  Strides x_strides = x.strides;
  x_strides[d] = 0;
  const std::int64_t dim_stride = x.strides[d];
  std::atomic<bool> bad{false};
  cpu::visit_index_type("gather", index, [&]<class I>() {
    cpu::visit_element_bytes(x.dtype, [&]<class T>() {
      const T* src = x.data<T>();
      const I* ip = index.data<I>();
      T* dst = out.data<T>();
      cpu::strided_walk<3>(out.shape, {&out.strides, &x_strides, &index.strides}, 1024,
                           [&](const std::array<std::int64_t, 3>& off, const std::array<std::int64_t, 3>& step,
                               std::int64_t n) {
                             const std::int64_t limit = size, ds = dim_stride, so = step[0], sx = step[1],
                                                si = step[2];
                             T* o = dst + off[0];
                             const T* from = src + off[1];
                             const I* at = ip + off[2];
                             bool row_bad = false;
                             for (std::int64_t i = 0; i < n; ++i) {
                               std::int64_t j = cpu::wrap_index(at[i * si], limit);
                               // A bad index reads element 0 instead; the whole result is then discarded.
                               const bool ok = static_cast<std::uint64_t>(j) < static_cast<std::uint64_t>(limit);
                               row_bad |= !ok;
                               j = ok ? j : 0;
                               o[i * so] = from[i * sx + j * ds];
                             }
                             if (row_bad) bad.store(true, std::memory_order_relaxed);
                           });
    });
  });
  if (bad.load()) cpu::fail_on_bad_index("gather", index, size);
  return out;
}

Cpu::Primitive Cpu::scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                            ops::ScatterMode mode) {
  const char* op = mode == ops::ScatterMode::add ? "scatter_add" : "scatter";
  ops::check_dim(op, dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  const std::size_t rank = x.shape.rank();
  ops::check_scatter_operands(op, x.shape, x.dtype, index.shape, index.dtype, src.shape, src.dtype, d);
  const std::int64_t size = x.shape[d];
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  cpu::copy_into(x, out);
  if (index.numel() == 0) return out;
  if (size == 0) cpu::fail_on_bad_index(op, index, size);
  // Walk the index over every dim but `dim`; each visited position runs its whole fiber along dim.
  // Two positions differ in some coordinate other than dim, so they write disjoint parts of the
  // output and threads never collide; within a fiber, indices apply in order (for assign, the
  // last duplicate wins). The fiber loop is innermost when dim is the index's last dim (its
  // contiguous one), else outermost, so the inner loop runs along the contiguous dim.
  const Shape rest(cpu::without_dim(Extents(index.shape.dims()), d));
  const Strides out_strides = cpu::without_dim(out.strides, d);
  const Strides src_strides = cpu::without_dim(src.strides, d);
  const Strides idx_strides = cpu::without_dim(index.strides, d);
  const std::int64_t out_dim_stride = out.strides[d], src_dim_stride = src.strides[d],
                     idx_dim_stride = index.strides[d];
  const std::int64_t fiber = index.shape[d];
  const bool fiber_inner = d + 1 == rank;
  std::atomic<bool> bad{false};
  auto walk = [&]<class I, class T>(auto apply) {
    T* const dst = out.data<T>();
    const T* const s = src.data<T>();
    const I* const ip = index.data<I>();
    cpu::strided_walk<3>(rest, {&out_strides, &src_strides, &idx_strides}, 256,
                         [&, apply](const std::array<std::int64_t, 3>& off, const std::array<std::int64_t, 3>& step,
                                    std::int64_t n) {
                           // Locals, so that stores through dst cannot force reloads of the loop's bounds.
                           const std::int64_t limit = size, fiber_n = fiber, out_ds = out_dim_stride,
                                              src_ds = src_dim_stride, idx_ds = idx_dim_stride, so = step[0],
                                              sv = step[1], si = step[2];
                           bool row_bad = false;
                           auto visit = [&](T* o, const T* v, const I* at) {
                             const std::int64_t j = cpu::wrap_index(*at, limit);
                             if (static_cast<std::uint64_t>(j) >= static_cast<std::uint64_t>(limit)) [[unlikely]] {
                               row_bad = true;
                               return;
                             }
                             apply(o[j * out_ds], *v);
                           };
                           if (fiber_inner) {
                             for (std::int64_t i = 0; i < n; ++i) {
                               T* o = dst + off[0] + i * so;
                               const T* v = s + off[1] + i * sv;
                               const I* at = ip + off[2] + i * si;
                               for (std::int64_t k = 0; k < fiber_n; ++k) visit(o, v + k * src_ds, at + k * idx_ds);
                             }
                           } else {
                             for (std::int64_t k = 0; k < fiber_n; ++k) {
                               T* o = dst + off[0];
                               const T* v = s + off[1] + k * src_ds;
                               const I* at = ip + off[2] + k * idx_ds;
                               for (std::int64_t i = 0; i < n; ++i)
                                 visit(o + i * so, v + i * sv, at + i * si);
                             }
                           }
                           if (row_bad) bad.store(true, std::memory_order_relaxed);
                         });
  };
  cpu::visit_index_type(op, index, [&]<class I>() {
    if (mode == ops::ScatterMode::assign) {
      cpu::visit_element_bytes(x.dtype, [&]<class T>() { walk.template operator()<I, T>([](T& t, T v) { t = v; }); });
    } else {
      visit_dtype(x.dtype, [&]<class T>() {
        walk.template operator()<I, T>([](T& t, T v) { t = cpu::add_values(t, v); });
      });
    }
  });
  if (bad.load()) cpu::fail_on_bad_index(op, index, size);
  return out;
}

Cpu::Primitive Cpu::index_select(const Primitive& x, std::int64_t dim, const Primitive& index) {
  ops::check_dim("index_select", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_index_vector("index_select", index.shape);
  const std::vector<std::int64_t> idx = cpu::read_indices("index_select", index, x.shape[d]);
  const auto n = static_cast<std::int64_t>(idx.size());
  std::vector<std::int64_t> out_dims = x.shape.to_vector();
  out_dims[d] = n;
  CpuTensor out = cpu::empty(Shape(out_dims), x.dtype);
  if (out.numel() == 0) return out;
  // Contiguous input: output slab (o, i) is input slab (o, idx[i]), `inner` elements each.
  const CpuTensor in = cpu::contiguous(x);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= x.shape[i];
  for (std::size_t i = d + 1; i < x.shape.rank(); ++i) inner *= x.shape[i];
  const std::int64_t size = x.shape[d];
  cpu::visit_element_bytes(x.dtype, [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    cpu::parallel_for(outer * n, std::max<std::int64_t>(1, 16384 / inner), [&](std::int64_t begin, std::int64_t end) {
      std::int64_t o = begin / n, i = begin % n;
      for (std::int64_t item = begin; item < end; ++item) {
        const T* from = src + (o * size + idx[static_cast<std::size_t>(i)]) * inner;
        T* to = dst + item * inner;
        if (inner == 1) *to = *from;
        else std::memcpy(to, from, static_cast<std::size_t>(inner) * sizeof(T));
        if (++i == n) {
          i = 0;
          ++o;
        }
      }
    });
  });
  return out;
}

Cpu::Primitive Cpu::index_add(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& values) {
  ops::check_dim("index_add", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_index_vector("index_add", index.shape);
  const std::vector<std::int64_t> idx = cpu::read_indices("index_add", index, x.shape[d]);
  const auto n = static_cast<std::int64_t>(idx.size());
  ops::check_index_add_values(x.shape, x.dtype, values.shape, values.dtype, d, n);
  CpuTensor out = cpu::empty(x.shape, x.dtype);
  cpu::copy_into(x, out);
  if (values.numel() == 0) return out;
  // Each task owns a block of columns of one outer row and applies every index to it in order:
  // tasks write disjoint elements, and duplicate indices accumulate deterministically.
  const CpuTensor v = cpu::contiguous(values);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= x.shape[i];
  for (std::size_t i = d + 1; i < x.shape.rank(); ++i) inner *= x.shape[i];
  const std::int64_t size = x.shape[d];
  constexpr std::int64_t kColumns = 2048;
  const std::int64_t blocks = (inner + kColumns - 1) / kColumns;
  const std::int64_t task_size = std::max<std::int64_t>(1, n * std::min(inner, kColumns));
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / task_size);
  visit_dtype(x.dtype, [&]<class T>() {
    const T* src = v.data<T>();
    T* dst = out.data<T>();
    cpu::parallel_for(outer * blocks, grain,
                      [&](std::int64_t begin, std::int64_t end) {
                        for (std::int64_t task = begin; task < end; ++task) {
                          const std::int64_t o = task / blocks, c0 = task % blocks * kColumns;
                          const std::int64_t c1 = std::min(inner, c0 + kColumns);
                          for (std::int64_t i = 0; i < n; ++i) {
                            T* to = dst + (o * size + idx[static_cast<std::size_t>(i)]) * inner;
                            const T* from = src + (o * n + i) * inner;
                            for (std::int64_t c = c0; c < c1; ++c) to[c] = cpu::add_values(to[c], from[c]);
                          }
                        }
                      });
  });
  return out;
}

}  // namespace kiln
