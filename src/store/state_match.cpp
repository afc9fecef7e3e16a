// kiln::nn's loading of state dicts, the part that is not a template (include/kiln/nn/state.hpp):
// key remapping, matching by path and shape, the report. Compiled here, in libkiln_store,
// because it handles names, shapes and host data only.
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

struct StateMatcher::Impl {
  std::vector<std::pair<std::string, const TensorData*>> renamed;  // in the file's order
  std::map<std::string, const TensorData*, std::less<>> by_name;
  std::set<std::string> asked;  // the module's paths
  LoadReport report;
};

StateMatcher::StateMatcher(const store::NamedTensors& tensors, const std::vector<KeyRule>& remap)
    : impl_(std::make_unique<Impl>()) {
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
    KILN_CHECK(impl_->by_name.emplace(key, &entry.data).second,
               "load_state_dict: two keys of the file are both named {} after remapping", key);
    impl_->renamed.emplace_back(std::move(key), &entry.data);
  }
}

StateMatcher::~StateMatcher() = default;

const TensorData* StateMatcher::match(const std::string& path, const Shape& shape) {
  Impl& s = *impl_;
  s.asked.insert(path);
  const auto it = s.by_name.find(path);
  if (it == s.by_name.end()) {
    s.report.missing.push_back(path);
    return nullptr;
  }
  const TensorData* data = it->second;
  // PyTorch's 0-d tensors (BatchNorm's num_batches_tracked) are Kiln's [1].
  const Shape file_shape = data->shape().rank() == 0 ? Shape{1} : data->shape();
  if (file_shape != shape) {
    s.report.mismatched.push_back(fmt::format("{}: file {}, module {}", path, data->shape(), shape));
    return nullptr;
  }
  return data;
}

LoadReport StateMatcher::finish(bool strict) {
  Impl& s = *impl_;
  for (const auto& [name, data] : s.renamed)
    if (!s.asked.count(name)) s.report.unexpected.push_back(name);
  KILN_CHECK(!strict || s.report.ok(), "load_state_dict: {}", s.report.text());
  return std::move(s.report);
}

store::NamedTensors read_state_file(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  const bool torch = ext == ".pt" || ext == ".pth" || ext == ".bin";
  return torch ? store::load_torch(path) : store::load_safetensors(path);
}

}  // namespace detail
}  // namespace kiln::nn
