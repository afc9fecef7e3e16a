// A module's weights as named host tensors, and back: state_dict / load_state_dict with
// PyTorch's key names (the dotted paths of nn::Module), strict or non-strict loading with a
// report of missing, unexpected and mis-shaped keys, key remapping by regex, and
// save / load of safetensors files (load also reads PyTorch's torch.save checkpoints).
// The non-template parts are compiled into libkiln_store (kiln::store, which kiln::cpu brings).
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/store/named_tensors.hpp"
#include "kiln/store/safetensors.hpp"
#include "kiln/store/torch.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::nn {

// Every parameter and buffer of `module`, by path, as host data (in KILN_MODULE order).
template <Module M> store::NamedTensors state_dict(const M& module) {
  store::NamedTensors out;
  for_each_param(module, [&](const std::string& path, const auto& p) { out.insert(path, p->into_data()); });
  for_each_buffer(module, [&](const std::string& path, const auto& b) { out.insert(path, b->into_data()); });
  return out;
}

// What load_state_dict matched and what it did not.
struct LoadReport {
  std::vector<std::string> missing;      // the module's keys the file lacks
  std::vector<std::string> unexpected;   // the file's keys the module lacks
  std::vector<std::string> mismatched;   // "key: file [2, 3], module [3, 2]"
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string text() const;
};

// Renames keys before matching: each rule (regex, replacement, as std::regex_replace) is
// applied in order to every key of the file (e.g. {"^module\\.", ""} drops a DataParallel
// prefix, {"^encoder\\.layer\\.", "encoder.layers."} renames a submodule).
struct KeyRule {
  std::string pattern, replacement;
};

struct LoadOptions {
  bool strict = true;  // strict: anything in the report is a kiln::Error, and nothing is loaded
  std::vector<KeyRule> remap;
};

namespace detail {
// The part of load_state_dict that is not a template, compiled once (in libkiln_store: it
// deals in names, shapes and host data only): renames the file's keys, matches each of the
// module's slots by path and shape, and builds the report. std::regex stays out of the
// headers, where it cost a user's program seconds of compile time.
class StateMatcher {
 public:
  StateMatcher(const store::NamedTensors& tensors, const std::vector<KeyRule>& remap);
  ~StateMatcher();
  StateMatcher(const StateMatcher&) = delete;
  StateMatcher& operator=(const StateMatcher&) = delete;
  // The file's tensor for the module's slot `path` of shape `shape`, or nullptr when the file
  // has none or one of another shape (both recorded in the report).
  const TensorData* match(const std::string& path, const Shape& shape);
  // The report, the file's keys no slot asked for among the unexpected ones; with `strict`,
  // a kiln::Error naming them all unless everything matched.
  LoadReport finish(bool strict);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace detail

// Loads `tensors` into the module's parameters and buffers (converted to each one's dtype,
// on its device; parameter ids kept). Non-strict loading fills what matches and reports the
// rest; strict loading checks everything first and throws with the report.
template <Module M> LoadReport load_state_dict(M& module, const store::NamedTensors& tensors, const LoadOptions& options = {}) {
  detail::StateMatcher matcher(tensors, options.remap);
  std::vector<const TensorData*> matched;  // per slot, in walk order
  auto match = [&](const std::string& path, const auto& slot) { matched.push_back(matcher.match(path, slot->shape())); };
  for_each_param(module, match);
  for_each_buffer(module, match);
  LoadReport report = matcher.finish(options.strict);

  std::size_t next = 0;
  auto assign = [&](const std::string&, auto& slot) {
    const TensorData* data = matched[next++];
    if (data == nullptr) return;
    using T = std::remove_cvref_t<decltype(slot.val())>;
    slot.replace(T::from_data(data->reshaped(slot->shape()).convert(slot->dtype()), slot->device()));
  };
  for_each_param(module, assign);
  for_each_buffer(module, assign);
  return report;
}

// Writes the module's state dict to a safetensors file, atomically; float_dtype stores
// float tensors as that dtype (f16 / bf16 halve the file).
template <Module M>
void save(const M& module, const std::filesystem::path& path, std::optional<DType> float_dtype = std::nullopt) {
  store::SafetensorsWriteOptions options;
  options.float_dtype = float_dtype;
  store::save_safetensors(path, state_dict(module), options);
}

namespace detail {
// A safetensors file, or a PyTorch checkpoint by its extension (.pt, .pth, .bin).
store::NamedTensors read_state_file(const std::filesystem::path& path);
}  // namespace detail

// Loads weights from a safetensors file, or from a PyTorch checkpoint (torch.save of a
// state dict; .pt / .pth / .bin) through the restricted unpickler.
template <Module M> LoadReport load(M& module, const std::filesystem::path& path, const LoadOptions& options = {}) {
  return load_state_dict(module, detail::read_state_file(path), options);
}

}  // namespace kiln::nn
