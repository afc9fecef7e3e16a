// safetensors files that are wrong in every way the header can be: each must give a
// kiln::Error naming the file, the tensor and the bytes at fault, never a crash.
#include "budget.hpp"
#include "fixtures.hpp"
#include "store_test.hpp"

#include <kiln/store/safetensors.hpp>

#include <fmt/ranges.h>

namespace kiln::store::test {
namespace {

// A file from a header text and a data section, with the true header length unless
// `length` says otherwise.
std::vector<std::byte> file_of(std::string_view header, std::size_t data_bytes = 0,
                               std::optional<std::uint64_t> length = std::nullopt) {
  std::vector<std::byte> out;
  put_le(out, length.value_or(header.size()), 8);
  const auto text = to_bytes(header);
  out.insert(out.end(), text.begin(), text.end());
  out.resize(out.size() + data_bytes, std::byte{0x3c});
  return out;
}

// A header of tensor entries, each written as given (so that any part can be malformed).
struct Entry {
  std::string_view name, dtype, shape, offsets;
};
std::string header(std::initializer_list<Entry> entries) {
  std::vector<std::string> parts;
  for (const Entry& e : entries)
    parts.push_back(
        fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":{}}})", e.name, e.dtype, e.shape, e.offsets));
  return fmt::format("{{{}}}", fmt::join(parts, ","));
}

SafetensorsFile parse(const std::vector<std::byte>& bytes) {
  return SafetensorsFile::from_memory(bytes, "bad.safetensors");
}

TEST(SafetensorsMalformed, EveryTruncationOfAValidFileIsAnError) {
  for (const auto& bytes : {read_file(fixture("python.safetensors")), serialize_safetensors(plain_tensors())}) {
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      SCOPED_TRACE(size);
      const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
      EXPECT_KILN_ERROR(SafetensorsFile::from_memory(prefix, "cut.safetensors"), "cut.safetensors");
    }
  }
}

TEST(SafetensorsMalformed, FileShorterThanTheHeaderLength) {
  EXPECT_KILN_ERROR(parse(to_bytes("abc")), "bad.safetensors", "3 bytes", "8-byte header length");
}

TEST(SafetensorsMalformed, HeaderLengthPastTheEndOfTheFile) {
  EXPECT_KILN_ERROR(parse(file_of("{}", 0, 3)), "bad.safetensors", "header length (file bytes 0-7) is 3",
                    "only 2 bytes follow");
  EXPECT_KILN_ERROR(parse(file_of("{}", 0, ~std::uint64_t{0})), "18446744073709551615",
                    "more than the 100000000 bytes the safetensors format allows");
}

TEST(SafetensorsMalformed, HeaderLengthThatCutsTheJson) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"a", "F32", "[1]", "[0,4]"}}), 4, 20)),
                    "bad.safetensors: header: invalid JSON");
}

// A header of one long array: parsed values take about 100 bytes each, so a 99 MB header
// of zeros asked for 5 GB and died with std::bad_alloc. The parser stops at 2^22 values.
TEST(SafetensorsMalformed, HeaderWithTooManyValuesIsRefused) {
  std::string text = "{\"__metadata__\":[0";
  text.reserve(2 * (std::size_t{1} << 22) + 64);
  for (std::size_t i = 0; i < (std::size_t{1} << 22); ++i) text += ",0";
  text += "]}";
  EXPECT_KILN_ERROR(parse(file_of(text)), "bad.safetensors: header: invalid JSON", "more than 4194304 values");
}

