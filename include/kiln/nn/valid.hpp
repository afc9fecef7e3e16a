// nn::valid: a module trained on Autodiff<B> as the same module on B, for inference (no
// graph is recorded; the values are shared, not copied). Parameter ids and trainability
// carry over, so an optimizer's state still matches if the module goes back.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/nn/module.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::nn {

namespace detail {

// The type a field of M<B> has in M<Autodiff<B>>: tensors move to Autodiff<B>, every other
// field (settings, Modes) keeps its type.
template <class X> struct OnAutodiff {
  using type = X;
};
template <class B, std::size_t D, class K> struct OnAutodiff<Param<Tensor<B, D, K>>> {
  using type = Param<Tensor<Autodiff<B>, D, K>>;
};
template <class B, std::size_t D, class K> struct OnAutodiff<Buffer<Tensor<B, D, K>>> {
  using type = Buffer<Tensor<Autodiff<B>, D, K>>;
};

// One address per type, to check that the two walks meet the same type at each step.
template <class X> inline constexpr char type_tag = 0;

// What the walk of the trained module met, in walk order: each field's address and type,
// and the length of each vector or the presence of each optional. M<B> and M<Autodiff<B>>
// instantiate the same KILN_MODULE list, so the walk of the new module meets the same
// fields in the same order, once its vectors and optionals are shaped alike (which the
// walk does before it enters them).
struct Step {
  const void* field = nullptr;
  const void* type = nullptr;
  std::size_t count = 0;  // a vector's length, or whether an optional holds a value
};

struct RecordSteps : Walker<RecordSteps> {
  std::vector<Step> steps;
  template <class X> void put(const X& x) { steps.push_back({&x, &type_tag<X>, 0}); }
  template <class P> void on_param(const std::string&, const P& p) { put(p); }
  template <class P> void on_buffer(const std::string&, const P& b) { put(b); }
  void on_mode(const std::string&, const Mode& m) { put(m); }
  template <class X> void on_setting(const std::string&, const X& x) { put(x); }
  template <class V> void on_vector(const std::string&, const V& v) { steps.push_back({nullptr, nullptr, v.size()}); }
  template <class O> void on_optional(const std::string&, const O& o) {
    steps.push_back({nullptr, nullptr, o.has_value() ? 1u : 0u});
  }
};

struct ReplaySteps : Walker<ReplaySteps> {
  const std::vector<Step>& steps;
  std::size_t next = 0;
  explicit ReplaySteps(const std::vector<Step>& s) : steps(s) {}

  const Step& step(const std::string& path) {
    KILN_CHECK(next < steps.size(), "nn::valid: {} has no counterpart in the trained module", path);
    return steps[next++];
  }
  // The trained module's field at this step, as the type it has there.
  template <class X> const typename OnAutodiff<X>::type& trained(const std::string& path) {
    using Trained = typename OnAutodiff<X>::type;
    const Step& s = step(path);
    KILN_CHECK(s.type == &type_tag<Trained>, "nn::valid: {} has another type in the trained module", path);
    return *static_cast<const Trained*>(s.field);
  }
  template <class P> void on_param(const std::string& path, P& p) {
    const auto& t = trained<P>(path);
    p = t.with_value(t.val().inner());
  }
  template <class P> void on_buffer(const std::string& path, P& b) { b = P(trained<P>(path).val().inner()); }
  void on_mode(const std::string& path, Mode& m) { m.training = trained<Mode>(path).training; }
  template <class X> void on_setting(const std::string& path, X& x) { x = trained<X>(path); }
  template <class V> void on_vector(const std::string& path, V& v) { v.resize(step(path).count); }
  template <class O> void on_optional(const std::string& path, O& o) {
    if (step(path).count == 0) o.reset();
    else if (!o) o.emplace();
  }
};

}  // namespace detail

// M<Autodiff<B>> → M<B>. M must be default-constructible (the result is built empty and
// filled in, vectors and optionals shaped like the trained module's, settings copied).
template <template <class> class M, class B>
  requires Module<M<Autodiff<B>>>
M<B> valid(const M<Autodiff<B>>& module) {
  detail::RecordSteps recorder;
  recorder.walk(module);
  M<B> out{};
  detail::ReplaySteps replay(recorder.steps);
  replay.walk(out);
  KILN_CHECK(replay.next == recorder.steps.size(),
             "nn::valid: the trained module has {} fields, vectors and optionals, the converted one {}",
             recorder.steps.size(), replay.next);
  return out;
}

}  // namespace kiln::nn
