// CSV files of numbers: headers, quoting, line endings, and errors that name the line,
// the column and the text.
#include "data_test.hpp"

#include <kiln/data/csv.hpp>
#include <kiln/data/dataset.hpp>

namespace kiln::data::test {
namespace {

static_assert(Dataset<CsvTable>);

TEST(Csv, ParsesAHeaderAndRows) {
  const CsvTable table = parse_csv("x, y ,label\n1,2.5,0\n-3e2, +4 ,1\n", "t.csv");
  EXPECT_EQ(table.columns(), (std::vector<std::string>{"x", "y", "label"}));
  EXPECT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.cols(), 3u);
  EXPECT_EQ(table.values().dtype(), DType::f32);
  EXPECT_EQ(table.values().shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(table.values()), (std::vector<float>{1, 2.5f, 0, -300, 4, 1}));
  EXPECT_EQ(table.column("label"), 2u);
  EXPECT_KILN_ERROR(table.column("z"), "no column named 'z'", "x, y, label");
  // A dataset of rows.
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(values<float>(table.get(1)), (std::vector<float>{-300, 4, 1}));
  EXPECT_KILN_ERROR(table.get(2), "row 2", "2 rows");
}

TEST(Csv, OptionsAndLayouts) {
  // No header, semicolons, f64, CRLF line endings, blank lines, no final newline.
  const CsvTable table =
      parse_csv("1;2\r\n\r\n3;4.25\r\n  \n5;6", "t.csv", {.header = false, .delimiter = ';', .dtype = DType::f64});
  EXPECT_EQ(table.columns(), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(values<double>(table.values()), (std::vector<double>{1, 2, 3, 4.25, 5, 6}));
  // Quoted names and numbers, a UTF-8 byte order mark, doubled quotes in a name.
  const CsvTable quoted = parse_csv("\xEF\xBB\xBF\"a, b\",\"say \"\"hi\"\"\"\n\"1\", \"2\" \n", "q.csv");
  EXPECT_EQ(quoted.columns(), (std::vector<std::string>{"a, b", "say \"hi\""}));
  EXPECT_EQ(values<float>(quoted.values()), (std::vector<float>{1, 2}));
  // nan and inf are numbers when asked for (tests/data/hostile_test.cpp: errors otherwise);
  // a header alone is a table of no rows.
  const CsvTable special = parse_csv("a,b\nnan,-inf\n", "s.csv", {.allow_non_finite = true});
  EXPECT_TRUE(std::isnan(values<float>(special.values())[0]));
  EXPECT_EQ(parse_csv("a,b\n", "h.csv").values().shape(), (Shape{0, 2}));
  EXPECT_EQ(parse_csv("", "e.csv", {.header = false}).rows(), 0u);
}

TEST(Csv, ReadsFilesPlainOrGzip) {
  TempDir dir;
  write_text(dir / "iris.csv", "sepal,petal\n5.1,1.4\n4.9,1.3\n");
  const std::string text = "sepal,petal\n5.1,1.4\n4.9,1.3\n";
  write_file(dir / "iris.csv.gz", gzip(Bytes(text.begin(), text.end())));
  for (const char* name : {"iris.csv", "iris.csv.gz"}) {
    const CsvTable table = read_csv(dir / name);
    EXPECT_EQ(table.rows(), 2u);
    EXPECT_EQ(values<float>(table.values()), (std::vector<float>{5.1f, 1.4f, 4.9f, 1.3f}));
  }
  EXPECT_KILN_ERROR(read_csv(dir / "missing.csv"), "read_csv", "missing.csv", "no such file");
}

TEST(CsvMalformed, ErrorsNameTheLineColumnAndText) {
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,2\n3,x7\n", "bad.csv"), "read_csv", "bad.csv", "line 3, column 2 ('b')",
                    "'x7' is not a number");
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,2\n\n3\n", "ragged.csv"), "ragged.csv", "line 4 has 1 fields",
                    "the header (line 1) has 2");
  EXPECT_KILN_ERROR(parse_csv("1,2\n3,4,5\n", "ragged.csv", {.header = false}), "line 2 has 3 fields",
                    "the first row has 2");
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,\n", "empty.csv"), "line 2, column 2 ('b')", "the field is empty");
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,1e999\n", "big.csv"), "'1e999' is out of range");
  EXPECT_KILN_ERROR(parse_csv("a,b\n1,2.5.1\n", "dots.csv"), "'2.5.1' is not a number");
  EXPECT_KILN_ERROR(parse_csv("a,b\n\"1,2\n", "open.csv"), "open.csv", "line 2", "quoted field is not closed");
  EXPECT_KILN_ERROR(parse_csv("a,b\n\"1\"2,3\n", "after.csv"), "line 2", "text '2' after the closing quote");
  EXPECT_KILN_ERROR(parse_csv("", "nothing.csv"), "nothing.csv", "empty", "header row");
  EXPECT_KILN_ERROR(parse_csv("1\n", "int.csv", {.dtype = DType::i32}), "dtype must be f32 or f64");
  EXPECT_KILN_ERROR(parse_csv("1 2\n", "space.csv", {.header = false}), "'1 2' is not a number");
}

}  // namespace
}  // namespace kiln::data::test