TEST(SafetensorsMalformed, InvalidJsonNamesTheByteOffset) {
  struct Case {
    std::string_view header, expected;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", "expected a value, found end of input"},
           {"{", "expected a key string"},
           {"{\"a\" 1}", "expected ':'"},
           {"{\"a\":1,}", "expected a key string"},
           {"{\"a\":[1 2]}", "expected ',' or ']'"},
           {"{\"a\":01}", "leading zeros"},
           {"{\"a\":1.}", "after the decimal point"},
           {"{\"a\":1e}", "in the exponent"},
           {"{\"a\":tru}", "expected 'true'"},
           {"{\"a\":\"x}", "unterminated string"},
           {"{\"a\":\"\\q\"}", "invalid escape"},
           {"{\"a\":\"\\u12G4\"}", "not a hex digit"},
           {"{\"a\":\"\\udc00\"}", "lone low surrogate"},
           {"{\"a\":\"\\ud800x\"}", "without its low half"},
           {"{\"a\":\"\x01\"}", "control character 0x01"},
           {"{\"a\":\"\xc3\x28\"}", "invalid UTF-8"},
           {"{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8"},
           {"{} x", "after the end of the JSON value"},
           {"{}// comment", "after the end of the JSON value"},
           {"{'a':1}", "expected a key string"},
       }) {
    SCOPED_TRACE(c.header);
    EXPECT_KILN_ERROR(parse(file_of(c.header)), "bad.safetensors: header: invalid JSON at byte", c.expected);
  }
  EXPECT_KILN_ERROR(parse(file_of(std::string(100, '[') + std::string(100, ']'))), "nesting deeper than 64");
  EXPECT_KILN_ERROR(parse(file_of("{\"a\":1,\n\"b\":x}")), "at byte 12 (file offset 20)");
}

TEST(SafetensorsMalformed, HeaderThatIsNotAnObject) {
  EXPECT_KILN_ERROR(parse(file_of("[]")), "bad.safetensors: header: expected a JSON object, found an array");
}

TEST(SafetensorsMalformed, DuplicateTensorNames) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", "[1]", "[0,1]"}, {"w", "U8", "[1]", "[1,2]"}}), 2)),
                    "bad.safetensors", "duplicate key \"w\"");
}

TEST(SafetensorsMalformed, UnknownDtypeIsNamed) {
  for (const std::string_view dtype : {"I8", "F8_E4M3", "float32", "C64"}) {
    EXPECT_KILN_ERROR(parse(file_of(header({{"w", dtype, "[1]", "[0,1]"}}), 1)), "bad.safetensors", "tensor \"w\"",
                      fmt::format("dtype \"{}\" is not one Kiln reads", dtype));
  }
  EXPECT_KILN_ERROR(parse(file_of(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", 1)),
                    "dtype must be a string, found a number");
}

TEST(SafetensorsMalformed, ShapeTimesDtypeSizeMustMatchTheOffsets) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "F32", "[2,3]", "[0,20]"}}), 20)),
                    "bad.safetensors: header: tensor \"w\"", "shape [2, 3] of F32 needs 24 bytes",
                    "data_offsets [0, 20) hold 20");
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "F64", "[2147483648,1073741824]", "[0,8]"}}), 8)),
                    "needs more than 2^64 bytes");
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", "[9223372036854775807,2,0]", "[0,0]"}}))),
                    "more elements than fit in 64 bits");
}

TEST(SafetensorsMalformed, ShapeMustBeNonNegativeIntegers) {
  for (const std::string_view shape : {"[-1]", "[1.5]", "[1e2]", "[\"2\"]", "[18446744073709551616]", "3"}) {
    EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", shape, "[0,1]"}}), 1)), "tensor \"w\"", "shape must be");
  }
}

TEST(SafetensorsMalformed, OffsetsOutOfRange) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", "[8]", "[0,8]"}}), 4)), "tensor \"w\"",
                    "data_offsets [0, 8) run past the end of the data section (4 bytes)");
  EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", "[0]", "[4,0]"}}), 4)),
                    "data_offsets [4, 0) end before they begin");
  for (const std::string_view offsets : {"[0]", "[0,1,2]", "[-1,0]", "[0,\"1\"]", "{}"}) {
    EXPECT_KILN_ERROR(parse(file_of(header({{"w", "U8", "[1]", offsets}}), 1)), "tensor \"w\"",
                      "data_offsets must be two non-negative integers");
  }
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"a", "U8", "[4]", "[0,4]"}, {"b", "U8", "[4]", "[2,6]"}}), 6)),
                    "bad.safetensors", "tensors \"a\" (data [0, 4)) and \"b\" (data [2, 6)) overlap");
}

