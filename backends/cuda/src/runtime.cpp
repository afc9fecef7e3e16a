// The GPU runtime behind kiln::Cuda and kiln::Rocm (runtime.hpp): devices and their
// contexts, the caching allocator, host transfers through pinned staging memory, run-time
// compilation (NVRTC, hiprtc) with its memory and disk caches, and launches.
#include "runtime.hpp"

#include "codegen/cuda.hpp"
#if defined(KILN_GPU_HIP)
#include "kiln/rocm/interop.hpp"
#else
#include "kiln/cuda/interop.hpp"
#endif

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

// The environment variables of each backend.
#if defined(KILN_GPU_HIP)
#define KILN_DEVICE_VARIABLE "KILN_ROCM_DEVICE"
#define KILN_PROFILE_VARIABLE "KILN_ROCM_PROFILE"
#else
#define KILN_DEVICE_VARIABLE "KILN_CUDA_DEVICE"
#define KILN_PROFILE_VARIABLE "KILN_CUDA_PROFILE"
#endif

namespace kiln::KILN_GPU_NAMESPACE {
namespace {

std::atomic<std::uint64_t> compile_count{0}, disk_hit_count{0}, launch_count{0}, sync_count{0};
std::atomic<std::uint64_t> compile_microseconds{0};

// KILN_CUDA_PROFILE=1: every launch (and every cuBLAS call) runs alone, between two waits,
// and its time adds to its kernel's; at exit the process prints the kernels by total time,
// with the compilations and the host waits. For finding where a workload's time goes; it
// serializes the device, so its totals are not a benchmark.
struct Profile {
  std::mutex mutex;
  std::unordered_map<std::string, std::pair<double, std::uint64_t>> kernels;  // seconds, launches
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~Profile() {
    std::vector<std::pair<std::string, std::pair<double, std::uint64_t>>> rows(kernels.begin(), kernels.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& row : rows) total += row.second.first;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "kiln " KILN_GPU_ID " profile: {:.3f} s in {} kernels of {} launches; {:.3f} s since the first op; "
                       "{} compilations ({:.3f} s), {} disk cache hits, {} host waits\n",
               total, rows.size(), launch_count.load(), wall, compile_count.load(), compile_microseconds.load() * 1e-6,
               disk_hit_count.load(), sync_count.load());
    for (std::size_t i = 0; i < rows.size() && i < 25; ++i)
      fmt::print(stderr, "  {:9.3f} ms {:8} x  {}\n", rows[i].second.first * 1e3, rows[i].second.second, rows[i].first);
  }
};
Profile* profile() {
  static Profile* p = [] {
    const char* env = std::getenv(KILN_PROFILE_VARIABLE);
    return env != nullptr && std::string_view(env) == "1" ? new Profile : nullptr;
  }();
  return p;
}
struct ProfileAtExit {
  ~ProfileAtExit() { delete profile(); }
} profile_at_exit;


std::string arch_for(const DeviceInfo& device);

// What the runtime reports about the machine's devices, found once.
struct Devices {
  std::vector<DeviceInfo> list;
  std::string unavailable;  // why there are none
};
const Devices& probe() {
  static const Devices found = [] {
    Devices d;
    int count = 0;
    const gpu_api::Error status = gpu_api::device_count(&count);
    if (status != gpu_api::success) {
      d.unavailable = fmt::format("no " KILN_GPU_NAME " device: {} ({})", gpu_api::error_string(status),
                                  static_cast<int>(status));
      (void)gpu_api::last_error();  // clear the sticky error of the failed probe
      return d;
    }
    if (count == 0) {
      d.unavailable = "no " KILN_GPU_NAME " device: the driver reports none";
      return d;
    }
    for (int i = 0; i < count; ++i) {
      gpu_api::DeviceProp prop{};
      if (gpu_api::properties(&prop, i) != gpu_api::success) continue;
      DeviceInfo info;
      info.index = i;
      info.name = prop.name;
      info.major = prop.major;
      info.minor = prop.minor;
      info.memory = static_cast<std::int64_t>(prop.totalGlobalMem);
      info.multiprocessors = prop.multiProcessorCount;
      d.list.push_back(std::move(info));
#if defined(KILN_GPU_HIP)
      // "gfx90a:sramecc+:xnack-": the target's name before its features.
      const std::string arch = prop.gcnArchName;
      d.list.back().arch = arch.substr(0, arch.find(':'));
#else
      d.list.back().arch = arch_for(d.list.back());
#endif
    }
    if (d.list.empty()) d.unavailable = "no " KILN_GPU_NAME " device: none of the driver's devices could be queried";
    return d;
  }();
  return found;
}

// FNV-1a over the bytes of s: names a compiled program in the disk cache (the file holds
// the whole key too, compared on load).
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

#if defined(KILN_GPU_HIP)
// hiprtc compiles for the device's own target (gfx90a, gfx1030...).
std::string compiler_version() {
  int version = 0;
  (void)hipRuntimeGetVersion(&version);
  return fmt::format("hiprtc {}", version);
}
std::string arch_for(const DeviceInfo& device) { return device.arch; }
#else
std::string compiler_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("nvrtc {}.{}", major, minor);
}

