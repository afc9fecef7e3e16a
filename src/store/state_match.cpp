// kiln::nn's state dicts, the part that is not a template (include/kiln/nn/state.hpp): a
// module's slots as named host tensors, and loading them back with key remapping, matching
// by path and shape, and the report. Compiled here, in libkiln_store: it handles names,
// shapes and host data only, and the slots' tensor types are erased (nn::Slot).
#include "kiln/nn/state.hpp"

#include "kiln/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <regex>
#include <set>

namespace kiln::nn {

std::string LoadReport::text() const {
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

namespace detail {
namespace {

// Renames the file's keys, matches each of the module's slots by path and shape, and builds
// the report.
class StateMatcher {
 public:
  StateMatcher(const store::NamedTensors& tensors, const std::vector<KeyRule>& remap);
  // The file's tensor for the module's slot `path` of shape `shape`, or nullptr when the file
  // has none or one of another shape (both recorded in the report).
  const TensorData* match(const std::string& path, const Shape& shape);
  // The report, the file's keys no slot asked for among the unexpected ones; with `strict`,
  // a kiln::Error naming them all unless everything matched.
  LoadReport finish(bool strict);

 private:
  std::vector<std::pair<std::string, const TensorData*>> renamed_;  // in the file's order
  std::map<std::string, const TensorData*, std::less<>> by_name_;
  std::set<std::string> asked_;  // the module's paths
  LoadReport report_;
};

StateMatcher::StateMatcher(const store::NamedTensors& tensors, const std::vector<KeyRule>& remap) {
  std::vector<std::regex> patterns;
  for (const KeyRule& rule : remap) {
    try {
      patterns.emplace_back(rule.pattern);
    } catch (const std::regex_error& e) {
      KILN_FAIL("load_state_dict: the remap pattern '{}' is not a regular expression ({})", rule.pattern, e.what());
    }
  }
  for (const auto& entry : tensors) {
    std::string key = entry.name;
    for (std::size_t i = 0; i < patterns.size(); ++i) key = std::regex_replace(key, patterns[i], remap[i].replacement);
    KILN_CHECK(by_name_.emplace(key, &entry.data).second,
               "load_state_dict: two keys of the file are both named {} after remapping", key);
    renamed_.emplace_back(std::move(key), &entry.data);
  }
}

const TensorData* StateMatcher::match(const std::string& path, const Shape& shape) {
  asked_.insert(path);
  const auto it = by_name_.find(path);
  if (it == by_name_.end()) {
    report_.missing.push_back(path);
    return nullptr;
  }
  const TensorData* data = it->second;
  // PyTorch's 0-d tensors (BatchNorm's num_batches_tracked) are Kiln's [1].
  const Shape file_shape = data->shape().rank() == 0 ? Shape{1} : data->shape();
  if (file_shape != shape) {
    report_.mismatched.push_back(fmt::format("{}: file {}, module {}", path, data->shape(), shape));
    return nullptr;
  }
  return data;
}

LoadReport StateMatcher::finish(bool strict) {
  for (const auto& [name, data] : renamed_)
    if (!asked_.count(name)) report_.unexpected.push_back(name);
  KILN_CHECK(!strict || report_.ok(), "load_state_dict: {}", report_.text());
  return std::move(report_);
}

}  // namespace

store::NamedTensors state_dict(const ModuleState& state) {
  store::NamedTensors out;
  for (const bool params : {true, false})
    for (const Slot& slot : state.slots)
      if (slot.param == params) out.insert(slot.path, slot.into_data());
  return out;
}

// Matches every slot first (parameters, then buffers), so that a strict load that fails
// changes nothing; then assigns what matched.
LoadReport load_state_dict(const ModuleState& state, const store::NamedTensors& tensors, const LoadOptions& options) {
  StateMatcher matcher(tensors, options.remap);
  std::vector<std::pair<const Slot*, const TensorData*>> matched;
  for (const bool params : {true, false})
    for (const Slot& slot : state.slots)
      if (slot.param == params) matched.emplace_back(&slot, matcher.match(slot.path, slot.shape()));
  LoadReport report = matcher.finish(options.strict);
  for (const auto& [slot, data] : matched)
    if (data != nullptr) slot->assign(*data);
  return report;
}

store::NamedTensors read_state_file(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  const bool torch = ext == ".pt" || ext == ".pth" || ext == ".bin";
  return torch ? store::load_torch(path) : store::load_safetensors(path);
}

}  // namespace detail
}  // namespace kiln::nn
