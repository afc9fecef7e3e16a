// ONNX's node tests (Debian's libonnx-testdata: one folder per case, a model.onnx and
// test_data_set_*/{input,output}_*.pb) run through onnx::Model<Dispatch> on the backend that
// --backend or KILN_BACKEND names. Each case passes (every output of the right dtype and
// shape, values within --rtol (1e-3) and --atol (1e-5) for floats, equal otherwise), fails,
// or is unsupported (a kiln::onnx::Unsupported error: an op, attribute value or element type
// Kiln does not run). Prints the counts by op type and the overall rate; exits non-zero when
// any case fails, or when a case of an op in --require is unsupported (with --strict, when
// any case is). tests/golden/onnx holds models exported by PyTorch in the same layout.
//
//   kiln_onnx_node_tests [--data DIR] [--backend cpu] [--filter SUBSTRING] [--verbose]
//                        [--require Op,Op,...] [--strict] [--rtol R] [--atol A] [--markdown FILE]
#include <kiln/onnx/model.hpp>
#ifdef KILN_NODE_RUNNER_EMBEDDED
#include <kiln/cpu/backend.hpp>
#else
#include <kiln/dispatch/backend.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

#ifdef KILN_NODE_RUNNER_EMBEDDED
// kiln_onnx_node_tests_embedded: the same cases on kiln::cpu_embedded (no oneDNN, no OpenMP),
// through Model<Cpu>; --backend is not read.
using Runner = Cpu;
Cpu::Device device_named(const std::string&) { return {}; }
std::string device_name(const Cpu::Device&) { return "cpu_embedded"; }
std::string unavailable(const Cpu::Device&) { return ""; }
#else
using Runner = Dispatch;
Dispatch::Device device_named(const std::string& name) {
  return name.empty() ? Dispatch::Device{} : Dispatch::Device::parse(name);
}
std::string device_name(const Dispatch::Device& device) { return Dispatch::resolve(device).str(); }
std::string unavailable(const Dispatch::Device& device) { return dispatch::unavailable_reason(Dispatch::resolve(device)); }
#endif

enum class Outcome { pass, fail, unsupported };

struct Result {
  Outcome outcome;
  std::string message;
};

// Whether `got` matches `want`: dtype, shape, then values.
double rtol_option = 1e-3, atol_option = 1e-5;

std::string compare(const TensorData& got, const TensorData& want) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return "shape " + got.shape().str() + ", expected " + want.shape().str();
  const std::vector<double> g = got.to_vec<double>(), w = want.to_vec<double>();
  const bool exact = !is_float(want.dtype());
  const double rtol = want.dtype() == DType::f16 || want.dtype() == DType::bf16 ? std::max(1e-2, rtol_option) : rtol_option;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                      (!exact && std::abs(g[i] - w[i]) <= atol_option + rtol * std::abs(w[i]));
    if (!same) {
      std::ostringstream s;
      s << "element " << i << " is " << g[i] << ", expected " << w[i];
      return s.str();
    }
  }
  return "";
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  // input_10 after input_9.
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) {
    const auto number = [&](const fs::path& p) { return std::stoi(p.stem().string().substr(prefix.size())); };
    return number(a) < number(b);
  });
  return files;
}

using Value = onnx::Value<Runner>;
using Kind = onnx::ValueInfo::Kind;

// ONNX's generator wrote the BFLOAT16 tensors of the Cast and CastLike tests as UINT16 (their
// bit patterns): such a tensor, where a BFLOAT16 one is declared or expected, is read as one.
TensorData bfloat16_from_bits(const onnx::TensorValue& t) {
  const std::vector<std::int64_t> bits = t.data->to_vec<std::int64_t>();
  std::vector<std::byte> bytes(bits.size() * 2);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const auto b = static_cast<std::uint16_t>(bits[i]);
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  return TensorData(std::move(bytes), t.data->shape(), DType::bf16);
}

// A test's value (a .pb file) as a Value to feed, the declared element type `declared`.
Value fed(const onnx::DataValue& v, onnx::ElementType declared, const Runner::Device& device) {
  switch (v.kind) {
    case Kind::sequence: {
      std::vector<Value> elements;
      for (const onnx::DataValue& e : v.elements) elements.push_back(fed(e, declared, device));
      return Value::sequence(std::move(elements), declared);
    }
    case Kind::optional: return v.elements.empty() ? Value::none() : fed(v.elements[0], declared, device);
    default: break;
  }
  const onnx::TensorValue& t = v.tensor;
  if (t.type == onnx::ElementType::uint16 && declared == onnx::ElementType::bfloat16 && t.data)
    return Value::host(bfloat16_from_bits(t), device);
  if (t.type == onnx::ElementType::string) return Value::strings(Shape(t.dims), t.strings);
  if (!t.data) onnx::unsupported("an input holds {} elements, which Kiln does not hold", onnx::element_type_name(t.type));
  return onnx::tensor_value<Runner>(t, device, "input");
}