// The architecture NVRTC compiles for on a device of compute capability major.minor: its
// own SASS (sm_XY) where this NVRTC knows it, else PTX for the newest it knows, which the
// driver compiles at load.
std::string arch_for(const DeviceInfo& device) {
  static const std::vector<int> supported = [] {
    int n = 0;
    std::vector<int> archs;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      archs.resize(static_cast<std::size_t>(n));
      nvrtcGetSupportedArchs(archs.data());
    }
    return archs;
  }();
  const int want = device.major * 10 + device.minor;
  if (std::find(supported.begin(), supported.end(), want) != supported.end() || supported.empty())
    return fmt::format("sm_{}", want);
  int best = 0;
  for (const int a : supported)
    if (a <= want) best = std::max(best, a);
  return fmt::format("compute_{}", best == 0 ? supported.front() : best);
}
#endif

// The disk cache: one file per compiled program, named by the key's hash, holding the key
// and the image; written whole to a temporary name and renamed, so a reader never sees a
// torn file and concurrent writers of one program are harmless.
constexpr std::string_view kCacheMagic = "KILNGPU1\n";

std::optional<std::string> cache_read(const std::filesystem::path& file, const std::string& key) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t head = kCacheMagic.size() + sizeof(std::uint64_t);
  if (content.size() < head || content.compare(0, kCacheMagic.size(), kCacheMagic) != 0) return std::nullopt;
  std::uint64_t key_size = 0;
  std::memcpy(&key_size, content.data() + kCacheMagic.size(), sizeof key_size);
  if (content.size() < head + key_size || content.compare(head, key_size, key) != 0) return std::nullopt;
  return content.substr(head + key_size);
}

void cache_write(const std::filesystem::path& file, const std::string& key, const std::string& image) {
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  if (error) return;  // the cache is an optimization: a folder that cannot be made is skipped
  const std::filesystem::path tmp = file.string() + fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    const std::uint64_t key_size = key.size();
    out.write(kCacheMagic.data(), static_cast<std::streamsize>(kCacheMagic.size()));
    out.write(reinterpret_cast<const char*>(&key_size), sizeof key_size);
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, error);
      return;
    }
  }
  std::filesystem::rename(tmp, file, error);
  if (error) std::filesystem::remove(tmp, error);
}

// Compiles `source` for `arch` with NVRTC: the image (SASS, or PTX for a compute_ arch).
std::string compile(const std::string& source, const std::string& arch) {
  compile_count.fetch_add(1, std::memory_order_relaxed);
  const auto started = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point started;
    ~Timer() {
      compile_microseconds.fetch_add(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count()));
    }
  } timer{started};
#if defined(KILN_GPU_HIP)
  hiprtcProgram program = nullptr;
  KILN_CHECK(hiprtcCreateProgram(&program, source.c_str(), "kiln_kernel.hip", 0, nullptr, nullptr) == HIPRTC_SUCCESS,
             "rocm: hiprtcCreateProgram failed");
  const std::string arch_option = "--offload-arch=" + arch;
  // No contraction of a * b + c into fma: results round as the catalogue's ops do one at a
  // time (the CPU's per-op kernels; its fused programs contract a multiply and an add).
  const char* options[] = {arch_option.c_str(), "-std=c++17", "-ffp-contract=off"};
  const hiprtcResult compiled = hiprtcCompileProgram(program, 3, options);
  if (compiled != HIPRTC_SUCCESS) {
    std::size_t log_size = 0;
    hiprtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    hiprtcGetProgramLog(program, log.data());
    hiprtcDestroyProgram(&program);
    KILN_FAIL("rocm: hiprtc could not compile a kernel for {}: {}\n{}\n--- source ---\n{}", arch,
              hiprtcGetErrorString(compiled), log.substr(0, 4000), source.substr(0, 6000));
  }
  std::size_t size = 0;
  std::string image;
  KILN_CHECK(hiprtcGetCodeSize(program, &size) == HIPRTC_SUCCESS, "rocm: hiprtcGetCodeSize failed");
  image.resize(size);
  KILN_CHECK(hiprtcGetCode(program, image.data()) == HIPRTC_SUCCESS, "rocm: hiprtcGetCode failed");
  hiprtcDestroyProgram(&program);
  return image;