TEST(SafetensorsMalformed, GapBetweenTensors) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"a", "U8", "[2]", "[0,2]"}, {"b", "U8", "[2]", "[4,6]"}}), 6)),
                    "bad.safetensors", "data bytes [2, 4) belong to no tensor", "\"b\"");
}

TEST(SafetensorsMalformed, DataAfterTheLastTensor) {
  EXPECT_KILN_ERROR(parse(file_of(header({{"a", "U8", "[2]", "[0,2]"}}), 5)), "bad.safetensors",
                    "data section has 5 bytes", "bytes [2, 5) belong to no tensor");
}

TEST(SafetensorsMalformed, TensorEntryShapes) {
  EXPECT_KILN_ERROR(parse(file_of(R"({"w":[1]})")), "tensor \"w\"", "expected an object", "found an array");
  EXPECT_KILN_ERROR(parse(file_of(R"({"w":{"dtype":"U8","shape":[0]}})")), "tensor \"w\"", "has no 'data_offsets'");
  EXPECT_KILN_ERROR(parse(file_of(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"extra":1}})")),
                    "tensor \"w\"", "unknown key \"extra\"");
}

TEST(SafetensorsMalformed, MetadataMustMapStringsToStrings) {
  EXPECT_KILN_ERROR(parse(file_of(R"({"__metadata__":{"epoch":3}})")), "bad.safetensors",
                    "__metadata__ entry \"epoch\" must be a string, found a number");
  EXPECT_KILN_ERROR(parse(file_of(R"({"__metadata__":[]})")), "__metadata__ must be an object");
  EXPECT_TRUE(parse(file_of(R"({"__metadata__":null})")).metadata().empty());
}

TEST(SafetensorsMalformed, EmptyTensorsMayShareAnOffsetButNotSitInsideAnother) {
  const auto ok = parse(
      file_of(header({{"a", "U8", "[2]", "[0,2]"}, {"e", "F32", "[0,5]", "[2,2]"}, {"b", "U8", "[2]", "[2,4]"}}), 4));
  EXPECT_EQ(ok.names(), (std::vector<std::string>{"a", "e", "b"}));
  EXPECT_KILN_ERROR(parse(file_of(header({{"a", "U8", "[4]", "[0,4]"}, {"e", "U8", "[0]", "[2,2]"}}), 4)), "overlap");
}

// The worst safetensors files of at most 1 MiB: each is refused, or read within 1 s and
// 100 MiB.
TEST(SafetensorsMalformed, SmallHostileFilesStayWithinTheBudget) {
  using Outcome = kiln::test::ReadUse::Outcome;
  using kiln::test::expect_within_budget;
  const auto loads = [](const std::vector<std::byte>& bytes) {
    return [&bytes] { (void)parse(bytes).load_all(); };
  };
  constexpr std::size_t mib = std::size_t{1} << 20;
  // Half a million values in one array, and as many nested arrays.
  std::string values = "{\"__metadata__\":[0";
  while (values.size() + 4 < mib - 8) values += ",0";
  const auto array = file_of(values + "]}");
  expect_within_budget("safetensors: a header of one array of 0.5 M values", array.size(), Outcome::refused,
                       loads(array));
  const std::size_t depth = (mib - 32) / 2;
  const auto nested = file_of("{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}");
  expect_within_budget("safetensors: arrays nested 0.5 M deep", nested.size(), Outcome::refused, loads(nested));
  // As many empty tensors as fit, and one tensor of the whole file.
  std::string empties = "{";
  for (int i = 0; empties.size() + 64 < mib - 8; ++i)
    empties += fmt::format(R"({}"{}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", i ? "," : "", i);
  const auto many = file_of(empties + "}");
  expect_within_budget("safetensors: 17 K empty tensors", many.size(), Outcome::read, loads(many));
  const std::size_t data = mib - 128;
  const auto whole = file_of(fmt::format(R"({{"t":{{"dtype":"U8","shape":[{}],"data_offsets":[0,{}]}}}})", data, data),
                             data);
  expect_within_budget("safetensors: one tensor of 1 MiB", whole.size(), Outcome::read, loads(whole));
}

}  // namespace
}  // namespace kiln::store::test
