// Tensor<B, Rank, Kind>: the typed façade over a backend's primitive handle. Rank is
// fixed at compile time, the shape at run time; Kind (Float, Int, Bool) decides which
// ops exist. Ops live in mixins, one header per concern (elementwise.hpp, reduce.hpp,
// layout.hpp); this header holds construction, host transfer and rank-changing views.
#pragma once

#include "kiln/backend/backend.hpp"
#include "kiln/tensor/autodiff.hpp"
#include "kiln/tensor/elementwise.hpp"
#include "kiln/tensor/kind.hpp"
#include "kiln/tensor/layout.hpp"
#include "kiln/tensor/reduce.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

// The shape `dims` asks of a reshape of `from`: one dim may be -1, inferred from the element
// count. Not a template, so the checks are compiled once per file, not once per reshape.
inline Shape reshape_shape(const Shape& from, std::span<const std::int64_t> dims) {
  std::vector<std::int64_t> out(dims.begin(), dims.end());
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer < 0, "reshape: only one dim may be -1, got {}", Shape(out));
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(out[i] >= 0, "reshape: invalid dim {} in {}", out[i], Shape(out));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known != 0 && from.numel() % known == 0, "reshape: cannot reshape {} into {}", from, Shape(out));
    out[static_cast<std::size_t>(infer)] = from.numel() / known;
  }
  Shape to(std::move(out));
  KILN_CHECK(to.numel() == from.numel(), "reshape: cannot reshape {} ({} elements) into {} ({} elements)", from,
             from.numel(), to, to.numel());
  return to;
}