#else
  nvrtcProgram program = nullptr;
  KILN_CHECK(nvrtcCreateProgram(&program, source.c_str(), "kiln_kernel.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS,
             "cuda: nvrtcCreateProgram failed");
  const std::string arch_option = "--gpu-architecture=" + arch;
  // No contraction of a * b + c into fma: results round as the catalogue's ops do one at a
  // time (the CPU's per-op kernels; its fused programs contract a multiply and an add).
  const char* options[] = {arch_option.c_str(), "--std=c++17", "--fmad=false", "-default-device"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 4, options);
  if (compiled != NVRTC_SUCCESS) {
    std::size_t log_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(program, log.data());
    nvrtcDestroyProgram(&program);
    KILN_FAIL("cuda: NVRTC could not compile a kernel for {}: {}\n{}\n--- source ---\n{}", arch,
              nvrtcGetErrorString(compiled), log.substr(0, 4000), source.substr(0, 6000));
  }
  // Machine code for an sm_ architecture, PTX for a compute_ one.
  const bool sass = arch.starts_with("sm_");
  std::size_t size = 0;
  std::string image;
  KILN_CHECK((sass ? nvrtcGetCUBINSize(program, &size) : nvrtcGetPTXSize(program, &size)) == NVRTC_SUCCESS,
             "cuda: reading NVRTC's output failed");
  image.resize(size);
  KILN_CHECK((sass ? nvrtcGetCUBIN(program, image.data()) : nvrtcGetPTX(program, image.data())) == NVRTC_SUCCESS,
             "cuda: reading NVRTC's output failed");
  nvrtcDestroyProgram(&program);
  return image;
#endif
}

// The loaded libraries (CUDA) or modules (HIP) of the process, by device and key
// (architecture and source).
struct Libraries {
  std::mutex mutex;
  std::unordered_map<std::string, gpu_api::Library> by_key;
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels;  // by key and entry
};
Libraries& libraries() {
  static auto* l = new Libraries;  // lives as long as the process: tensors may outlive statics
  return *l;
}

thread_local int current_device = -1;

}  // namespace

// ---- devices

std::vector<DeviceInfo> devices() { return probe().list; }
std::string unavailable_reason() { return probe().unavailable; }

int Context::default_device() {
  static const int chosen = [] {
    const char* env = std::getenv(KILN_DEVICE_VARIABLE);
    if (env == nullptr || *env == '\0') return 0;
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    KILN_CHECK(end != env && *end == '\0' && v >= 0, KILN_GPU_ID ": " KILN_DEVICE_VARIABLE "={} is not a device index",
               env);
    return static_cast<int>(v);
  }();
  return chosen;
}

// ---- the context's state: allocator and staging

struct Context::State {
  std::mutex mutex;
  std::multimap<std::size_t, void*> free_blocks;  // cached blocks by size class
  MemoryStats stats;
  void* staging = nullptr;  // pinned host memory
  std::size_t staging_bytes = 0;
  gpu_api::Event staging_done = nullptr;  // the last upload from staging
  std::mutex staging_mutex;
};

Context& Context::get(int index) {
  const Devices& d = probe();
  KILN_CHECK(!d.list.empty(), KILN_GPU_ID ": {}", d.unavailable);
  if (index < 0) index = default_device();
  KILN_CHECK(static_cast<std::size_t>(index) < d.list.size(), KILN_GPU_ID ": device {} was asked for; this machine has {} ({})",
             index, d.list.size(), d.list.front().name);
  static std::mutex mutex;
  static std::vector<Context*> contexts(d.list.size(), nullptr);  // never destroyed (see Libraries)
  std::lock_guard lock(mutex);
  auto& c = contexts[static_cast<std::size_t>(index)];
  if (c == nullptr) c = new Context(index);
  return *c;
}

