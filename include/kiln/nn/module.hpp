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

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/nn/param.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

// Names the fields of a module's state, in order (the order of saving and printing);
// KILN_MODULE() for a module without state (a pooling layer, an activation). It must name
// every data member: a member it leaves out would never be trained, saved or converted,
// so visit() checks at compile time, from the members' offsets and sizes, that the named
// members tile the whole object (kiln::nn::detail::unlisted_field_at).
#define KILN_MODULE(...)                                                                        \
  template <class KilnWalker> void visit(KilnWalker& kiln_walker) {                             \
    KILN_DETAIL_CHECK_FIELDS(__VA_ARGS__)                                                       \
    ::kiln::nn::detail::visit_fields(kiln_walker, #__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__);     \
  }                                                                                             \
  template <class KilnWalker> void visit(KilnWalker& kiln_walker) const {                       \
    KILN_DETAIL_CHECK_FIELDS(__VA_ARGS__)                                                       \
    ::kiln::nn::detail::visit_fields(kiln_walker, #__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__);     \
  }

// The check of KILN_MODULE, in visit()'s body, where the class is complete. offsetof on a
// type that is not standard-layout is conditionally supported; GCC and Clang support it
// and warn (-Winvalid-offsetof), which the pragmas silence for this one use.
#define KILN_DETAIL_CHECK_FIELDS(...)                                                            \
  {                                                                                             \
    using KilnSelf = std::remove_cvref_t<decltype(*this)>;                                      \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Winvalid-offsetof\"")       \
    constexpr std::size_t kiln_unlisted = ::kiln::nn::detail::unlisted_field_at<KilnSelf>(      \
        std::array<::kiln::nn::detail::FieldSpan,                                               \
                   ::kiln::nn::detail::count_fields(#__VA_ARGS__)>{                             \
            KILN_DETAIL_FOR_EACH(KILN_DETAIL_FIELD_SPAN, __VA_ARGS__)});                        \
    _Pragma("GCC diagnostic pop")                                                               \
    static_assert(::kiln::nn::detail::ListsEveryField<kiln_unlisted>::value,                    \
                  "KILN_MODULE(...) must list every data member of the module: the member at "   \
                  "byte offset N (the note ListsEveryField<N> names N) is not listed: it would " \
                  "never be trained, saved or converted");                                        \
  }
#define KILN_DETAIL_FIELD_SPAN(field)                                                            \
  ::kiln::nn::detail::FieldSpan{offsetof(KilnSelf, field), sizeof(KilnSelf::field),            \
                                alignof(decltype(KilnSelf::field))},

// KILN_DETAIL_FOR_EACH(macro, a, b, c) → macro(a) macro(b) macro(c), for up to 256 arguments:
// each argument takes a rescan, and each KILN_DETAIL_EXPAND level rescans four times as often
// as the one below it (three levels held about 85 arguments; modules generated from ONNX
// models have more).
#define KILN_DETAIL_PARENS ()
#define KILN_DETAIL_EXPAND(...) KILN_DETAIL_EXPAND4(KILN_DETAIL_EXPAND4(KILN_DETAIL_EXPAND4(KILN_DETAIL_EXPAND4(__VA_ARGS__))))
#define KILN_DETAIL_EXPAND4(...) KILN_DETAIL_EXPAND3(KILN_DETAIL_EXPAND3(KILN_DETAIL_EXPAND3(KILN_DETAIL_EXPAND3(__VA_ARGS__))))
#define KILN_DETAIL_EXPAND3(...) KILN_DETAIL_EXPAND2(KILN_DETAIL_EXPAND2(KILN_DETAIL_EXPAND2(KILN_DETAIL_EXPAND2(__VA_ARGS__))))
#define KILN_DETAIL_EXPAND2(...) KILN_DETAIL_EXPAND1(KILN_DETAIL_EXPAND1(KILN_DETAIL_EXPAND1(KILN_DETAIL_EXPAND1(__VA_ARGS__))))
#define KILN_DETAIL_EXPAND1(...) __VA_ARGS__
#define KILN_DETAIL_FOR_EACH(macro, ...) __VA_OPT__(KILN_DETAIL_EXPAND(KILN_DETAIL_FOR_EACH_STEP(macro, __VA_ARGS__)))
#define KILN_DETAIL_FOR_EACH_STEP(macro, first, ...) \
  macro(first) __VA_OPT__(KILN_DETAIL_FOR_EACH_AGAIN KILN_DETAIL_PARENS(macro, __VA_ARGS__))
#define KILN_DETAIL_FOR_EACH_AGAIN() KILN_DETAIL_FOR_EACH_STEP

namespace kiln::nn {

namespace detail {
// "a.b" from "a" and "b" ("b" when "a" is empty), and "a.3": the dotted paths of the walk.
inline std::string join_path(std::string_view parent, std::string_view name) {
  std::string path;
  path.reserve(parent.size() + name.size() + 1);
  path += parent;
  if (!parent.empty()) path += '.';
  path += name;
  return path;
}
inline std::string join_path(std::string_view parent, std::size_t index) {
  return join_path(parent, std::to_string(index));
}

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
    const std::string path = detail::join_path(path_, name);
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
      for (std::size_t i = 0; i < x.size(); ++i) field(detail::join_path(name, i), x[i]);
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
    self().on_vector(detail::join_path(path_, name), vector);
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

// Where a member lies in its module: [offset, offset + size), aligned to `align`.
struct FieldSpan {
  std::size_t offset = 0, size = 0, align = 1;
};
inline constexpr std::size_t no_unlisted_field = static_cast<std::size_t>(-1);

// The number of names in KILN_MODULE's stringized list ("" → 0, "a, b" → 2).
constexpr std::size_t count_fields(std::string_view names) {
  if (names.find_first_not_of(' ') == std::string_view::npos) return 0;
  std::size_t n = 1;
  for (const char c : names) n += c == ',';
  return n;
}

// The byte offset of the first member of M that `listed` does not cover, or
// no_unlisted_field. Listed members, in address order, must follow one another with no
// more room between them than the next one's alignment needs, start at the first byte
// (after the vtable pointer of a polymorphic module) and end where the object's own tail
// padding begins. An unlisted member smaller than the padding it hides in (a bool after
// an int) cannot be seen this way; a Param, Buffer or module, aligned to 8 bytes and at
// least 8 long, always can.
template <class M, std::size_t N> constexpr std::size_t unlisted_field_at(std::array<FieldSpan, N> listed) {
  for (std::size_t i = 1; i < N; ++i)  // insertion sort by offset: constexpr, N is small
    for (std::size_t j = i; j > 0 && listed[j].offset < listed[j - 1].offset; --j) std::swap(listed[j], listed[j - 1]);
  const auto align_up = [](std::size_t at, std::size_t align) { return (at + align - 1) / align * align; };
  std::size_t end = std::is_polymorphic_v<M> ? sizeof(void*) : 0;
  for (const FieldSpan& field : listed) {
    if (field.offset > align_up(end, field.align)) return end;
    end = field.offset + field.size > end ? field.offset + field.size : end;
  }
  // An empty module is one byte long with nothing in it.
  if (N == 0) return sizeof(M) == 1 && std::is_empty_v<M> ? no_unlisted_field : 0;
  return sizeof(M) > align_up(end, alignof(M)) ? end : no_unlisted_field;
}
// Named so that a failed check prints the offset: "ListsEveryField<48>::value".
template <std::size_t UnlistedOffset> struct ListsEveryField {
  static constexpr bool value = UnlistedOffset == no_unlisted_field;
};

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

// ---------------------------------------------------------------- the state, tensor types erased

// One Param or Buffer of a module, its tensor type erased: what the module-wide functions
// that need no tensor type work on (num_params, freeze, train / eval, summary, and
// nn/state.hpp's state_dict and load_state_dict). One walk of the module lists its slots
// (detail::state_of); those functions are compiled once, in libkiln_store, instead of once
// per module type and function.
struct Slot {
  struct Ops {
    Shape (*shape)(const void*);
    DType (*dtype)(const void*);
    TensorData (*into_data)(const void*);
    // a new value: `data` reshaped to the slot's shape, converted to its dtype, on its device
    void (*assign)(void*, const TensorData&);
    bool (*trainable)(const void*);       // false for buffers
    void (*set_trainable)(void*, bool);  // nothing for buffers
  };

  std::string path;
  bool param = true;       // a Param, or a Buffer
  void* object = nullptr;  // the Param<T> or Buffer<T>
  const Ops* ops = nullptr;

  Shape shape() const { return ops->shape(object); }
  DType dtype() const { return ops->dtype(object); }
  TensorData into_data() const { return ops->into_data(object); }
  void assign(const TensorData& data) const { ops->assign(object, data); }
  bool trainable() const { return ops->trainable(object); }
  void set_trainable(bool trainable) const { ops->set_trainable(object, trainable); }
};

// A module's slots (params and buffers, in walk order) and its Modes.
struct ModuleState {
  std::vector<Slot> slots;
  std::vector<Mode*> modes;
};

namespace detail {
// The Ops of a Param<T> or Buffer<T>: one small table per tensor type.
template <class S> struct SlotOps {
  using T = typename S::Tensor;
  static S& at(void* s) { return *static_cast<S*>(s); }
  static const S& at(const void* s) { return *static_cast<const S*>(s); }
  static constexpr Slot::Ops ops{
      [](const void* s) { return at(s)->shape(); },
      [](const void* s) { return at(s)->dtype(); },
      [](const void* s) { return at(s)->into_data(); },
      [](void* s, const TensorData& data) {
        S& slot = at(s);
        slot.replace(T::from_data(data.reshaped(slot->shape()).convert(slot->dtype()), slot->device()));
      },
      [](const void* s) {
        if constexpr (IsParam<S>::value) return at(s).trainable();
        else return false;
      },
      [](void* s, bool trainable) {
        if constexpr (IsParam<S>::value) at(s).set_trainable(trainable);
      }};
};

struct StateCollector : Walker<StateCollector> {
  ModuleState state;
  template <class P> void on_param(const std::string& path, P& p) {
    state.slots.push_back({path, true, &p, &SlotOps<P>::ops});
  }
  template <class P> void on_buffer(const std::string& path, P& b) {
    state.slots.push_back({path, false, &b, &SlotOps<P>::ops});
  }
  void on_mode(const std::string&, Mode& m) { state.modes.push_back(&m); }
};

// The slots and Modes of `module`: one walk, instantiated once per module type (a const
// module is walked as the same type; the functions that take one only read its slots).
template <Module M> ModuleState state_of(M& module) {
  StateCollector collector;
  collector.walk(const_cast<std::remove_const_t<M>&>(module));
  return std::move(collector.state);
}

// The non-template halves of the functions below (src/store/module.cpp).
std::int64_t num_params(const ModuleState& state);
void freeze(const ModuleState& state, bool frozen);
void set_training(const ModuleState& state, bool training);
std::string summary(const ModuleState& state);
}  // namespace detail

// The number of parameter elements (frozen ones included, buffers not), as PyTorch's
// sum(p.numel() for p in m.parameters()).
template <Module M> std::int64_t num_params(const M& module) { return detail::num_params(detail::state_of(module)); }

// Freezes every parameter (no gradients, optimizers skip them) or unfreezes them.
template <Module M> void freeze(M& module, bool frozen = true) { detail::freeze(detail::state_of(module), frozen); }

// Training mode (Dropout drops, BatchNorm uses batch statistics) or evaluation mode.
template <Module M> void train(M& module, bool training = true) {
  detail::set_training(detail::state_of(module), training);
}
template <Module M> void eval(M& module) { train(module, false); }

// The module on another device of its backend: every parameter and buffer moved,
// parameter ids kept.
template <Module M, class Device> void to_device(M& module, const Device& device) {
  for_each_param(module, [&device](const std::string&, auto& p) { p.replace(p.val().to_device(device)); });
  for_each_buffer(module, [&device](const std::string&, auto& b) { b.replace(b.val().to_device(device)); });
}

// A table of the module's parameters and buffers: path, shape, dtype, elements; and the total.
template <Module M> std::string summary(const M& module) { return detail::summary(detail::state_of(module)); }

}  // namespace kiln::nn
