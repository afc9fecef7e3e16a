// Reductions, scans, sorting and matmul on Tensor. Reductions over one dim keep it
// with size 1 (as Burn does; squeeze_dim removes it); reductions over all elements
// return a rank-1 tensor of one element. var/std/norm/logsumexp/any/all are composites.
#pragma once

#include "kiln/tensor/fwd.hpp"

#include <cmath>
#include <limits>
#include <utility>

namespace kiln {

template <class B, std::size_t D, class K> class ReduceApi : public TensorMixin<B, D, K, ReduceApi<B, D, K>> {
  using Base = TensorMixin<B, D, K, ReduceApi<B, D, K>>;
  using typename Base::Self;
  using Base::prim;
  using Base::self;
  using Base::wrap;
  using Scalar = Tensor<B, 1, K>;
  using IntTensor = Tensor<B, D, Int>;

  std::int64_t checked_dim(const char* op, std::int64_t dim) const {
    return static_cast<std::int64_t>(normalize_dim(op, dim, D));
  }

 public:
  // ---- over all elements → shape [1]
  Scalar sum() const requires Numeric<K> { return Scalar(provided::reduce_all<B>(prim(), ops::ReduceOp::sum)); }
  Scalar prod() const requires Numeric<K> { return Scalar(provided::reduce_all<B>(prim(), ops::ReduceOp::prod)); }
  Scalar mean() const requires std::same_as<K, Float> { return Scalar(provided::reduce_all<B>(prim(), ops::ReduceOp::mean)); }
  Scalar max() const requires Numeric<K> { return Scalar(provided::reduce_all<B>(prim(), ops::ReduceOp::max)); }
  Scalar min() const requires Numeric<K> { return Scalar(provided::reduce_all<B>(prim(), ops::ReduceOp::min)); }

  // ---- along one dim, kept with size 1
  Self sum_dim(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::reduce(prim(), ops::ReduceOp::sum, checked_dim("sum_dim", dim)));
  }
  Self prod_dim(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::reduce(prim(), ops::ReduceOp::prod, checked_dim("prod_dim", dim)));
  }
  Self mean_dim(std::int64_t dim) const requires std::same_as<K, Float> {
    return wrap(B::reduce(prim(), ops::ReduceOp::mean, checked_dim("mean_dim", dim)));
  }
  Self max_dim(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::reduce(prim(), ops::ReduceOp::max, checked_dim("max_dim", dim)));
  }
  Self min_dim(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::reduce(prim(), ops::ReduceOp::min, checked_dim("min_dim", dim)));
  }
  IntTensor argmax(std::int64_t dim) const requires Numeric<K> {
    return IntTensor(B::arg_reduce(prim(), ops::ArgReduceOp::argmax, checked_dim("argmax", dim)));
  }
  IntTensor argmin(std::int64_t dim) const requires Numeric<K> {
    return IntTensor(B::arg_reduce(prim(), ops::ArgReduceOp::argmin, checked_dim("argmin", dim)));
  }
  // {max values, their indices}; ties give the first index, a NaN is both the max and its index.
  // The values come from max_dim rather than a gather at the indices: the same result, one
  // primitive fewer for a backend to need.
  std::pair<Self, IntTensor> max_dim_with_indices(std::int64_t dim) const requires Numeric<K> {
    return {max_dim(dim), argmax(dim)};
  }
  std::pair<Self, IntTensor> min_dim_with_indices(std::int64_t dim) const requires Numeric<K> {
    return {min_dim(dim), argmin(dim)};
  }

  // Variance with Bessel's correction by default (correction = 1), as torch.var.
  Self var(std::int64_t dim, std::int64_t correction = 1) const requires std::same_as<K, Float> {
    const std::int64_t n = self().dim(dim);
    const Self centered = self().sub(mean_dim(dim));
    return centered.mul(centered).sum_dim(dim).div(static_cast<double>(std::max<std::int64_t>(n - correction, 0)));
  }
  Self std(std::int64_t dim, std::int64_t correction = 1) const requires std::same_as<K, Float> {
    return var(dim, correction).sqrt();
  }
  // The p-norm along dim: (sum |x|^p)^(1/p); p = inf gives max |x|, p = 0 counts non-zeros.
  Self norm_dim(double p, std::int64_t dim) const requires std::same_as<K, Float> {
    const Self a = self().abs();
    if (std::isinf(p)) return p > 0 ? a.max_dim(dim) : a.min_dim(dim);
    if (p == 0.0) return a.ne(0.0).to_float(self().dtype()).sum_dim(dim);
    if (p == 1.0) return a.sum_dim(dim);
    if (p == 2.0) return a.mul(a).sum_dim(dim).sqrt();
    return a.pow(p).sum_dim(dim).pow(1.0 / p);
  }
  Scalar norm(double p = 2.0) const requires std::same_as<K, Float> {
    return self().template reshape<1>({-1}).norm_dim(p, 0);
  }
  // log(sum(exp(x))) along dim, shifted by the max for stability (an all -inf slice gives -inf).
  Self logsumexp(std::int64_t dim) const requires std::same_as<K, Float> {
    const Self m = max_dim(dim);
    const Self shift = m.mask_fill(m.isinf(), 0.0);
    return self().sub(shift).exp().sum_dim(dim).log().add(shift);
  }

  // ---- scans
  Self cumsum(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::cumulative(prim(), ops::CumulativeOp::sum, checked_dim("cumsum", dim)));
  }
  Self cumprod(std::int64_t dim) const requires Numeric<K> {
    return wrap(B::cumulative(prim(), ops::CumulativeOp::prod, checked_dim("cumprod", dim)));
  }

  // ---- Bool reductions (any kind: non-zero counts as true)
  Tensor<B, 1, Bool> any() const { return Tensor<B, 1, Bool>(provided::reduce_all<B>(as_bool(), ops::ReduceOp::max)); }
  Tensor<B, 1, Bool> all() const { return Tensor<B, 1, Bool>(provided::reduce_all<B>(as_bool(), ops::ReduceOp::min)); }
  Tensor<B, D, Bool> any_dim(std::int64_t dim) const {
    return Tensor<B, D, Bool>(B::reduce(as_bool(), ops::ReduceOp::max, checked_dim("any_dim", dim)));
  }
  Tensor<B, D, Bool> all_dim(std::int64_t dim) const {
    return Tensor<B, D, Bool>(B::reduce(as_bool(), ops::ReduceOp::min, checked_dim("all_dim", dim)));
  }

  // ---- sorting (stable; NaN sorts last ascending, first descending, as in PyTorch)
  std::pair<Self, IntTensor> sort_with_indices(std::int64_t dim = -1, bool descending = false) const
    requires Numeric<K>
  {
    auto [values, indices] = B::sort(prim(), checked_dim("sort", dim), descending);
    return {wrap(std::move(values)), IntTensor(std::move(indices))};
  }
  Self sort(std::int64_t dim = -1, bool descending = false) const requires Numeric<K> {
    return sort_with_indices(dim, descending).first;
  }
  IntTensor argsort(std::int64_t dim = -1, bool descending = false) const requires Numeric<K> {
    return sort_with_indices(dim, descending).second;
  }
  // The k largest elements along dim, largest first.
  // Ties keep their input order (the sort is stable), NaN counts as the largest.
  std::pair<Self, IntTensor> topk_with_indices(std::int64_t k, std::int64_t dim = -1) const requires Numeric<K> {
    const std::int64_t d = checked_dim("topk", dim);
    const std::int64_t size = self().shape()[static_cast<std::size_t>(d)];
    KILN_CHECK(k >= 0 && k <= size, "topk: k = {} is out of range for dim {} of shape {} (expected 0..{})", k, d,
               self().shape(), size);
    auto [values, indices] = sort_with_indices(d, true);
    return {values.narrow(d, 0, k), indices.narrow(d, 0, k)};
  }
  Self topk(std::int64_t k, std::int64_t dim = -1) const requires Numeric<K> { return topk_with_indices(k, dim).first; }

  // ---- matmul: [..., m, k] @ [..., k, n] with broadcast batch dims
  Self matmul(const Self& other) const requires std::same_as<K, Float> && (D >= 2) {
    const Shape a = self().shape(), b = other.shape();
    KILN_CHECK(a[D - 1] == b[D - 2], "matmul: inner dims do not match: {} @ {} ({} vs {})", a, b, a[D - 1], b[D - 2]);
    return wrap(B::matmul(prim(), other.primitive()));
  }

 private:
  typename B::Primitive as_bool() const {
    return std::same_as<K, Bool> ? prim() : B::cast(prim(), DType::boolean);
  }
};

}  // namespace kiln
