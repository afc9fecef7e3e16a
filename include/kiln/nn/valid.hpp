// nn::valid: a module trained on Autodiff<B> as the same module on B, for inference (no
// graph is recorded; the values are shared, not copied). Parameter ids and trainability
// carry over, so an optimizer's state still matches if the module goes back.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/nn/module.hpp"

#include <any>
#include <string>
#include <unordered_map>

namespace kiln::nn {

namespace detail {

// What a module holds, by path: each parameter and buffer already converted to the inner
// backend, each setting, the length of each vector and which optionals are set.
struct InnerRecord {
  std::unordered_map<std::string, std::any> tensors;
  std::unordered_map<std::string, std::any> settings;
  std::unordered_map<std::string, std::size_t> lengths;
  std::unordered_map<std::string, bool> present;
  std::unordered_map<std::string, bool> training;
};

struct RecordInner : Walker<RecordInner> {
  InnerRecord record;
  template <class P> void on_param(const std::string& path, const P& p) {
    record.tensors[path] = p.with_value(p.val().inner());
  }
  template <class P> void on_buffer(const std::string& path, const P& b) {
    using Inner = decltype(b.val().inner());
    record.tensors[path] = Buffer<Inner>(b.val().inner());
  }
  void on_mode(const std::string& path, const Mode& m) { record.training[path] = m.training; }
  template <class V> void on_vector(const std::string& path, const V& v) { record.lengths[path] = v.size(); }
  template <class O> void on_optional(const std::string& path, const O& o) { record.present[path] = o.has_value(); }
  template <class X> void on_setting(const std::string& path, const X& x) { record.settings[path] = x; }
};

struct FillFromRecord : Walker<FillFromRecord> {
  InnerRecord& record;
  explicit FillFromRecord(InnerRecord& r) : record(r) {}
  template <class X> void take(const std::string& path, X& x) {
    const auto it = record.tensors.find(path);
    KILN_CHECK(it != record.tensors.end(), "nn::valid: {} has no counterpart in the trained module", path);
    const X* value = std::any_cast<X>(&it->second);
    KILN_CHECK(value != nullptr, "nn::valid: {} has another type in the trained module", path);
    x = *value;
  }
  template <class P> void on_param(const std::string& path, P& p) { take(path, p); }
  template <class X> void on_setting(const std::string& path, X& x) {
    const auto it = record.settings.find(path);
    KILN_CHECK(it != record.settings.end(), "nn::valid: setting {} has no counterpart in the trained module", path);
    const X* value = std::any_cast<X>(&it->second);
    KILN_CHECK(value != nullptr, "nn::valid: setting {} has another type in the trained module", path);
    x = *value;
  }
  template <class P> void on_buffer(const std::string& path, P& b) { take(path, b); }
  void on_mode(const std::string& path, Mode& m) { m.training = record.training.at(path); }
  template <class V> void on_vector(const std::string& path, V& v) { v.resize(record.lengths.at(path)); }
  template <class O> void on_optional(const std::string& path, O& o) {
    if (record.present.at(path) && !o) o.emplace();
    if (!record.present.at(path)) o.reset();
  }
};

}  // namespace detail

// M<Autodiff<B>> → M<B>. M must be default-constructible (the result is built empty and
// filled in, vectors and optionals shaped like the trained module's, settings copied).
template <template <class> class M, class B>
  requires Module<M<Autodiff<B>>>
M<B> valid(const M<Autodiff<B>>& module) {
  detail::RecordInner recorder;
  recorder.walk(module);
  M<B> out{};
  detail::FillFromRecord filler(recorder.record);
  filler.walk(out);
  return out;
}

}  // namespace kiln::nn
