// A module's tensors: Param<T> (trained) and Buffer<T> (state that is saved but not
// trained, like BatchNorm's running statistics), T a kiln::Tensor. A Param has an id that
// stays the same when its value is replaced (by an optimizer step, loading, moving to a
// device), so optimizer state follows the parameter, not the tensor.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>

namespace kiln::nn {

using ParamId = std::uint64_t;

namespace detail {
inline ParamId next_param_id() {
  static std::atomic<ParamId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

template <class T> struct TensorTraits;
template <class B, std::size_t D, class K> struct TensorTraits<Tensor<B, D, K>> {
  using Backend = B;
  static constexpr std::size_t rank = D;
};
}  // namespace detail

template <class T> class Param {
 public:
  using Tensor = T;
  using Backend = typename detail::TensorTraits<T>::Backend;

  // An empty parameter: a module not initialized yet (modules are default-constructible so
  // that a module of another backend can be filled in; see nn::valid).
  Param() = default;
  // A fresh parameter (new id). On an autodiff backend its value becomes a leaf that
  // requires grad unless frozen (trainable = false).
  explicit Param(T value, bool trainable = true)
      : id_(detail::next_param_id()), value_(prepared(std::move(value), trainable)), trainable_(trainable) {}

  ParamId id() const { return id_; }
  bool empty() const { return !value_.has_value(); }
  bool trainable() const { return trainable_; }

  const T& val() const {
    KILN_CHECK(value_.has_value(), "nn::Param: the parameter is empty (the module was not initialized)");
    return *value_;
  }
  const T& operator*() const { return val(); }
  const T* operator->() const { return &val(); }

  // A new value for the same parameter (same id, same trainability).
  void replace(T value) {
    KILN_CHECK(id_ != 0, "nn::Param: replace on an empty parameter (the module was not initialized)");
    value_ = prepared(std::move(value), trainable_);
  }
  // Moves the value out and leaves the parameter empty until replace() gives it the next
  // one: an optimizer takes it so that, nothing else holding its buffer, the update may
  // write over it.
  T take() {
    KILN_CHECK(value_.has_value(), "nn::Param: take from an empty parameter (the module was not initialized)");
    T value = std::move(*value_);
    value_.reset();
    return value;
  }
  // Freezes (false) or unfreezes the parameter: a frozen one gets no gradient.
  void set_trainable(bool trainable) {
    trainable_ = trainable;
    if (value_) value_ = prepared(std::move(*value_), trainable);
  }
  // This parameter as one of another backend: same id and trainability, value `value`
  // (used by nn::valid and moves between backends).
  template <class T2> Param<T2> with_value(T2 value) const {
    Param<T2> p;
    p.id_ = id_;
    p.trainable_ = trainable_;
    p.value_ = Param<T2>::prepared(std::move(value), trainable_);
    return p;
  }

 private:
  template <class> friend class Param;

  static T prepared(T value, bool trainable) {
    if constexpr (AutodiffBackend<Backend>) return value.detach().set_require_grad(trainable);
    else return value;
  }

  ParamId id_ = 0;
  std::optional<T> value_;
  bool trainable_ = true;
};

template <class T> class Buffer {
 public:
  using Tensor = T;
  using Backend = typename detail::TensorTraits<T>::Backend;

  Buffer() = default;
  explicit Buffer(T value) : value_(detached(std::move(value))) {}

  bool empty() const { return !value_.has_value(); }
  const T& val() const {
    KILN_CHECK(value_.has_value(), "nn::Buffer: the buffer is empty (the module was not initialized)");
    return *value_;
  }
  const T& operator*() const { return val(); }
  const T* operator->() const { return &val(); }
  // A new value; on an autodiff backend cut from the graph (buffers get no gradient).
  void replace(T value) { value_ = detached(std::move(value)); }

 private:
  static T detached(T value) {
    if constexpr (AutodiffBackend<Backend>) return value.detach();
    else return value;
  }

  std::optional<T> value_;
};

// A module's train / eval switch (Dropout, BatchNorm): listed in KILN_MODULE like a field,
// set for the whole tree by nn::train / nn::eval.
struct Mode {
  bool training = true;
};

}  // namespace kiln::nn
