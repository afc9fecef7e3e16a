// What the files of kiln_dispatch share: which backend a target names (on), the operands'
// one target (target), and a primitive's wrapping and unwrapping. Private to
// backends/dispatch/src.
#pragma once

#include "kiln/dispatch/backend.hpp"

#include "kiln/cpu/backend.hpp"
#include "kiln/fusion/backend.hpp"
#if defined(KILN_DISPATCH_VULKAN)
#include "kiln/vulkan/backend.hpp"
#endif
#if defined(KILN_DISPATCH_CUDA)
#include "kiln/cuda/backend.hpp"
#endif
#if defined(KILN_DISPATCH_ROCM)
#include "kiln/rocm/backend.hpp"
#endif

#include <fmt/format.h>

#include <array>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::dispatch {

using Target = DispatchTarget;

template <class B> constexpr Target target_of();
template <> constexpr Target target_of<Cpu>() { return Target::cpu; }
template <> constexpr Target target_of<Fusion<Cpu>>() { return Target::fusion_cpu; }
#if defined(KILN_DISPATCH_VULKAN)
template <> constexpr Target target_of<Vulkan>() { return Target::vulkan; }
template <> constexpr Target target_of<Fusion<Vulkan>>() { return Target::fusion_vulkan; }
#endif
#if defined(KILN_DISPATCH_CUDA)
template <> constexpr Target target_of<Cuda>() { return Target::cuda; }
template <> constexpr Target target_of<Fusion<Cuda>>() { return Target::fusion_cuda; }
#endif
#if defined(KILN_DISPATCH_ROCM)
template <> constexpr Target target_of<Rocm>() { return Target::rocm; }
template <> constexpr Target target_of<Fusion<Rocm>>() { return Target::fusion_rocm; }
#endif

inline constexpr std::array<std::string_view, 8> kNames = {"cpu",  "vulkan",      "fusion_cpu", "fusion_vulkan",
                                                           "cuda", "fusion_cuda", "rocm",       "fusion_rocm"};

inline std::string built_names() {
  std::string names;
  for (Target t : built_targets()) names += (names.empty() ? "" : ", ") + std::string(target_name(t));
  return names;
}

// Calls f.template operator()<B>() with B the backend of target t.
template <class F> decltype(auto) on(Target t, F&& f) {
  switch (t) {
    case Target::cpu: return f.template operator()<Cpu>();
    case Target::fusion_cpu: return f.template operator()<Fusion<Cpu>>();
#if defined(KILN_DISPATCH_VULKAN)
    case Target::vulkan: return f.template operator()<Vulkan>();
    case Target::fusion_vulkan: return f.template operator()<Fusion<Vulkan>>();
#else
    case Target::vulkan:
    case Target::fusion_vulkan: break;
#endif
#if defined(KILN_DISPATCH_CUDA)
    case Target::cuda: return f.template operator()<Cuda>();
    case Target::fusion_cuda: return f.template operator()<Fusion<Cuda>>();
#else
    case Target::cuda:
    case Target::fusion_cuda: break;
#endif
#if defined(KILN_DISPATCH_ROCM)
    case Target::rocm: return f.template operator()<Rocm>();
    case Target::fusion_rocm: return f.template operator()<Fusion<Rocm>>();
#else
    case Target::rocm:
    case Target::fusion_rocm: break;
#endif
  }
  KILN_FAIL("dispatch: {} is not built into this Kiln (built: {})", target_name(t), built_names());
}

template <class B> const typename B::Primitive& unwrap(const DispatchPrimitive& p) {
  return *static_cast<const typename B::Primitive*>(p.value.get());
}
// The primitive of a handle the caller gives up: a copy, and the handle lets go of its own
// where nothing else holds it, so that the copy is then the primitive's only holder.
template <class B> typename B::Primitive given_up(DispatchPrimitive& p) {
  typename B::Primitive inner = unwrap<B>(p);
  if (p.value.use_count() == 1) p.value.reset();
  return inner;
}
template <class B> DispatchPrimitive wrap(typename B::Primitive p) {
  DispatchPrimitive out;
  out.shape = B::shape(p);
  out.dtype = B::dtype(p);
  out.target = target_of<B>();
  out.value = std::make_shared<const typename B::Primitive>(std::move(p));
  return out;
}
template <class B> std::vector<DispatchPrimitive> wrap_all(std::vector<typename B::Primitive> ps) {
  std::vector<DispatchPrimitive> out;
  out.reserve(ps.size());
  for (auto& p : ps) out.push_back(wrap<B>(std::move(p)));
  return out;
}
template <class B> std::vector<typename B::Primitive> unwrap_all(std::span<const DispatchPrimitive> ps) {
  std::vector<typename B::Primitive> out;
  out.reserve(ps.size());
  for (const auto& p : ps) out.push_back(unwrap<B>(p));
  return out;
}

// The one target of an op's operands; operands on two are an error naming both.
inline Target target(std::string_view op, std::initializer_list<const DispatchPrimitive*> operands) {
  const DispatchPrimitive* first = nullptr;
  for (const DispatchPrimitive* p : operands) {
    if (p == nullptr) continue;
    KILN_CHECK(p->value != nullptr, "{}: an operand holds no tensor", op);
    if (first == nullptr) first = p;
    KILN_CHECK(p->target == first->target, "{}: operands on {} ({}) and {} ({}): move one with to_device", op,
               target_name(first->target), first->shape, target_name(p->target), p->shape);
  }
  KILN_CHECK(first != nullptr, "{}: no operands", op);
  return first->target;
}
inline Target target(std::string_view op, std::span<const DispatchPrimitive> operands) {
  KILN_CHECK(!operands.empty(), "{}: no operands", op);
  for (const DispatchPrimitive& p : operands) target(op, {&operands[0], &p});
  return operands[0].target;
}

// The backend's device for a resolved Dispatch device.
template <class B> typename B::Device device_of(const DispatchDevice& d) {
  if constexpr (std::is_same_v<typename B::Device, CpuDevice>) {
    KILN_CHECK(d.index <= 0, "dispatch: the cpu has one device, got index {}", d.index);
    return {};
  } else {
    return typename B::Device{d.index};
  }
}

// Runs `f(B)` on the target of `d` (resolved) with B's device.
template <class F> decltype(auto) on_device(const DispatchDevice& device, F&& f) {
  const DispatchDevice d = Dispatch::resolve(device);
  return on(*d.target, [&]<class B>() -> decltype(auto) { return f.template operator()<B>(device_of<B>(d)); });
}

}  // namespace kiln::dispatch
