// Core: KILN_CHECK's messages. They are built without fmt's templates at the check
// (kiln/core/error.hpp), so each kind of argument is compared here with the text fmt's "{}"
// gives for it, which is what messages read like before and what users expect.
#include <kiln/core/dtype.hpp>
#include <kiln/core/error.hpp>
#include <kiln/core/shape.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

template <class T> std::string arg(const T& v) { return kiln::detail::MessageArg(v).text(); }

// The message a failing KILN_CHECK throws.
template <class... Args> std::string message_of(kiln::detail::Message<sizeof...(Args)> format, const Args&... args) {
  try {
    KILN_FAIL(format, args...);
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(ErrorMessage, DoublesReadLikeFmt) {
  const double values[] = {0.0,     -0.0,    1.0,      -2.5,       0.1,     1.0 / 3,  1e-4,   1e-5,    1.5e-7,
                           123.456, 1e15,    1e16,     1.25e16,    1e300,   -1e-300,  5e-324, 2.0e-308, 100.0,
                           1e-3,    65504.0, 0.2860,   123456789.0, 9007199254740993.0, std::numeric_limits<double>::max()};
  for (const double v : values) EXPECT_EQ(arg(v), fmt::format("{}", v)) << "value " << v;
  EXPECT_EQ(arg(std::nan("")), "nan");
  EXPECT_EQ(arg(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(arg(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(ErrorMessage, FloatsUseTheirOwnShortestForm) {
  const float values[] = {0.1f, 1.0f / 3, 3.4e38f, 1e-30f, 0.3530f, 16777216.0f, -7.5f};
  for (const float v : values) EXPECT_EQ(arg(v), fmt::format("{}", v)) << "value " << v;
  EXPECT_EQ(arg(0.1f), "0.1");  // not the double 0.10000000149011612
}

TEST(ErrorMessage, IntegersBoolsCharsAndStrings) {
  EXPECT_EQ(arg(std::int64_t{-42}), "-42");
  EXPECT_EQ(arg(std::numeric_limits<std::int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(arg(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(arg(std::uint8_t{200}), fmt::format("{}", std::uint8_t{200}));  // a number, not a character
  EXPECT_EQ(arg(std::size_t{7}), "7");
  EXPECT_EQ(arg(true), "true");
  EXPECT_EQ(arg(false), "false");
  EXPECT_EQ(arg('x'), "x");
  EXPECT_EQ(arg("text"), "text");
  EXPECT_EQ(arg(std::string("a string")), "a string");
  EXPECT_EQ(arg(std::string_view("a view")), "a view");
}

TEST(ErrorMessage, ShapesDTypesAndRanges) {
  EXPECT_EQ(arg(kiln::Shape{2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(arg(kiln::Shape{}), "[]");
  EXPECT_EQ(arg(kiln::DType::bf16), fmt::format("{}", kiln::DType::bf16));
  const std::array<std::int64_t, 2> a{3, -1};
  EXPECT_EQ(arg(a), fmt::format("{}", a));
  const std::vector<double> v{0.5, 2.0};
  EXPECT_EQ(arg(v), fmt::format("{}", v));
  EXPECT_EQ(arg(std::span<const std::int64_t>(a)), "[3, -1]");
  EXPECT_EQ(arg(std::vector<int>{}), "[]");
}

TEST(ErrorMessage, OtherFmtTypesGoThroughFmt) {
  const std::vector<int> v{1, 2, 3};
  EXPECT_EQ(arg(fmt::join(v, "-")), "1-2-3");
}

TEST(ErrorMessage, PlaceholdersTakeArgumentsInOrderAndBracesEscape) {
  EXPECT_EQ(message_of("op: {} then {}", 1, "two"), "op: 1 then two");
  EXPECT_EQ(message_of("no arguments"), "no arguments");
  EXPECT_EQ(message_of("{{literal}} {} }}", 5), "{literal} 5 }");
  EXPECT_EQ(message_of("{}{}", kiln::Shape{1}, 2.5), "[1]2.5");
}

TEST(ErrorMessage, CheckThrowsOnlyWhenTheConditionFails) {
  int evaluated = 0;
  const auto counted = [&] { return ++evaluated; };
  EXPECT_NO_THROW(KILN_CHECK(true, "never {}", counted()));
  EXPECT_EQ(evaluated, 0);  // arguments are evaluated on failure only
  try {
    KILN_CHECK(1 + 1 == 3, "sum: got {} for shape {}", counted(), kiln::Shape{2, 2});
    FAIL() << "KILN_CHECK did not throw";
  } catch (const kiln::Error& e) {
    EXPECT_STREQ(e.what(), "sum: got 1 for shape [2, 2]");
  }
}

static_assert(kiln::detail::count_placeholders("a {} b {} {{c}}") == 2);
static_assert(kiln::detail::count_placeholders("{:02x}") == -1);  // format specs are refused
static_assert(kiln::detail::count_placeholders("unbalanced }") == -1);

}  // namespace
