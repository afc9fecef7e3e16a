// PyTorch checkpoints: reads a state dict saved by torch.save (the zip format of
// PyTorch >= 1.6) into NamedTensors. The pickle inside is run by a restricted
// unpickler that only constructs an allow-list of globals (OrderedDict, tensors and
// their storages, torch.Size) and never executes code; anything else is an error
// naming the global. Compiled into kiln::store (libkiln_store); see docs/store.md.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/store/named_tensors.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

namespace kiln::store {

struct TorchLoadOptions {
  // Converts floating-point tensors to this dtype; integer and bool tensors keep theirs.
  std::optional<DType> float_dtype;
  // A checkpoint is a dict; nested dicts are flattened with '.' ({"model": {"w": t}}
  // gives "model.w"). Values that are neither tensors nor dicts (an epoch number, a
  // string) are an error naming their key, or skipped when this is true.
  bool skip_non_tensors = false;
  // The most bytes the tensors (and their names, twice) may take once read; 0: 16 times
  // the file's size plus 32 MiB. Views that repeat their storage's elements (stride 0) or
  // one tensor under many names make more than the file holds, so a small hostile file
  // could otherwise ask for terabytes.
  std::uint64_t max_bytes = 0;
};

// Reads the torch.save file at `path` (memory-mapped).
NamedTensors load_torch(const std::filesystem::path& path, const TorchLoadOptions& options = {});
// Reads a torch.save image in memory; `name` stands for the file in error messages.
NamedTensors load_torch(std::span<const std::byte> bytes, const std::string& name,
                        const TorchLoadOptions& options = {});

}  // namespace kiln::store
