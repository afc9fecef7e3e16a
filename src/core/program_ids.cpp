// The ids of elementwise programs (include/kiln/codegen/program.hpp): one table for the
// process, so that every library and program numbers a structure alike. Thread-safe.
#include "kiln/codegen/program.hpp"

#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::codegen::detail {

std::uint64_t intern_key(const std::string& key) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::uint64_t> ids;
  const std::lock_guard lock(mutex);
  return ids.emplace(key, ids.size() + 1).first->second;
}

}  // namespace kiln::codegen::detail
