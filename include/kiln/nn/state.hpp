// A module's weights as named host tensors, and back: state_dict / load_state_dict with
// PyTorch's key names (the dotted paths of nn::Module), strict or non-strict loading with a
// report of missing, unexpected and mis-shaped keys, key remapping by regex, and
// save / load of safetensors files (load also reads PyTorch's torch.save checkpoints).
// The non-template parts are compiled into libkiln_store (kiln::store, which kiln::cpu brings):
// the templates only list a module's slots (nn::detail::state_of).
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

namespace detail {
// The non-template halves of state_dict and load_state_dict (src/store/state_match.cpp).
store::NamedTensors state_dict(const ModuleState& state);
}  // namespace detail

// Every parameter and buffer of `module`, by path, as host data: the parameters in
// KILN_MODULE order, then the buffers.
template <Module M> store::NamedTensors state_dict(const M& module) { return detail::state_dict(detail::state_of(module)); }

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

// Loads `tensors` into the module's parameters and buffers (converted to each one's dtype,
// on its device; parameter ids kept). Non-strict loading fills what matches and reports the
// rest; strict loading checks everything first and throws with the report.
namespace detail {
// Renames the file's keys (std::regex stays out of the headers, where it cost a user's
// program seconds of compile time), matches each slot by path and shape, builds the
// report, and assigns (src/store/state_match.cpp).
LoadReport load_state_dict(const ModuleState& state, const store::NamedTensors& tensors, const LoadOptions& options);
}  // namespace detail

template <Module M> LoadReport load_state_dict(M& module, const store::NamedTensors& tensors, const LoadOptions& options = {}) {
  return detail::load_state_dict(detail::state_of(module), tensors, options);
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
