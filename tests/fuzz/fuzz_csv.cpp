// libFuzzer target: text → kiln::data::parse_csv, with and without a header row, in f32
// and f64. Any input must be rejected with kiln::Error or give rows of one length.
#include <kiln/data/csv.hpp>

#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool header : {true, false}) {
    try {
      const auto table = kiln::data::parse_csv(
          text, "fuzz.csv", {.header = header, .dtype = header ? kiln::DType::f32 : kiln::DType::f64});
      if (table.size() > 0 && table.get(table.size() - 1).shape().numel() != static_cast<std::int64_t>(table.columns().size()))
        std::abort();
    } catch (const kiln::Error&) {
    }
  }
  return 0;
}