Context::Context(int index) : state_(std::make_unique<State>()) {
  info_ = probe().list[static_cast<std::size_t>(index)];
  arch_ = arch_for(info_);
  activate();
  KILN_GPU_CHECK(gpu_api::stream_create(&stream_));
#if !defined(KILN_GPU_HIP)
  KILN_CUBLAS_CHECK(cublasCreate(&cublas_));
  KILN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
#endif
  KILN_GPU_CHECK(gpu_api::event_create(&state_->staging_done));
}

std::string Context::arch() const { return arch_; }


void Context::activate() const {
  if (current_device == info_.index) return;
  KILN_GPU_CHECK(gpu_api::set_device(info_.index));
  current_device = info_.index;
}

namespace {
// Size classes: multiples of 512 bytes up to 1 MiB, of 2 MiB above.
std::size_t size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  const std::size_t unit = bytes <= (std::size_t{1} << 20) ? 512 : std::size_t{2} << 20;
  return (bytes + unit - 1) / unit * unit;
}
}  // namespace

std::shared_ptr<Buffer> Context::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  void* block = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    // A cached block of this class, or of a larger one up to twice the size.
    auto it = state_->free_blocks.lower_bound(size);
    if (it != state_->free_blocks.end() && it->first <= 2 * size) {
      block = it->second;
      const std::size_t got = it->first;
      state_->free_blocks.erase(it);
      state_->stats.cache_hits++;
      state_->stats.allocated += static_cast<std::int64_t>(got);
      state_->stats.peak_allocated = std::max(state_->stats.peak_allocated, state_->stats.allocated);
      auto buffer = std::make_shared<Buffer>();
      buffer->data = block;
      buffer->bytes = got;
      buffer->device = info_.index;
      return buffer;
    }
  }
  activate();
  gpu_api::Error status = gpu_api::malloc(&block, size);
  if (gpu_api::out_of_memory(status)) {
    (void)gpu_api::last_error();
    empty_cache(info_.index);  // give the cached blocks back and try once more
    status = gpu_api::malloc(&block, size);
  }
  if (status != gpu_api::success) {
    (void)gpu_api::last_error();
    const MemoryStats s = memory_stats(info_.index);
    KILN_FAIL(KILN_GPU_ID ": out of memory: {} bytes on device {} ({}) failed: {} ({} bytes allocated, {} reserved)",
              size, info_.index, info_.name, gpu_api::error_string(status), s.allocated, s.reserved);
  }
  std::lock_guard lock(state_->mutex);
  state_->stats.device_allocations++;
  state_->stats.reserved += static_cast<std::int64_t>(size);
  state_->stats.allocated += static_cast<std::int64_t>(size);
  state_->stats.peak_allocated = std::max(state_->stats.peak_allocated, state_->stats.allocated);
  auto buffer = std::make_shared<Buffer>();
  buffer->data = block;
  buffer->bytes = size;
  buffer->device = info_.index;
  return buffer;
}

Buffer::~Buffer() {
  if (data == nullptr) return;
  Context& c = Context::get(device);
  Context::State& s = *c.state();
  std::lock_guard lock(s.mutex);
  s.free_blocks.emplace(bytes, data);
  s.stats.allocated -= static_cast<std::int64_t>(bytes);
}

MemoryStats memory_stats(int device) {
  Context& c = Context::get(device);
  Context::State& s = *c.state();
  std::lock_guard lock(s.mutex);
  return s.stats;
}

void empty_cache(int device) {
  Context& c = Context::get(device);
  Context::State& s = *c.state();
  c.synchronize();  // no queued kernel may still use a block given back
  std::lock_guard lock(s.mutex);
  c.activate();
  for (const auto& [bytes, block] : s.free_blocks) {
    (void)gpu_api::free(block);
    s.stats.reserved -= static_cast<std::int64_t>(bytes);
  }
  s.free_blocks.clear();
}

// ---- host transfers

namespace {
constexpr std::size_t kMaxStaging = std::size_t{64} << 20;  // larger transfers go directly
}

void Context::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  activate();
  if (bytes > kMaxStaging) {
    // From pageable memory: returns once the source has been read.
    KILN_GPU_CHECK(gpu_api::to_device(device_dst, host_src, bytes, stream_));
    return;
  }
  std::lock_guard lock(state_->staging_mutex);
  KILN_GPU_CHECK(gpu_api::event_synchronize(state_->staging_done));  // the last upload has left staging
  if (state_->staging_bytes < bytes) {
    if (state_->staging != nullptr) KILN_GPU_CHECK(gpu_api::host_free(state_->staging));
    state_->staging_bytes = std::max(bytes, std::size_t{1} << 20);
    KILN_GPU_CHECK(gpu_api::host_alloc(&state_->staging, state_->staging_bytes));
  }
  std::memcpy(state_->staging, host_src, bytes);
  KILN_GPU_CHECK(gpu_api::to_device(device_dst, state_->staging, bytes, stream_));
  KILN_GPU_CHECK(gpu_api::event_record(state_->staging_done, stream_));
}

