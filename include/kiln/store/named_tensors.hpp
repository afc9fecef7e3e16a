// NamedTensors: tensors on the host under unique names, in insertion order — what the
// weights readers return and the writers take (a state dict).
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/core/tensor_data.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store {

class NamedTensors {
 public:
  struct Entry {
    std::string name;
    TensorData data;
  };

  // Adds a tensor; a name that is already present is an error.
  void insert(std::string name, TensorData data) {
    const auto [it, inserted] = index_.try_emplace(name, entries_.size());
    KILN_CHECK(inserted, "NamedTensors::insert: a tensor named '{}' is already present", name);
    entries_.push_back({std::move(name), std::move(data)});
  }

  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }
  const TensorData* find(std::string_view name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second].data;
  }
  const TensorData& at(std::string_view name) const {
    const TensorData* data = find(name);
    KILN_CHECK(data != nullptr, "NamedTensors::at: no tensor named '{}' (there are {})", name, entries_.size());
    return *data;
  }
  TensorData& at(std::string_view name) { return const_cast<TensorData&>(std::as_const(*this).at(name)); }

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

  std::vector<std::string> names() const {
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Entry& entry : entries_) names.push_back(entry.name);
    return names;
  }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace kiln::store
