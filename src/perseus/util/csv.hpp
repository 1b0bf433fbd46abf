// The one CSV reader, for the unquoted comma-separated files Perseus reads (stage profiles,
// frontier rows, the search's operator profiles and collective tables, schedule orders): lines
// split into trimmed fields with their line numbers, and values parsed with one message style,
// located()'s "FILE:LINE: field 'COLUMN': PROBLEM". Numbers are read with std::from_chars (exact,
// locale-independent); a leading '+' is accepted, nan and inf are not.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace perseus::csv {

// The comma-separated fields of one line, each trimmed and without one pair of surrounding double
// quotes (the files Perseus reads never quote commas).
std::vector<std::string_view> split_fields(std::string_view line);

struct Row {
  long line = 0;  // 1-based
  std::vector<std::string_view> fields;
};

// The non-blank lines of `text`, split: a UTF-8 byte-order mark and "\r\n" line ends are
// accepted. The rows point into `text`, which must outlive them.
std::vector<Row> rows(std::string_view text);

// The values of one line of `source`; `source` must outlive the reader.
class Fields {
 public:
  Fields(const std::string& source, long line) : source_(source), line_(line) {}

  [[noreturn]] void fail(const std::string& column, const std::string& problem) const;
  // A finite number ("missing value", "not a number 'x'", "out of range 'x'", ...).
  double number(std::string_view text, const std::string& column) const;
  // A finite number >= 0.
  double non_negative(std::string_view text, const std::string& column) const;
  // An integer ("1410" or "1410.0").
  int integer(std::string_view text, const std::string& column) const;
  // An integer >= 0.
  int non_negative_integer(std::string_view text, const std::string& column) const;

 private:
  void require_non_negative(double value, std::string_view text, const std::string& column) const;
  const std::string& source_;
  long line_;
};

}  // namespace perseus::csv