void Context::download(void* host_dst, const void* device_src, std::size_t bytes) {
  activate();
  if (bytes == 0 || bytes > kMaxStaging) {
    if (bytes > 0) KILN_GPU_CHECK(gpu_api::to_host(host_dst, device_src, bytes, stream_));
    synchronize();
    return;
  }
  std::lock_guard lock(state_->staging_mutex);
  if (state_->staging_bytes < bytes) {
    KILN_GPU_CHECK(gpu_api::event_synchronize(state_->staging_done));
    if (state_->staging != nullptr) KILN_GPU_CHECK(gpu_api::host_free(state_->staging));
    state_->staging_bytes = std::max(bytes, std::size_t{1} << 20);
    KILN_GPU_CHECK(gpu_api::host_alloc(&state_->staging, state_->staging_bytes));
  }
  KILN_GPU_CHECK(gpu_api::to_host(state_->staging, device_src, bytes, stream_));
  synchronize();
  std::memcpy(host_dst, state_->staging, bytes);
}

void Context::synchronize() {
  activate();
  sync_count.fetch_add(1, std::memory_order_relaxed);
  const gpu_api::Error status = gpu_api::stream_synchronize(stream_);
  KILN_CHECK(status == gpu_api::success, KILN_GPU_ID ": a kernel on device {} failed: {} ({})", info_.index,
             gpu_api::error_string(status), static_cast<int>(status));
}

void synchronize(int device) { Context::get(device).synchronize(); }

void* device_address(const Tensor& tensor) { return address(tensor); }

void* device_stream(int device) {
  Context& c = Context::get(device);
  c.activate();
  return c.stream();
}

// ---- compilation

std::string cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return (std::filesystem::path(xdg) / "kiln").string();
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return (std::filesystem::path(home) / ".cache" / "kiln").string();
  return {};
}

const Kernel& Context::kernel(const std::string& source, std::string_view entry) {
  const std::string target = arch();
  std::string key = fmt::format("{} {} no-fma\n", compiler_version(), target);
  key += source;
  // In memory, by device too: a HIP module belongs to the device it was loaded on.
  const std::string loaded_key = fmt::format("{}\n{}", info_.index, key);
  const std::string kernel_key = loaded_key + '\0' + std::string(entry);
  Libraries& l = libraries();
  {
    std::lock_guard lock(l.mutex);
    if (auto it = l.kernels.find(kernel_key); it != l.kernels.end()) return *it->second;
  }
  gpu_api::Library library = nullptr;
  {
    std::lock_guard lock(l.mutex);
    if (auto it = l.by_key.find(loaded_key); it != l.by_key.end()) library = it->second;
  }
  if (library == nullptr) {
    const std::string dir = cache_dir();
    const std::filesystem::path file =
        dir.empty() ? std::filesystem::path() : std::filesystem::path(dir) / KILN_GPU_ID / fmt::format("{:016x}.bin", fnv1a(key));
    std::optional<std::string> image;
    if (!dir.empty()) image = cache_read(file, key);
    if (image) {
      disk_hit_count.fetch_add(1, std::memory_order_relaxed);
    } else {
      image = compile(source, target);
      if (!dir.empty()) cache_write(file, key, *image);
    }
    activate();
    KILN_GPU_CHECK(gpu_api::load(&library, image->data()));
    std::lock_guard lock(l.mutex);
    auto [it, added] = l.by_key.emplace(loaded_key, library);
    if (!added) {
      (void)gpu_api::unload(library);  // another thread loaded it meanwhile
      library = it->second;
    }
  }
  auto kernel = std::make_unique<Kernel>();
  kernel->name = std::string(entry);
  const std::string entry_name(entry);
  KILN_GPU_CHECK(gpu_api::function(&kernel->function, library, entry_name.c_str()));
  std::lock_guard lock(l.mutex);
  return *l.kernels.emplace(kernel_key, std::move(kernel)).first->second;
}

