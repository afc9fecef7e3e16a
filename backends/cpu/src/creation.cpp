// Creation, host transfer, casts and the strided-copy machinery the other kernels use.
#include "internal.hpp"

namespace kiln::cpu {

CpuTensor empty(const Shape& shape, DType dtype) {
  for (auto d : shape) KILN_CHECK(d >= 0, "cpu: negative dimension in shape {}", shape);
  CpuTensor t;
  t.storage = std::make_shared<Storage>(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  t.strides = shape.contiguous_strides();
  t.shape = shape;
  t.dtype = dtype;
  return t;
}

void copy_into(const CpuTensor& src, const CpuTensor& dst) {
  KILN_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "cpu copy: {} {} into {} {}", src.shape, src.dtype,
             dst.shape, dst.dtype);
  const std::size_t size = dtype_size(src.dtype);
  std::byte* s = src.storage ? src.storage->ptr : nullptr;
  std::byte* d = dst.storage ? dst.storage->ptr : nullptr;
  const std::int64_t src_offset = src.offset, dst_offset = dst.offset;
  strided_walk<2>(src.shape, {&src.strides, &dst.strides}, 4096,
                  [&](const std::array<std::int64_t, 2>& off, const std::array<std::int64_t, 2>& inner,
                      std::int64_t n) {
                    const std::int64_t so = src_offset + off[0], dof = dst_offset + off[1];
                    if (inner[0] == 1 && inner[1] == 1) {
                      std::memcpy(d + dof * size, s + so * size, static_cast<std::size_t>(n) * size);
                      return;
                    }
                    auto loop = [&]<class T>() {
                      const T* sp = reinterpret_cast<const T*>(s) + so;
                      T* dp = reinterpret_cast<T*>(d) + dof;
                      for (std::int64_t i = 0; i < n; ++i) dp[i * inner[1]] = sp[i * inner[0]];
                    };
                    switch (size) {
                      case 1: loop.template operator()<std::uint8_t>(); break;
                      case 2: loop.template operator()<std::uint16_t>(); break;
                      case 4: loop.template operator()<std::uint32_t>(); break;
                      default: loop.template operator()<std::uint64_t>(); break;
                    }
                  });
}

CpuTensor contiguous(const CpuTensor& x) {
  if (x.is_contiguous()) return x;
  CpuTensor out = empty(x.shape, x.dtype);
  copy_into(x, out);
  return out;
}

CpuTensor view_of(const CpuTensor& x, Shape shape, Strides strides, std::int64_t offset) {
  CpuTensor v;  // not a copy of x: its shape and strides would be copied only to be replaced
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  v.offset = offset;
  v.dtype = x.dtype;
  v.storage = x.storage;
  return v;
}

CpuTensor broadcast_view(const CpuTensor& x, const Shape& shape) { return strided::broadcast(x, shape); }

std::vector<std::int64_t> read_indices(std::string_view op, const CpuTensor& index, std::int64_t limit) {
  ops::check_index_dtype(op, index.dtype);
  const CpuTensor c = contiguous(index);
  return ops::read_indices(op, c.dtype, {c.bytes(), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype)}, limit);
}

}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::from_data(const TensorData& data, const Device&) {
  CpuTensor t = cpu::empty(data.shape(), data.dtype());
  if (!data.bytes().empty()) std::memcpy(t.bytes(), data.bytes().data(), data.bytes().size());
  return t;
}

TensorData Cpu::into_data(const Primitive& p) {
  const CpuTensor c = cpu::contiguous(p);
  std::vector<std::byte> bytes(static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype));
  if (!bytes.empty()) std::memcpy(bytes.data(), c.bytes(), bytes.size());
  return TensorData(std::move(bytes), c.shape, c.dtype);
}

Cpu::Primitive Cpu::full(const Shape& shape, double value, DType dtype, const Device&) {
  CpuTensor t = cpu::empty(shape, dtype);
  visit_dtype(dtype, [&]<class T>() {
    const T v = from_double<T>(value);
    T* p = t.data<T>();
    cpu::parallel_for(t.numel(), 1 << 16, [&](std::int64_t b, std::int64_t e) { std::fill(p + b, p + e, v); });
  });
  return t;
}

Cpu::Primitive Cpu::random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                           const Device&) {
  CpuTensor t = cpu::empty(shape, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    cpu::parallel_for(t.numel(), 1 << 12, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        p[i] = from_double<T>(distribution.sample(stream.seed, stream.offset + static_cast<std::uint64_t>(i)));
    });
  });
  return t;
}

Cpu::Primitive Cpu::cast(const Primitive& x, DType dtype) {
  if (x.dtype == dtype) return x;
  const CpuTensor src = cpu::contiguous(x);
  CpuTensor out = cpu::empty(x.shape, dtype);
  visit_dtype(x.dtype, [&]<class S>() {
    visit_dtype(dtype, [&]<class D>() {
      const S* s = src.data<S>();
      D* d = out.data<D>();
      cpu::parallel_for(out.numel(), 1 << 15, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          if constexpr (std::is_same_v<D, bool>) d[i] = to_double(s[i]) != 0.0;
          else if constexpr (std::is_arithmetic_v<S> && std::is_arithmetic_v<D>) d[i] = static_cast<D>(s[i]);
          else d[i] = from_double<D>(to_double(s[i]));
        }
      });
    });
  });
  return out;
}

}  // namespace kiln