// Whether `got` matches `want`: kind, element type, shape, then values.
std::string compare_value(const Value& got, const onnx::DataValue& want) {
  switch (want.kind) {
    case Kind::optional:
      if (want.elements.empty())
        return got.kind() == Value::Kind::none ? "" : "got " + got.describe() + ", expected an empty optional";
      if (got.kind() == Value::Kind::none) return "got an empty optional";
      return compare_value(got, want.elements[0]);
    case Kind::sequence: {
      if (got.kind() != Value::Kind::sequence) return "got " + got.describe() + ", expected a sequence";
      if (got.elements().size() != want.elements.size())
        return "a sequence of " + std::to_string(got.elements().size()) + " elements, expected " +
               std::to_string(want.elements.size());
      for (std::size_t i = 0; i < want.elements.size(); ++i)
        if (std::string d = compare_value(got.elements()[i], want.elements[i]); !d.empty())
          return "element " + std::to_string(i) + ": " + d;
      return "";
    }
    default: break;
  }
  const onnx::TensorValue& t = want.tensor;
  if (!got.is_tensor()) return "got " + got.describe() + ", expected a tensor";
  if (t.type == onnx::ElementType::string) {
    if (got.kind() != Value::Kind::strings) return "got " + got.describe() + ", expected STRING";
    if (got.shape() != Shape(t.dims)) return "shape " + got.shape().str() + ", expected " + Shape(t.dims).str();
    for (std::size_t i = 0; i < t.strings.size(); ++i)
      if (got.string_values()[i] != t.strings[i])
        return "element " + std::to_string(i) + " is '" + got.string_values()[i] + "', expected '" + t.strings[i] + "'";
    return "";
  }
  if (t.type == onnx::ElementType::uint16 && got.type() == onnx::ElementType::bfloat16 && t.data)
    return compare(got.data(), bfloat16_from_bits(t));
  if (!t.data) onnx::unsupported("an output holds {} elements", onnx::element_type_name(t.type));
  if (got.type() != t.type)
    return "element type " + onnx::element_type_name(got.type()) + ", expected " + onnx::element_type_name(t.type);
  return compare(got.data(), *t.data);
}

Result run_case(const fs::path& dir, const Runner::Device& device) {
  try {
    const onnx::Model<Runner> model(onnx::load_model(dir / "model.onnx"), device);
    bool any = false;
    for (const auto& set : fs::directory_iterator(dir)) {
      if (!set.is_directory() || set.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      any = true;
      const std::vector<fs::path> files = sorted_files(set.path(), "input_");
      // A model input that the test leaves out is an omitted optional input: not run here.
      if (files.size() != model.inputs().size())
        onnx::unsupported("the test feeds {} inputs to a model of {}", files.size(), model.inputs().size());
      std::vector<Value> inputs;
      for (std::size_t i = 0; i < files.size(); ++i) {
        const onnx::ValueInfo& info = model.inputs()[i];
        inputs.push_back(fed(onnx::load_value(files[i], info.kind), info.type, device));
        // ONNX's generator wrote some inputs with dims other than the model declares (the
        // `like` input of the BFLOAT16 CastLike tests): such a case cannot run as given.
        if (info.shape && inputs.back().is_tensor()) {
          const Shape s = inputs.back().shape();
          bool same = s.rank() == info.shape->size();
          for (std::size_t d = 0; same && d < s.rank(); ++d) same = (*info.shape)[d].value < 0 || (*info.shape)[d].value == s[d];
          if (!same) onnx::unsupported("the test's input '{}' has shape {}, which its model does not declare", info.name, s);
        }
      }
      const std::vector<Value> outputs = model.run_values(std::move(inputs));
      const std::vector<fs::path> expected = sorted_files(set.path(), "output_");
      if (expected.size() != outputs.size())
        return {Outcome::fail, std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size())};
      for (std::size_t k = 0; k < expected.size(); ++k) {
        const onnx::DataValue want = onnx::load_value(expected[k], model.outputs()[k].kind);
        const std::string diff = compare_value(outputs[k], want);
        if (!diff.empty()) return {Outcome::fail, set.path().filename().string() + " output " + std::to_string(k) + ": " + diff};
      }
    }
    if (!any) return {Outcome::fail, "no test_data_set_* folder"};
    return {Outcome::pass, ""};
  } catch (const onnx::Unsupported& e) {
    return {Outcome::unsupported, e.what()};
  } catch (const Error& e) {
    return {Outcome::fail, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::fail, std::string("std::exception: ") + e.what()};
  }
}

