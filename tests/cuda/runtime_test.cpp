// The CUDA backend's runtime: the kernels of kernels/cuda compile for the architectures Kiln
// targets (NVRTC, no GPU needed); a machine without a GPU loads the library and reports "no
// CUDA device" at the first op; on a GPU, the caching allocator reuses memory, a compiled
// program lands in the disk cache and a second process compiles nothing.
#include "codegen/cuda.hpp"

#include <kiln/cuda/backend.hpp>
#include <kiln/tensor.hpp>

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using kiln::Cuda;
using kiln::DType;
using kiln::Shape;
using kiln::TensorData;

std::vector<std::filesystem::path> kernel_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_CUDA_KERNELS_DIR))
    if (entry.path().extension() == ".cu") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// NVRTC compiles `source` to machine code for `arch`; the log on failure.
std::string compile(const std::string& source, const std::string& arch) {
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, source.c_str(), "kernel.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return "nvrtcCreateProgram failed";
  const std::string option = "--gpu-architecture=" + arch;
  const char* options[] = {option.c_str(), "--std=c++17", "--fmad=false", "-default-device"};
  const nvrtcResult result = nvrtcCompileProgram(program, 4, options);
  std::string log;
  if (result != NVRTC_SUCCESS) {
    std::size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    log.resize(size);
    nvrtcGetProgramLog(program, log.data());
    log = std::string(nvrtcGetErrorString(result)) + "\n" + log;
  } else {
    std::size_t size = 0;
    nvrtcGetCUBINSize(program, &size);
    if (size == 0) log = "no machine code";
  }
  nvrtcDestroyProgram(&program);
  return log;
}

TEST(CudaKernels, EveryKernelFileCompilesForSm80AndSm90) {
  const auto files = kernel_files();
  ASSERT_FALSE(files.empty()) << "no kernels/cuda/*.cu found in " << KILN_CUDA_KERNELS_DIR;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("extern \"C\" __global__"), std::string::npos) << file << " has no kernel entry";
    // As the backend compiles it: the prelude (types, f16 / bf16 conversions) first.
    const std::string source = kiln::codegen::cuda_prelude() + text.str();
    for (const char* arch : {"sm_80", "sm_90"}) EXPECT_EQ(compile(source, arch), "") << file << " for " << arch;
  }
}

// Without a GPU the library loads (this binary started), lists no device, and the first op
// throws a kiln::Error that says so; with one, the op runs. Either way something is checked.
TEST(CudaRuntime, NoDeviceIsAnErrorAtFirstUseNotAtLoad) {
  const std::string why = kiln::cuda::unavailable_reason();
  const TensorData data = TensorData::from(std::vector<float>{1, 2, 3}, Shape{3});
  if (!why.empty()) {
    EXPECT_TRUE(kiln::cuda::devices().empty());
    EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
    try {
      (void)Cuda::from_data(data, {});
      ADD_FAILURE() << "from_data ran without a CUDA device";
    } catch (const kiln::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
  } else {
    ASSERT_FALSE(kiln::cuda::devices().empty());
    EXPECT_EQ(Cuda::into_data(Cuda::from_data(data, {})).to_vec<float>(), (std::vector<float>{1, 2, 3}));
  }
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kiln::cuda::unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(CudaDeviceTest, FreedMemoryIsReusedFromTheCache) {
  const Shape shape{1 << 20};
  { const auto t = Cuda::full(shape, 1.0, DType::f32, {}); }
  const auto before = kiln::cuda::memory_stats();
  { const auto t = Cuda::full(shape, 2.0, DType::f32, {}); }
  const auto after = kiln::cuda::memory_stats();
  EXPECT_EQ(after.device_allocations, before.device_allocations) << "the second tensor took new device memory";
  EXPECT_GT(after.cache_hits, before.cache_hits);
  EXPECT_GE(after.reserved, std::int64_t{4} << 20);
  kiln::cuda::empty_cache();
  EXPECT_LT(kiln::cuda::memory_stats().reserved, after.reserved);
}

TEST_F(CudaDeviceTest, OpsQueueWithoutWaitingAndAHostReadSeesTheirResults) {
  auto x = kiln::Tensor<Cuda, 1>::from_data(TensorData::from(std::vector<float>(1000, 1.5f), Shape{1000}), {});
  const auto launches = kiln::cuda::launches();
  for (int i = 0; i < 10; ++i) x = x + x;
  EXPECT_GE(kiln::cuda::launches(), launches + 10);
  const auto values = x.into_data().to_vec<float>();
  EXPECT_FLOAT_EQ(values[0], 1.5f * 1024);
  EXPECT_FLOAT_EQ(values[999], 1.5f * 1024);
}

// A program compiled once is in the disk cache; a second process running it compiles nothing.
TEST_F(CudaDeviceTest, ASecondProcessFindsTheProgramInTheDiskCache) {
  if (const char* child = std::getenv("KILN_CUDA_TEST_CHILD"); child != nullptr) {
    // The child: the same program, which must come from the disk.
    auto x = kiln::Tensor<Cuda, 1>::from_data(TensorData::from(std::vector<float>{0.25f, 4}, Shape{2}), {});
    const auto y = (x.sqrt() * 3.0 + 1.0).into_data().to_vec<float>();
    EXPECT_FLOAT_EQ(y[1], 7.0f);
    EXPECT_EQ(kiln::cuda::compilations(), 0u);
    EXPECT_GT(kiln::cuda::disk_cache_hits(), 0u);
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cuda_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  auto x = kiln::Tensor<Cuda, 1>::from_data(TensorData::from(std::vector<float>{0.25f, 4}, Shape{2}), {});
  EXPECT_FLOAT_EQ((x.sqrt() * 3.0 + 1.0).into_data().to_vec<float>()[0], 2.5f);
  EXPECT_TRUE(std::filesystem::exists(dir / "cuda"));
  EXPECT_FALSE(std::filesystem::is_empty(dir / "cuda"));
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = "KILN_CUDA_TEST_CHILD=1 KILN_CACHE_DIR='" + dir.string() + "' '" + self +
                              "' --gtest_filter=CudaDeviceTest.ASecondProcessFindsTheProgramInTheDiskCache";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_F(CudaDeviceTest, TensorsMoveBetweenDevices) {
  if (kiln::cuda::devices().size() < 2) GTEST_SKIP() << "one CUDA device: nothing to move between";
  const auto a = Cuda::from_data(TensorData::from(std::vector<float>{1, 2}, Shape{2}), {0});
  const auto b = Cuda::to_device(a, {1});
  EXPECT_EQ(b.device, 1);
  EXPECT_EQ(Cuda::into_data(b).to_vec<float>(), (std::vector<float>{1, 2}));
}

}  // namespace
