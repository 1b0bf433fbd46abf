#include "perseus/util/csv.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::csv {

namespace {

std::string_view clean_field(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = trim(s.substr(1, s.size() - 2));
  return s;
}

}  // namespace

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(clean_field(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

std::vector<Row> rows(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte-order mark
  std::vector<Row> out;
  long line = 0;
  while (!text.empty()) {
    ++line;
    const std::size_t end = text.find('\n');
    std::string_view l = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (!trim(l).empty()) out.push_back({line, split_fields(l)});
  }
  return out;
}

void Fields::fail(const std::string& column, const std::string& problem) const {
  throw Error(located(source_, line_, column, problem));
}

double Fields::number(std::string_view text, const std::string& column) const {
  if (text.empty()) fail(column, "missing value");
  // from_chars does not take a leading '+'.
  const bool plus = text.starts_with("+") && !text.starts_with("+-");
  const std::string_view digits = plus ? text.substr(1) : text;
  double value = 0.0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (end != digits.data() + digits.size() || ec == std::errc::invalid_argument) {
    fail(column, "not a number '" + std::string(text) + "'");
  }
  if (ec == std::errc::result_out_of_range)
    fail(column, "out of range '" + std::string(text) + "'");
  if (!std::isfinite(value)) fail(column, "not a finite number '" + std::string(text) + "'");
  return value;
}

void Fields::require_non_negative(double value, std::string_view text,
                                  const std::string& column) const {
  if (value < 0.0) fail(column, "must be >= 0, got '" + std::string(text) + "'");
}

double Fields::non_negative(std::string_view text, const std::string& column) const {
  const double value = number(text, column);
  require_non_negative(value, text, column);
  return value;
}

int Fields::integer(std::string_view text, const std::string& column) const {
  const double value = number(text, column);
  if (value != std::floor(value)) fail(column, "not an integer '" + std::string(text) + "'");
  if (std::fabs(value) > std::numeric_limits<int>::max()) {
    fail(column, "out of range '" + std::string(text) + "'");
  }
  return static_cast<int>(value);
}

int Fields::non_negative_integer(std::string_view text, const std::string& column) const {
  const int value = integer(text, column);
  require_non_negative(value, text, column);
  return value;
}

}  // namespace perseus::csv