// The op type a case tests: its model's single op, or the first op of several.
std::string case_op(const fs::path& dir) {
  try {
    const onnx::ModelFile m = onnx::load_model(dir / "model.onnx");
    if (m.graph.nodes.empty()) return "(none)";
    return m.graph.nodes.front().op_type;
  } catch (const Error&) {
    return "(unreadable)";
  }
}

std::set<std::string> split(const std::string& list) {
  std::set<std::string> out;
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.insert(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path data = "/usr/share/libonnx-testdata/data/node";
  std::string backend, filter, markdown;
  std::set<std::string> required;
  bool verbose = false, strict = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--data") data = value();
    else if (arg == "--backend") backend = value();
    else if (arg == "--filter") filter = value();
    else if (arg == "--require") required = split(value());
    else if (arg == "--markdown") markdown = value();
    else if (arg == "--verbose") verbose = true;
    else if (arg == "--strict") strict = true;
    else if (arg == "--rtol") rtol_option = std::stod(value());
    else if (arg == "--atol") atol_option = std::stod(value());
    else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (!fs::is_directory(data)) {
    // ctest reads this line as a skip (SKIP_REGULAR_EXPRESSION).
    std::cout << "SKIPPED: no ONNX node tests at " << data << " (apt-get install libonnx-testdata)\n";
    return 0;
  }
  const Runner::Device device = device_named(backend);
  if (const std::string reason = unavailable(device); !reason.empty()) {
    std::cout << "SKIPPED: backend " << device_name(device) << ": " << reason << "\n";
    return 0;
  }

  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  struct Counts {
    int pass = 0, fail = 0, unsupported = 0;
  };
  std::map<std::string, Counts> by_op;
  Counts total;
  int bad = 0;
  for (const fs::path& dir : cases) {
    const std::string op = case_op(dir);
    const Result r = run_case(dir, device);
    Counts& c = by_op[op];
    const std::string name = dir.filename().string();
    switch (r.outcome) {
      case Outcome::pass: ++c.pass, ++total.pass; break;
      case Outcome::fail: ++c.fail, ++total.fail; break;
      case Outcome::unsupported: ++c.unsupported, ++total.unsupported; break;
    }
    const bool required_missing = r.outcome == Outcome::unsupported && (strict || required.count(op));
    if (r.outcome == Outcome::fail || required_missing) ++bad;
    if (r.outcome == Outcome::fail || required_missing || (verbose && r.outcome != Outcome::pass))
      std::cout << (r.outcome == Outcome::fail ? "FAIL " : "UNSUPPORTED ") << name << ": " << r.message << "\n";
  }

  std::cout << "\nop type                        pass  fail  unsupported\n";
  for (const auto& [op, c] : by_op)
    std::printf("%-30s %4d  %4d  %4d\n", op.c_str(), c.pass, c.fail, c.unsupported);
  const int n = static_cast<int>(cases.size());
  std::printf("\n%d cases on %s: %d pass (%.1f%%), %d fail, %d unsupported\n", n,
              device_name(device).c_str(), total.pass, n ? 100.0 * total.pass / n : 0.0, total.fail,
              total.unsupported);
  if (!markdown.empty()) {
    // docs/onnx-ops.md: every op type Kiln runs, with its opsets and its node-test counts,
    // then the op types of node tests that Kiln does not run.
    const auto& table = onnx::op_table<Runner>();
    std::ofstream out(markdown);
    out << "<!-- Generated by kiln_onnx_node_tests --markdown (tests/onnx/node_runner.cpp) from the op table of\n"
           "     kiln/onnx/model.hpp and a run of ONNX's node tests (Debian's libonnx-testdata) on "
        << device_name(device) << ". -->\n\n";
    out << "## Operators Kiln runs\n\n| op type | opsets | node tests passed | failed | unsupported |\n|---|---|---:|---:|---:|\n";
    for (const auto& [op, entry] : table) {
      const auto c = by_op.count(op) ? by_op.at(op) : Counts{};
      out << "| " << op << " | " << entry.first_opset << "–" << entry.last_opset << " | " << c.pass << " | " << c.fail
          << " | " << c.unsupported << " |\n";
    }
    out << "\n## Op types of the node tests that Kiln does not run\n\n";
    std::string missing;
    for (const auto& [op, c] : by_op)
      if (!table.count(op)) missing += (missing.empty() ? "" : ", ") + op + " (" + std::to_string(c.unsupported + c.fail + c.pass) + ")";
    char rate[16];
    std::snprintf(rate, sizeof rate, "%.1f", n ? 100.0 * total.pass / n : 0.0);
    out << missing << "\n\n## Node tests\n\n" << n << " cases: " << total.pass << " pass (" << rate << " %), "
        << total.fail << " fail, " << total.unsupported << " unsupported.\n";
  }
  return bad == 0 ? 0 : 1;
}
