// A module's weights as named host tensors, and back: state_dict / load_state_dict with
// PyTorch's key names (the dotted paths of nn::Module), strict or non-strict loading with a
// report of missing, unexpected and mis-shaped keys, key remapping by regex, and
// save / load of safetensors files (load also reads PyTorch's torch.save checkpoints).
// Needs kiln::store (target_link_libraries(app kiln::store)).
#pragma once

#include "kiln/nn/module.hpp"
#include "kiln/store/named_tensors.hpp"
#include "kiln/store/safetensors.hpp"
#include "kiln/store/torch.hpp"

#include <filesystem>
#include <map>
#include <regex>
#include <set>
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

inline std::string LoadReport::text() const {
  std::string s;
  auto list = [&s](std::string_view what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    s += fmt::format("{}{} ({}): {}", s.empty() ? "" : "; ", what, keys.size(), fmt::join(keys, ", "));
  };
  list("missing keys", missing);
  list("unexpected keys", unexpected);
  list("mismatched shapes", mismatched);
  return s.empty() ? "all keys matched" : s;
}

// Loads `tensors` into the module's parameters and buffers (converted to each one's dtype,
// on its device; parameter ids kept). Non-strict loading fills what matches and reports the
// rest; strict loading checks everything first and throws with the report.
template <Module M> LoadReport load_state_dict(M& module, const store::NamedTensors& tensors, const LoadOptions& options = {}) {
  std::vector<std::pair<std::string, const TensorData*>> renamed;  // in the file's order
  std::map<std::string, const TensorData*, std::less<>> by_name;
  std::vector<std::regex> patterns;
  for (const KeyRule& rule : options.remap) patterns.emplace_back(rule.pattern);
  for (const auto& entry : tensors) {
    std::string key = entry.name;
    for (std::size_t i = 0; i < patterns.size(); ++i) key = std::regex_replace(key, patterns[i], options.remap[i].replacement);
    KILN_CHECK(by_name.emplace(key, &entry.data).second,
               "load_state_dict: two keys of the file are both named {} after remapping", key);
    renamed.emplace_back(std::move(key), &entry.data);
  }
  auto find = [&by_name](const std::string& key) -> const TensorData* {
    const auto it = by_name.find(key);
    return it == by_name.end() ? nullptr : it->second;
  };

  LoadReport report;
  std::set<std::string> known;
  auto check = [&](const std::string& path, const auto& slot) {
    known.insert(path);
    const TensorData* data = find(path);
    if (data == nullptr) return report.missing.push_back(path);
    // PyTorch's 0-d tensors (BatchNorm's num_batches_tracked) are Kiln's [1].
    const Shape shape = data->shape().rank() == 0 ? Shape{1} : data->shape();
    if (shape != slot->shape())
      report.mismatched.push_back(fmt::format("{}: file {}, module {}", path, data->shape(), slot->shape()));
  };
  for_each_param(module, [&](const std::string& path, const auto& p) { check(path, p); });
  for_each_buffer(module, [&](const std::string& path, const auto& b) { check(path, b); });
  for (const auto& [name, data] : renamed)
    if (!known.count(name)) report.unexpected.push_back(name);
  KILN_CHECK(!options.strict || report.ok(), "load_state_dict: {}", report.text());

  auto assign = [&](const std::string& path, auto& slot) {
    const TensorData* data = find(path);
    if (data == nullptr || (data->shape().rank() == 0 ? Shape{1} : data->shape()) != slot->shape()) return;
    using T = std::remove_cvref_t<decltype(slot.val())>;
    slot.replace(T::from_data(data->reshaped(slot->shape()).convert(slot->dtype()), slot->device()));
  };
  for_each_param(module, [&](const std::string& path, auto& p) { assign(path, p); });
  for_each_buffer(module, [&](const std::string& path, auto& b) { assign(path, b); });
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

// Loads weights from a safetensors file, or from a PyTorch checkpoint (torch.save of a
// state dict; .pt / .pth / .bin) through the restricted unpickler.
template <Module M> LoadReport load(M& module, const std::filesystem::path& path, const LoadOptions& options = {}) {
  const std::string ext = path.extension().string();
  const bool torch = ext == ".pt" || ext == ".pth" || ext == ".bin";
  return load_state_dict(module, torch ? store::load_torch(path) : store::load_safetensors(path), options);
}

}  // namespace kiln::nn
