// The module-wide functions of include/kiln/nn/module.hpp that need no tensor type, over
// a module's slots (nn::Slot): compiled once, here, for every module and backend.
#include "kiln/nn/module.hpp"

#include <fmt/format.h>

namespace kiln::nn::detail {

std::int64_t num_params(const ModuleState& state) {
  std::int64_t n = 0;
  for (const Slot& slot : state.slots)
    if (slot.param) n += slot.shape().numel();
  return n;
}

void freeze(const ModuleState& state, bool frozen) {
  for (const Slot& slot : state.slots)
    if (slot.param) slot.set_trainable(!frozen);
}

void set_training(const ModuleState& state, bool training) {
  for (Mode* mode : state.modes) mode->training = training;
}

std::string summary(const ModuleState& state) {
  std::string out;
  std::int64_t total = 0;
  auto row = [&out](const Slot& slot, std::string_view note) {
    const Shape shape = slot.shape();
    out += fmt::format("{:<40} {:<20} {:<5} {:>10}{}\n", slot.path, fmt::format("{}", shape),
                       dtype_name(slot.dtype()), shape.numel(), note);
  };
  for (const Slot& slot : state.slots) {
    if (!slot.param) continue;
    row(slot, slot.trainable() ? "" : "  (frozen)");
    total += slot.shape().numel();
  }
  for (const Slot& slot : state.slots)
    if (!slot.param) row(slot, "  (buffer)");
  out += fmt::format("{} parameters\n", total);
  return out;
}

}  // namespace kiln::nn::detail
