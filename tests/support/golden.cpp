#include "golden.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

namespace kiln::test {
namespace {

DType parse_dtype(const std::string& s) {
  for (int i = 0; i < dtype_count; ++i)
    if (dtype_name(static_cast<DType>(i)) == s) return static_cast<DType>(i);
  throw Error("golden: unknown dtype " + s);
}

double parse_value(const std::string& s) {
  if (s == "nan") return std::nan("");
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  // strtod, not stod: stod throws on subnormal values, which fixtures may hold.
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  KILN_CHECK(end != s.c_str() && *end == '\0', "golden: '{}' is not a number", s);
  return v;
}

std::map<std::string, GoldenCase> load_family(const std::string& family) {
  const std::string path = std::string(KILN_GOLDEN_DIR) + "/" + family + ".golden";
  std::ifstream in(path);
  KILN_CHECK(in.good(), "golden: cannot open {} (regenerate with /usr/bin/python3 tests/golden/generate.py)", path);
  std::map<std::string, GoldenCase> cases;
  GoldenCase* current = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "case") {
      std::string name;
      ls >> name;
      current = &cases[name];
      current->name = name;
    } else if (word == "tensor") {
      KILN_CHECK(current != nullptr, "golden: tensor before any case in {}", path);
      std::string label, dtype_text, colon;
      std::size_t rank = 0;
      ls >> label >> dtype_text >> rank;
      std::vector<std::int64_t> dims(rank);
      for (auto& d : dims) ls >> d;
      ls >> colon;
      std::vector<double> values;
      std::string v;
      while (ls >> v) values.push_back(parse_value(v));
      const DType dtype = parse_dtype(dtype_text);
      current->tensors[label] = TensorData::from(values, Shape(dims)).convert(dtype);
    }
  }
  return cases;
}

}  // namespace

const TensorData& GoldenCase::operator[](const std::string& label) const {
  auto it = tensors.find(label);
  KILN_CHECK(it != tensors.end(), "golden: case {} has no tensor '{}'", name, label);
  return it->second;
}

namespace {
const std::map<std::string, GoldenCase>& family_cases(const std::string& family) {
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, GoldenCase>> families;
  std::lock_guard lock(mutex);
  auto it = families.find(family);
  if (it == families.end()) it = families.emplace(family, load_family(family)).first;
  return it->second;
}
}  // namespace

std::vector<std::string> golden_case_names(const std::string& family) {
  std::vector<std::string> names;
  for (const auto& [name, c] : family_cases(family)) names.push_back(name);
  return names;
}

const GoldenCase& golden(const std::string& family, const std::string& name) {
  const auto& cases = family_cases(family);
  auto c = cases.find(name);
  KILN_CHECK(c != cases.end(), "golden: {}.golden has no case '{}' (regenerate the fixtures)", family, name);
  return c->second;
}

::testing::AssertionResult all_close(const TensorData& actual, const TensorData& expected, double rtol, double atol) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << actual.shape().str() << " != expected "
                                         << expected.shape().str();
  const bool kinds_match = (is_float(actual.dtype()) && is_float(expected.dtype())) ||
                           (is_int(actual.dtype()) && is_int(expected.dtype())) ||
                           (is_bool(actual.dtype()) && is_bool(expected.dtype()));
  if (!kinds_match)
    return ::testing::AssertionFailure() << "dtype " << dtype_name(actual.dtype()) << " is not of the kind of "
                                         << dtype_name(expected.dtype());
  const auto a = actual.to_vec<double>();
  const auto e = expected.to_vec<double>();
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool ok = (std::isnan(a[i]) && std::isnan(e[i])) || a[i] == e[i] ||
                    std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!ok && bad++ == 0) first = fmt::format("element {}: {} != expected {}", i, a[i], e[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ; first " << first;
}

}  // namespace kiln::test
