// The install test's consumer: includes Kiln the way a user does, proves the CPU backend
// satisfies the Backend concept, computes a small result and checks it, round-trips it
// through safetensors with kiln::store, loads a CSV parsed by kiln::data in batches with
// two worker threads, and renders a dashboard frame with kiln::train (exit code 1 if
// anything is wrong).
#include <kiln/data/csv.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/kiln.hpp>
#include <kiln/store/safetensors.hpp>
#include <kiln/train/dashboard.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

static_assert(kiln::Backend<kiln::Cpu>);

int main() {
  using T = kiln::Tensor<kiln::Cpu, 2>;
  const T a = T::from({{1, 2, 3}, {4, 5, 6}});
  const T b = T::from({{10, 20}, {30, 40}, {50, 60}});
  // a * 2 + bᵀ - 1: a strided (transposed) operand through the installed kernels.
  const T c = a * 2.0 + b.transpose() - 1.0;
  const std::vector<double> expected = {11, 33, 55, 27, 49, 71};
  const std::vector<double> got = c.to_vec<double>();
  fmt::print("{}\n", c);
  if (c.dims() != T::Dims{2, 3} || got.size() != expected.size()) {
    std::fprintf(stderr, "kiln consumer: wrong shape %s\n", c.shape().str().c_str());
    return 1;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - expected[i]) > 1e-6) {
      std::fprintf(stderr, "kiln consumer: element %zu is %g, expected %g\n", i, got[i], expected[i]);
      return 1;
    }
  }
  // Through safetensors (in memory) and back, stored as f16: every value here is exact in f16.
  kiln::store::NamedTensors tensors;
  tensors.insert("c", c.into_data());
  const auto bytes = kiln::store::serialize_safetensors(tensors, {.float_dtype = kiln::DType::f16, .metadata = {}});
  const auto file = kiln::store::SafetensorsFile::from_memory(bytes, "consumer.safetensors");
  const T back = T::from_data(file.load("c", kiln::DType::f32));
  if (file.info("c").dtype != kiln::DType::f16 || back.to_vec<double>() != got) {
    std::fprintf(stderr, "kiln consumer: the safetensors round trip changed the tensor\n");
    return 1;
  }
  // kiln::data: CSV rows (parsed in libkiln_data) → batches of [2, 2] tensors from workers.
  const kiln::data::CsvTable table = kiln::data::parse_csv("a,b\n1,2\n3,4\n5,6\n7,8\n", "consumer.csv");
  const auto stack_rows = [](std::vector<kiln::TensorData> rows, const kiln::CpuDevice& device) {
    return T::from_data(kiln::data::stack(rows), device);
  };
  auto loader = kiln::data::make_loader<kiln::Cpu>(table, stack_rows, {.batch_size = 2, .workers = 2});
  std::vector<double> loaded;
  for (const T& batch : loader)
    for (const double value : batch.to_vec<double>()) loaded.push_back(value);
  if (loaded != std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}) {
    std::fprintf(stderr, "kiln consumer: the data loader gave the wrong rows\n");
    return 1;
  }
  // A dashboard frame from libkiln_train: 24 lines of 80 columns.
  kiln::train::DashboardState state;
  state.step = 3;
  state.steps = 10;
  const std::string frame = kiln::train::render_frame(state, 80, 24);
  if (std::count(frame.begin(), frame.end(), '\n') != 23 || frame.find("3/10") == std::string::npos) {
    std::fprintf(stderr, "kiln consumer: kiln::train rendered an unexpected frame:\n%s\n", frame.c_str());
    return 1;
  }
  // The instruction set of the CPU kernels the loader chose (run_install_test.cmake checks it).
  std::printf("kiln consumer: cpu kernels %.*s\n", static_cast<int>(kiln::cpu::capability().size()),
              kiln::cpu::capability().data());
  std::puts("kiln consumer: ok");
  return 0;
}