template <Backend B, std::size_t D, TensorKind K>
class Tensor : public ElementwiseApi<B, D, K>,
               public ReduceApi<B, D, K>,
               public LayoutApi<B, D, K>,
               public AutodiffApi<B, D, K> {
  static_assert(D >= 1, "kiln::Tensor needs a rank of at least 1 (a scalar is a rank-1 tensor of one element)");

 public:
  using Backend = B;
  using Kind = K;
  using Primitive = typename B::Primitive;
  using Device = typename B::Device;
  using Element = typename K::Element;
  using Dims = std::array<std::int64_t, D>;
  static constexpr std::size_t rank = D;

  // Wraps a primitive; its rank must be D and its dtype must belong to K.
  explicit Tensor(Primitive primitive) : primitive_(std::move(primitive)) {
    const Shape s = B::shape(primitive_);
    KILN_CHECK(s.rank() == D, "Tensor<{}>: a primitive of shape {} has rank {}, not {}", D, s, s.rank(), D);
    KILN_CHECK(K::admits(B::dtype(primitive_)), "Tensor<{}, {}>: dtype {} is not a {} dtype", D, K::name,
               B::dtype(primitive_), K::name);
  }

  const Primitive& primitive() const { return primitive_; }
  // The primitive, taken out of a tensor the caller gives up (std::move(t).into_primitive()):
  // where nothing else holds its buffer, an op may then write its result over it.
  Primitive into_primitive() && { return std::move(primitive_); }
  Shape shape() const { return B::shape(primitive_); }
  Dims dims() const {
    const Shape s = shape();
    Dims out;
    for (std::size_t i = 0; i < D; ++i) out[i] = s[i];
    return out;
  }
  std::int64_t dim(std::int64_t d) const { return shape()[normalize_dim("dim", d, D)]; }
  std::int64_t numel() const { return shape().numel(); }
  DType dtype() const { return B::dtype(primitive_); }
  Device device() const { return B::device(primitive_); }

  // ---- creation
  static Tensor from_data(const TensorData& data, const Device& device = {}) {
    KILN_CHECK(data.shape().rank() == D, "from_data: data of shape {} has rank {}, the tensor has rank {}",
               data.shape(), data.shape().rank(), D);
    const TensorData typed = K::admits(data.dtype()) ? data : data.convert(K::default_dtype);
    return Tensor(B::from_data(typed, device));
  }
  // Tensor<B, 2>::from({{1, 2}, {3, 4}}): rows must be equally long.
  static Tensor from(NestedList<Element, D> values, const Device& device = {}, DType dtype = K::default_dtype) {
    check_dtype("from", dtype);
    std::vector<std::int64_t> dims(D, -1);
    std::vector<double> flat;
    flatten_nested<D>(values, dims, flat, 0);
    for (auto& d : dims) d = d < 0 ? 0 : d;
    const TensorData data = TensorData::from(flat, Shape(dims)).convert(dtype);
    return Tensor(B::from_data(data, device));
  }
  static Tensor full(const Dims& dims, double value, const Device& device = {}, DType dtype = K::default_dtype) {
    check_dtype("full", dtype);
    return Tensor(provided::full<B>(to_shape(dims), value, dtype, device));
  }
  static Tensor zeros(const Dims& dims, const Device& device = {}, DType dtype = K::default_dtype) {
    return full(dims, 0.0, device, dtype);
  }
  static Tensor ones(const Dims& dims, const Device& device = {}, DType dtype = K::default_dtype) {
    return full(dims, 1.0, device, dtype);
  }
  // Draws from the global random stream (kiln::manual_seed sets it): the same numbers on every backend.
  static Tensor random(const Dims& dims, Distribution distribution, const Device& device = {},
                       DType dtype = K::default_dtype) {
    check_dtype("random", dtype);
    const Shape shape = to_shape(dims);
    return Tensor(provided::random<B>(shape, distribution, take_random_stream(static_cast<std::uint64_t>(shape.numel())), dtype,
                            device));
  }
  static Tensor arange(std::int64_t start, std::int64_t end, std::int64_t step = 1, const Device& device = {},
                       DType dtype = K::default_dtype)
    requires(D == 1 && Numeric<K>)
  {
    KILN_CHECK(step != 0, "arange: step must not be zero");
    const std::int64_t n = std::max<std::int64_t>(0, (end - start + step - (step > 0 ? 1 : -1)) / step);
    std::vector<double> values(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = static_cast<double>(start + i * step);
    return Tensor(B::from_data(TensorData::from(values, Shape{n}).convert(dtype), device));
  }
  static Tensor eye(std::int64_t n, const Device& device = {}, DType dtype = K::default_dtype)
    requires(D == 2)
  {
    std::vector<double> values(static_cast<std::size_t>(n * n), 0.0);
    for (std::int64_t i = 0; i < n; ++i) values[static_cast<std::size_t>(i * n + i)] = 1.0;
    return Tensor(B::from_data(TensorData::from(values, Shape{n, n}).convert(dtype), device));
  }
  Tensor zeros_like() const { return Tensor(provided::full<B>(shape(), 0.0, dtype(), device())); }
  Tensor ones_like() const { return Tensor(provided::full<B>(shape(), 1.0, dtype(), device())); }
  Tensor full_like(double value) const { return Tensor(provided::full<B>(shape(), value, dtype(), device())); }
  Tensor random_like(Distribution distribution) const {
    return Tensor(provided::random<B>(shape(), distribution, take_random_stream(static_cast<std::uint64_t>(numel())), dtype(),
                            device()));
  }

  // ---- host transfer
  TensorData into_data() const { return B::into_data(primitive_); }
  template <class T = Element> std::vector<T> to_vec() const { return into_data().template to_vec<T>(); }
  // The value of a one-element tensor.
  Element item() const {
    KILN_CHECK(numel() == 1, "item: the tensor has shape {} ({} elements), not one element", shape(), numel());
    return to_vec<Element>()[0];
  }
  Tensor to_device(const Device& device) const { return Tensor(B::to_device(primitive_, device)); }

  // ---- kind and dtype conversion
  Tensor<B, D, Float> to_float(DType dtype = DType::f32) const { return convert<Float>(dtype); }
  Tensor<B, D, Int> to_int(DType dtype = DType::i64) const { return convert<Int>(dtype); }
  Tensor<B, D, Bool> to_bool() const { return convert<Bool>(DType::boolean); }
  // Another dtype of the same kind (f32 → f64, i64 → i32...).
  Tensor cast(DType dtype) const {
    check_dtype("cast", dtype);
    return Tensor(B::cast(primitive_, dtype));
  }

  // ---- rank-changing views
  // reshape({2, -1, 4}): one dim may be -1 and is inferred.
  template <std::size_t D2> Tensor<B, D2, K> reshape(const std::int64_t (&dims)[D2]) const {
    std::array<std::int64_t, D2> a;
    for (std::size_t i = 0; i < D2; ++i) a[i] = dims[i];
    return reshape<D2>(a);
  }
  template <std::size_t D2> Tensor<B, D2, K> reshape(const std::array<std::int64_t, D2>& dims) const {
    return Tensor<B, D2, K>(B::reshape(primitive_, reshape_shape(shape(), dims)));
  }
  // Merges dims start..end (inclusive) into one: the result has rank D2 = D - (end - start).
  template <std::size_t D2> Tensor<B, D2, K> flatten(std::int64_t start = 0, std::int64_t end = -1) const {
    const std::size_t s = normalize_dim("flatten", start, D), e = normalize_dim("flatten", end, D);
    KILN_CHECK(s <= e, "flatten: start dim {} is after end dim {}", s, e);
    KILN_CHECK(D - (e - s) == D2, "flatten: merging dims {}..{} of a rank-{} tensor gives rank {}, not {}", s, e, D,
               D - (e - s), D2);
    const Shape in = shape();
    std::array<std::int64_t, D2> dims;
    std::size_t j = 0;
    for (std::size_t i = 0; i < D; ++i) {
      if (i > s && i <= e) {
        dims[j - 1] *= in[i];
      } else {
        dims[j++] = in[i];
      }
    }
    return reshape<D2>(dims);
  }
  // Adds leading dims of size 1 up to rank D2 (Burn's unsqueeze).
  template <std::size_t D2> Tensor<B, D2, K> unsqueeze() const {
    static_assert(D2 >= D, "unsqueeze<D2>: D2 must be at least the tensor's rank");
    std::array<std::int64_t, D2> dims;
    dims.fill(1);
    const Shape in = shape();
    for (std::size_t i = 0; i < D; ++i) dims[D2 - D + i] = in[i];
    return reshape<D2>(dims);
  }
  // Inserts a dim of size 1 at position `dim` (which may be D, or negative).
  Tensor<B, D + 1, K> unsqueeze_dim(std::int64_t dim) const {
    const std::size_t d = normalize_dim("unsqueeze_dim", dim, D + 1);
    std::vector<std::int64_t> dims = shape().to_vector();
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(d), 1);
    return Tensor<B, D + 1, K>(B::reshape(primitive_, Shape(dims)));
  }
  // Removes dim `dim`, which must have size 1.
  Tensor<B, D - 1, K> squeeze_dim(std::int64_t dim) const
    requires(D > 1)
  {
    const std::size_t d = normalize_dim("squeeze_dim", dim, D);
    KILN_CHECK(shape()[d] == 1, "squeeze_dim: dim {} of shape {} has size {}, not 1", d, shape(), shape()[d]);
    std::vector<std::int64_t> dims = shape().to_vector();
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(d));
    return Tensor<B, D - 1, K>(B::reshape(primitive_, Shape(dims)));
  }

  static Shape to_shape(const Dims& dims) { return Shape(std::vector<std::int64_t>(dims.begin(), dims.end())); }

 private:
  template <class K2> Tensor<B, D, K2> convert(DType dtype) const {
    KILN_CHECK(K2::admits(dtype), "cast: {} is not a {} dtype", dtype, K2::name);
    return Tensor<B, D, K2>(B::cast(primitive_, dtype));
  }
  static void check_dtype(const char* op, DType dtype) {
    KILN_CHECK(K::admits(dtype), "{}: {} is not a {} dtype", op, dtype, K::name);
  }
  template <std::size_t Depth, class List>
  static void flatten_nested(const List& list, std::vector<std::int64_t>& dims, std::vector<double>& flat,
                             std::size_t level) {
    const auto n = static_cast<std::int64_t>(list.size());
    KILN_CHECK(dims[level] < 0 || dims[level] == n,
               "from: nested lists are ragged at depth {} (lengths {} and {})", level, dims[level], n);
    dims[level] = n;
    for (const auto& item : list) {
      if constexpr (Depth == 1) flat.push_back(static_cast<double>(item));
      else flatten_nested<Depth - 1>(item, dims, flat, level + 1);
    }
  }

  Primitive primitive_;
};

}  // namespace kiln