void Context::launch(const Kernel& kernel, dim3 grid, dim3 block, void** args, std::size_t shared_bytes) {
  activate();
  launch_count.fetch_add(1, std::memory_order_relaxed);
  const auto started = profile_begin();
  const gpu_api::Error status = gpu_api::launch(kernel.function, grid, block, args, shared_bytes, stream_);
  KILN_CHECK(status == gpu_api::success, KILN_GPU_ID ": launching {} ({} x {} threads) failed: {}", kernel.name,
             grid.x * std::uint64_t{grid.y}, block.x, gpu_api::error_string(status));
  profile_end(kernel.name == "kiln_elementwise" ? "elementwise / row program" : kernel.name, started);
}

double Context::profile_begin() {
  if (profile() == nullptr) return 0;
  KILN_GPU_CHECK(gpu_api::stream_synchronize(stream_));
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Context::profile_end(std::string_view name, double started) {
  Profile* p = profile();
  if (p == nullptr) return;
  KILN_GPU_CHECK(gpu_api::stream_synchronize(stream_));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() - started;
  std::lock_guard lock(p->mutex);
  auto& row = p->kernels[std::string(name)];
  row.first += seconds;
  row.second++;
}

std::uint64_t compilations() { return compile_count.load(std::memory_order_relaxed); }
std::uint64_t disk_cache_hits() { return disk_hit_count.load(std::memory_order_relaxed); }
std::uint64_t launches() { return launch_count.load(std::memory_order_relaxed); }

const Kernel& file_kernel(int device, std::string_view file, std::span<const std::string> defines,
                          std::string_view entry) {
  // The source text is built once per variant, and each kernel found once per device: a
  // repeated request hashes only its short name.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::string> sources;
  static std::unordered_map<std::string, const Kernel*> kernels;
  std::string name = fmt::format("{}|{}", file, fmt::join(defines, "|"));
  const std::string kernel_name = fmt::format("{}|{}|{}", name, entry, device);
  const std::string* source = nullptr;
  {
    std::lock_guard lock(mutex);
    if (auto found = kernels.find(kernel_name); found != kernels.end()) return *found->second;
    auto it = sources.find(name);
    if (it == sources.end()) {
      const std::string_view text = kernel_source(file);
      KILN_CHECK(!text.empty(), KILN_GPU_ID ": the library was built without kernels/cuda/{}.cu", file);
      std::string s;
      for (const std::string& d : defines) {
        const std::size_t eq = d.find('=');
        s += eq == std::string::npos ? fmt::format("#define {}\n", d)
                                     : fmt::format("#define {} {}\n", d.substr(0, eq), d.substr(eq + 1));
      }
      s += prelude();
      s += text;
      it = sources.emplace(name, std::move(s)).first;
    }
    source = &it->second;  // node-based map: stays valid
  }
  const Kernel& kernel = Context::get(device).kernel(*source, entry);
  std::lock_guard lock(mutex);
  kernels.emplace(kernel_name, &kernel);
  return kernel;
}

// ---- tensors

Tensor empty(const Shape& shape, DType dtype, int device) {
  for (auto d : shape) KILN_CHECK(d >= 0, KILN_GPU_ID ": negative dimension in shape {}", shape);
  Context& c = Context::get(device);
  Tensor t;
  t.buffer = c.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  t.device = c.index();
  t.shape = shape;
  t.strides = shape.contiguous_strides();
  t.dtype = dtype;
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, int device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() == 0) return t;
  Context& context = Context::get(t.device);
  context.activate();
  KILN_GPU_CHECK(gpu_api::zero(t.buffer->data, static_cast<std::size_t>(t.numel()) * dtype_size(dtype),
                               context.stream()));
  return t;
}

void* address(const Tensor& t) {
  return static_cast<char*>(t.buffer->data) + t.offset * static_cast<std::int64_t>(dtype_size(t.dtype));
}

std::string_view storage_type(DType dtype) { return codegen::detail::cuda_storage_type(dtype); }

bool is_half(DType dtype) { return codegen::is_half(dtype); }

#if defined(KILN_GPU_HIP)
std::string prelude() { return codegen::hip_prelude(); }
const codegen::KernelDialect& dialect() { return codegen::hip_kernels(); }
#else
std::string prelude() { return codegen::cuda_prelude(); }
const codegen::KernelDialect& dialect() { return codegen::cuda_kernels(); }
#endif

}  // namespace kiln::KILN_GPU_NAMESPACE
