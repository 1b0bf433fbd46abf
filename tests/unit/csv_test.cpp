// The one CSV reader (perseus/util/csv.hpp): rows keep their line numbers through a byte-order
// mark, CRLF line ends and blank lines; fields are trimmed and unquoted; each class of bad value
// gets one message naming the file, the line and the column.
#include "perseus/util/csv.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"

namespace {

using perseus::test::error_of;
namespace csv = perseus::csv;

TEST(Csv, RowsKeepTheirLineNumbers) {
  const std::string text = "\xEF\xBB\xBFstage, time\r\n\r\n  \n0,\"1.5\"\r\n1,2";
  const std::vector<csv::Row> rows = csv::rows(text);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].line, 1);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string_view>{"stage", "time"}));
  EXPECT_EQ(rows[1].line, 4);
  EXPECT_EQ(rows[1].fields, (std::vector<std::string_view>{"0", "1.5"}));
  EXPECT_EQ(rows[2].line, 5);
  EXPECT_TRUE(csv::rows("").empty());
  EXPECT_EQ(csv::split_fields("a,,b,"), (std::vector<std::string_view>{"a", "", "b", ""}));
}

TEST(Csv, NumbersAreExactOrNamed) {
  const std::string file = "p.csv";
  const csv::Fields fields(file, 7);
  EXPECT_EQ(fields.number("+1.25", "time"), 1.25);
  EXPECT_EQ(fields.number("-3e-3", "time"), -3e-3);
  EXPECT_EQ(fields.integer("1410.0", "frequency"), 1410);
  EXPECT_EQ(error_of([&] { fields.number("", "time"); }), "p.csv:7: field 'time': missing value");
  EXPECT_EQ(error_of([&] { fields.number("1,5", "time"); }),
            "p.csv:7: field 'time': not a number '1,5'");
  EXPECT_EQ(error_of([&] { fields.number("inf", "time"); }),
            "p.csv:7: field 'time': not a finite number 'inf'");
  EXPECT_EQ(error_of([&] { fields.number("1e999", "time"); }),
            "p.csv:7: field 'time': out of range '1e999'");
  EXPECT_EQ(error_of([&] { fields.non_negative("-0.5", "energy"); }),
            "p.csv:7: field 'energy': must be >= 0, got '-0.5'");
  EXPECT_EQ(error_of([&] { fields.integer("1410.5", "frequency"); }),
            "p.csv:7: field 'frequency': not an integer '1410.5'");
  EXPECT_EQ(error_of([&] { fields.integer("4294968706", "frequency"); }),
            "p.csv:7: field 'frequency': out of range '4294968706'");
  EXPECT_EQ(fields.non_negative_integer("0", "size"), 0);
  EXPECT_EQ(error_of([&] { fields.non_negative_integer("-4", "size"); }),
            "p.csv:7: field 'size': must be >= 0, got '-4'");
  EXPECT_EQ(error_of([&] { fields.non_negative_integer("8.5", "size"); }),
            "p.csv:7: field 'size': not an integer '8.5'");
}

}  // namespace
