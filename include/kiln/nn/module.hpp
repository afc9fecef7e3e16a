// The module system. A module is a plain struct, generic over its backend, whose fields
// are Params, Buffers, Modes, other modules, settings (plain values: sizes, eps, options
// structs), and std::optional / std::vector / std::array of those; one line names them all:
//
//   template <class B> struct Mlp {
//     nn::Linear<B> hidden, out;
//     KILN_MODULE(hidden, out)
//     Tensor<B, 2> forward(const Tensor<B, 2>& x) const { return out.forward(hidden.forward(x).relu()); }
//   };
//
// KILN_MODULE defines visit(walker), which hands each field, with its name, to a Walker.
// Settings are listed too: they are not saved, but nn::valid copies them, so a module it
// converts keeps its strides, heads and eps (a setting left out would fall back to its
// default there).
// Everything that goes over a module's state is a Walker: the dotted names of every
// parameter (hidden.weight, layers.0.attn.q.bias...), counting, freezing, train / eval,
// saving and loading (nn/state.hpp), moving to another backend (nn::valid).
#pragma once

#include "kiln/nn/param.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// Names the fields of a module's state, in order (the order of saving and printing);
// KILN_MODULE() for a module without state (a pooling layer, an activation).
#define KILN_MODULE(...)                                                                        \
  template <class KilnWalker> void visit(KilnWalker& kiln_walker) {                             \
    ::kiln::nn::detail::visit_fields(kiln_walker, #__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__);     \
  }                                                                                             \
  template <class KilnWalker> void visit(KilnWalker& kiln_walker) const {                       \
    ::kiln::nn::detail::visit_fields(kiln_walker, #__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__);     \
  }

namespace kiln::nn {

namespace detail {
template <class X> struct IsParam : std::false_type {};
template <class T> struct IsParam<Param<T>> : std::true_type {};
template <class X> struct IsBuffer : std::false_type {};
template <class T> struct IsBuffer<Buffer<T>> : std::true_type {};
template <class X> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};
template <class X> struct IsSequence : std::false_type {};
template <class T> struct IsSequence<std::vector<T>> : std::true_type {};
template <class T, std::size_t N> struct IsSequence<std::array<T, N>> : std::true_type {};
template <class X> struct IsVector : std::false_type {};
template <class T> struct IsVector<std::vector<T>> : std::true_type {};
template <class X> concept TensorLike = requires(const X& x) { x.primitive(); };
// A plain value a module is configured with: the same type whatever the backend.
template <class X> concept Setting = std::is_copy_assignable_v<X> && std::is_default_constructible_v<X>;
struct NullWalker;
}  // namespace detail

// A type whose state KILN_MODULE names.
template <class M>
concept Module = requires(std::remove_const_t<M>& m, detail::NullWalker& w) { m.visit(w); };

// Walks a module's fields depth first, in KILN_MODULE order, with dotted paths. Derived
// walkers (CRTP) define what they need of:
//   on_param(path, Param<T>&), on_buffer(path, Buffer<T>&), on_mode(path, Mode&)
//   on_vector(path, std::vector<X>&)     before the elements (e.g. to resize them)
//   on_optional(path, std::optional<X>&) before the value, present or not (e.g. to emplace it)
//   on_setting(path, X&)                 a plain value (an int, a double, an options struct)
// with const references when the module walked is const.
template <class Derived> class Walker {
 public:
  template <class M> void walk(M& module) { module.visit(self()); }

  // Called by KILN_MODULE's visit for each field.
  template <class X> void field(std::string_view name, X& x) {
    using T = std::remove_const_t<X>;
    const std::string path = path_.empty() ? std::string(name) : path_ + "." + std::string(name);
    if constexpr (detail::IsParam<T>::value) {
      self().on_param(path, x);
    } else if constexpr (detail::IsBuffer<T>::value) {
      self().on_buffer(path, x);
    } else if constexpr (std::is_same_v<T, Mode>) {
      self().on_mode(path, x);
    } else if constexpr (detail::IsOptional<T>::value) {
      self().on_optional(path, x);
      if (x) field(name, *x);
    } else if constexpr (detail::IsSequence<T>::value) {
      if constexpr (detail::IsVector<T>::value) self().on_vector(path, x);
      for (std::size_t i = 0; i < x.size(); ++i) field(fmt::format("{}.{}", name, i), x[i]);
    } else if constexpr (Module<T>) {
      const std::string saved = path_;
      path_ = path;
      x.visit(self());
      path_ = saved;
    } else if constexpr (detail::TensorLike<T>) {
      static_assert(sizeof(T) == 0,
                    "KILN_MODULE lists a bare Tensor: wrap it in Param (trained) or Buffer (state that is not trained)");
    } else if constexpr (detail::Setting<T>) {
      self().on_setting(path, x);
    } else {
      static_assert(sizeof(T) == 0,
                    "KILN_MODULE lists a field that is not a Param, Buffer, Mode, module, setting, or an optional, "
                    "vector or array of those");
    }
  }

  // For a module that visits a vector's elements under names of its own (Lstm's
  // weight_ih_l0, weight_ih_l0_reverse...): reports the vector itself, as field does for
  // vectors it walks, so that walkers can size it (nn::valid).
  template <class V> void sized(std::string_view name, V& vector) {
    self().on_vector(path_.empty() ? std::string(name) : path_ + "." + std::string(name), vector);
  }

  // Defaults: nothing.
  template <class P> void on_param(const std::string&, P&) {}
  template <class P> void on_buffer(const std::string&, P&) {}
  template <class P> void on_mode(const std::string&, P&) {}
  template <class V> void on_vector(const std::string&, V&) {}
  template <class O> void on_optional(const std::string&, O&) {}
  template <class X> void on_setting(const std::string&, X&) {}

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  std::string path_;
};

namespace detail {
struct NullWalker : Walker<NullWalker> {};

// Splits KILN_MODULE's stringized field list ("weight, bias") and visits each field.
template <class W, class... Fields>
void visit_fields([[maybe_unused]] W& walker, std::string_view names, Fields&... fields) {
  [[maybe_unused]] auto next_name = [&names]() {
    const std::size_t comma = names.find(',');
    std::string_view name = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    return name;
  };
  (walker.field(next_name(), fields), ...);
}

// Calls f(path, param) for every Param (const or not, as the module is).
template <class F> struct ParamWalker : Walker<ParamWalker<F>> {
  F f;
  explicit ParamWalker(F fn) : f(std::move(fn)) {}
  template <class P> void on_param(const std::string& path, P& p) { f(path, p); }
};
template <class F> struct BufferWalker : Walker<BufferWalker<F>> {
  F f;
  explicit BufferWalker(F fn) : f(std::move(fn)) {}
  template <class P> void on_buffer(const std::string& path, P& p) { f(path, p); }
};
template <class F> struct ModeWalker : Walker<ModeWalker<F>> {
  F f;
  explicit ModeWalker(F fn) : f(std::move(fn)) {}
  template <class P> void on_mode(const std::string& path, P& m) { f(path, m); }
};
}  // namespace detail

// f(path, param) for every parameter, in KILN_MODULE order.
template <Module M, class F> void for_each_param(M& module, F&& f) {
  detail::ParamWalker<std::decay_t<F>> walker{std::forward<F>(f)};
  walker.walk(module);
}
// f(path, buffer) for every buffer.
template <Module M, class F> void for_each_buffer(M& module, F&& f) {
  detail::BufferWalker<std::decay_t<F>> walker{std::forward<F>(f)};
  walker.walk(module);
}

// The number of parameter elements (frozen ones included, buffers not), as PyTorch's
// sum(p.numel() for p in m.parameters()).
template <Module M> std::int64_t num_params(const M& module) {
  std::int64_t n = 0;
  for_each_param(module, [&n](const std::string&, const auto& p) { n += p.val().numel(); });
  return n;
}

// Freezes every parameter (no gradients, optimizers skip them) or unfreezes them.
template <Module M> void freeze(M& module, bool frozen = true) {
  for_each_param(module, [frozen](const std::string&, auto& p) { p.set_trainable(!frozen); });
}

// Training mode (Dropout drops, BatchNorm uses batch statistics) or evaluation mode.
template <Module M> void train(M& module, bool training = true) {
  detail::ModeWalker walker{[training](const std::string&, Mode& m) { m.training = training; }};
  walker.walk(module);
}
template <Module M> void eval(M& module) { train(module, false); }

// The module on another device of its backend: every parameter and buffer moved,
// parameter ids kept.
template <Module M, class Device> void to_device(M& module, const Device& device) {
  for_each_param(module, [&device](const std::string&, auto& p) { p.replace(p.val().to_device(device)); });
  for_each_buffer(module, [&device](const std::string&, auto& b) { b.replace(b.val().to_device(device)); });
}

// A table of the module's parameters and buffers: path, shape, dtype, elements; and the total.
template <Module M> std::string summary(const M& module) {
  std::string out;
  std::int64_t total = 0;
  auto row = [&](const std::string& path, const auto& tensor, std::string_view kind) {
    out += fmt::format("{:<40} {:<20} {:<5} {:>10}{}\n", path, fmt::format("{}", tensor.shape()),
                       dtype_name(tensor.dtype()), tensor.numel(), kind);
  };
  for_each_param(module, [&](const std::string& path, const auto& p) {
    row(path, p.val(), p.trainable() ? "" : "  (frozen)");
    total += p.val().numel();
  });
  for_each_buffer(module, [&](const std::string& path, const auto& b) { row(path, b.val(), "  (buffer)"); });
  out += fmt::format("{} parameters\n", total);
  return out;
}

}  // namespace kiln::nn
