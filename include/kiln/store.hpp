// kiln::store: weights I/O on host tensors: safetensors files (read, written atomically)
// and PyTorch state dicts saved by torch.save (a restricted unpickler). Compiled into
// libkiln_store (kiln::store, which kiln::cpu brings). See docs/store.md.
#pragma once

#include "kiln/store/named_tensors.hpp"
#include "kiln/store/safetensors.hpp"
#include "kiln/store/torch.hpp"
