// Devices: where a tensor lives. Each backend has its own Device type; this header
// holds what they share.
#pragma once

#include <fmt/format.h>

#include <string>

namespace kiln {

// The host CPU. There is one; it compares equal to itself.
struct CpuDevice {
  friend bool operator==(CpuDevice, CpuDevice) = default;
  std::string str() const { return "cpu"; }
};

}  // namespace kiln
