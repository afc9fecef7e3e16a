// A unit test of examples/common/flags.hpp: values read in both spellings, bad values refused
// with exit code 2 and the bound variable left at its default. The refusal messages are
// checked on the examples themselves (examples/CMakeLists.txt, check_cli.cmake).
#include "flags.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, std::string_view what) {
  if (!ok) {
    fmt::print(stderr, "flags_test: FAILED: {}\n", what);
    ++failures;
  }
}

struct Values {
  std::int64_t epochs = 3;
  std::size_t count = 10;
  double lr = 1e-3;
  std::string backend = "cpu";
  std::filesystem::path output = "runs";
  bool resume = false;
};

// Parses `arguments` (those after the program name) into `values`.
std::optional<int> parse(const std::vector<const char*>& arguments, Values& values) {
  examples::Flags flags("flags_test", "Tests the examples' flag parser.");
  flags.add("--epochs", values.epochs, "N", "epochs", examples::positive);
  flags.add("--count", values.count, "N", "images", examples::positive);
  flags.add("--lr", values.lr, "X", "learning rate", examples::non_negative);
  flags.add("--backend", values.backend, "NAME", "backend");
  flags.add("--output", values.output, "DIR", "output");
  flags.add("--resume", values.resume, "resume");
  std::vector<const char*> argv{"flags_test"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return flags.parse(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

int main() {
  Values v;
  check(!parse({}, v) && v.epochs == 3 && v.count == 10 && v.lr == 1e-3 && !v.resume, "defaults are kept");
  check(!parse({"--epochs", "5", "--count=7", "--lr", "0.5", "--backend=vulkan", "--output", "x", "--resume"}, v),
        "a good command line parses");
  check(v.epochs == 5 && v.count == 7 && v.lr == 0.5 && v.backend == "vulkan" && v.output == "x" && v.resume,
        "values are stored in both spellings");

  for (const auto& bad : std::vector<std::vector<const char*>>{{"--count", "-5"},
                                                               {"--count", "5x"},
                                                               {"--count", "0"},
                                                               {"--epochs", "-1"},
                                                               {"--count", "99999999999999999999999"},
                                                               {"--lr", "abc"},
                                                               {"--lr", "-0.1"},
                                                               {"--lr", "nan"},
                                                               {"--epochs"},
                                                               {"--backend", "--resume"},
                                                               {"--backend="},
                                                               {"--resume=yes"},
                                                               {"--bogus"},
                                                               {"stray"}}) {
    Values fresh;
    check(parse(bad, fresh) == 2, fmt::format("'{}' is refused with exit code 2", fmt::join(bad, " ")));
    check(fresh.count == 10 && fresh.epochs == 3 && fresh.lr == 1e-3 && fresh.backend == "cpu",
          "a refused value is not stored");
  }

  examples::Flags flags("flags_test", "Tests.");
  std::size_t count = 10;
  flags.add("--count", count, "N", "how many");
  const std::string usage = flags.usage();
  check(usage.find("--count N") != std::string::npos && usage.find("(default: 10)") != std::string::npos,
        "the usage lists each flag with its default");
  if (failures == 0) fmt::print("flags_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
