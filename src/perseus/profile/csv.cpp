#include "perseus/profile/csv.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::profile {

namespace {

// Required columns, in the order write_profile_csv writes them.
enum Column { kStage, kInstruction, kFrequency, kTime, kEnergy, kNumColumns };
constexpr std::array<const char*, kNumColumns> kColumnNames = {"stage", "instruction", "frequency",
                                                               "time", "energy"};

// Reads lines one at a time, dropping CR line ends and fully blank lines, counting line numbers.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}

  std::optional<std::string_view> next() {
    while (std::getline(in_, text_)) {
      ++number_;
      if (number_ == 1 && text_.starts_with("\xEF\xBB\xBF")) text_.erase(0, 3);  // UTF-8 BOM
      if (!text_.empty() && text_.back() == '\r') text_.pop_back();
      if (!trim(text_).empty()) return text_;
    }
    return std::nullopt;
  }
  long number() const { return number_; }

 private:
  std::istream& in_;
  std::string text_;
  long number_ = 0;
};

// Parses text fields of one source, reporting errors with the source name and line.
class FieldParser {
 public:
  FieldParser(const std::string& source, long line) : source_(source), line_(line) {}

  [[noreturn]] void fail(const char* field, const std::string& problem) const {
    throw Error(located(source_, line_, field, problem));
  }

  double number(std::string_view text, const char* field) const {
    if (text.empty()) fail(field, "missing value");
    // from_chars does not take a leading '+'.
    bool plus = text.starts_with("+") && !text.starts_with("+-");
    std::string_view digits = plus ? text.substr(1) : text;
    double value = 0.0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (end != digits.data() + digits.size() || ec == std::errc::invalid_argument) {
      fail(field, "not a number '" + std::string(text) + "'");
    }
    if (ec == std::errc::result_out_of_range) {
      fail(field, "out of range '" + std::string(text) + "'");
    }
    if (!std::isfinite(value)) fail(field, "not a finite number '" + std::string(text) + "'");
    return value;
  }

  int integer(std::string_view text, const char* field) const {
    double value = number(text, field);
    if (value != std::floor(value)) fail(field, "not an integer '" + std::string(text) + "'");
    if (std::fabs(value) > std::numeric_limits<int>::max()) {
      fail(field, "out of range '" + std::string(text) + "'");
    }
    return static_cast<int>(value);
  }

 private:
  const std::string& source_;
  long line_;
};

struct Header {
  std::array<size_t, kNumColumns> index{};
  size_t num_fields = 0;
};

Header parse_header(std::string_view line, const std::string& source, long line_number) {
  std::vector<std::string_view> names = split_csv_fields(line);
  Header header;
  header.num_fields = names.size();
  for (int c = 0; c < kNumColumns; ++c) {
    auto it = std::find(names.begin(), names.end(), kColumnNames[c]);
    if (it == names.end()) {
      throw Error(located(source, line_number, "",
                          std::string("missing column '") + kColumnNames[c] +
                              "' (the header needs stage,instruction,frequency,time,energy)"));
    }
    if (std::find(it + 1, names.end(), kColumnNames[c]) != names.end()) {
      throw Error(located(source, line_number, "",
                          std::string("duplicate column '") + kColumnNames[c] + "'"));
    }
    header.index[c] = static_cast<size_t>(it - names.begin());
  }
  return header;
}

void add_row(Profile& profile, const Header& header, std::string_view line, long line_number) {
  std::vector<std::string_view> fields = split_csv_fields(line);
  FieldParser parse(profile.source(), line_number);
  if (fields.size() != header.num_fields) {
    parse.fail("", "expected " + std::to_string(header.num_fields) +
                       " fields as in the header, found " + std::to_string(fields.size()));
  }
  auto field = [&](Column c) { return fields[header.index[c]]; };
  int stage = parse.integer(field(kStage), "stage");
  Measurement m;
  m.frequency_mhz = parse.integer(field(kFrequency), "frequency");
  m.time_s = parse.number(field(kTime), "time");
  m.energy_j = parse.number(field(kEnergy), "energy");
  m.line = line_number;
  profile.add(stage, std::string(field(kInstruction)), m);
}

}  // namespace

Profile read_profile_csv(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(located(path, 0, "", "is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(located(path, 0, "", std::string("cannot open: ") + std::strerror(errno)));
  return parse_profile_csv(in, path);
}

Profile parse_profile_csv(std::istream& in, const std::string& source) {
  LineReader lines(in);
  auto header_line = lines.next();
  if (!header_line) {
    throw Error(
        located(source, 0, "",
                "empty file: expected a header with stage,instruction,frequency,time,energy"));
  }
  Header header = parse_header(*header_line, source, lines.number());
  long header_number = lines.number();
  Profile profile(source);
  while (auto line = lines.next()) add_row(profile, header, *line, lines.number());
  if (in.bad()) throw Error(located(source, lines.number(), "", "read error"));
  if (profile.all().empty()) {
    throw Error(located(source, header_number, "", "no data rows after the header"));
  }
  profile.validate();
  return profile;
}

void write_profile_csv(const Profile& profile, std::ostream& out,
                       const std::vector<ExtraColumn>& extra) {
  out << "stage,instruction,frequency,time,energy";
  for (const auto& column : extra) out << "," << column.name;
  out << "\n";
  char buf[128];
  for (int stage = 0; stage < profile.num_stages(); ++stage) {
    for (const auto& instruction : profile.instructions(stage)) {
      std::vector<Measurement> rows = profile.rows(stage, instruction);
      std::stable_sort(rows.begin(), rows.end(), [](const Measurement& a, const Measurement& b) {
        return a.frequency_mhz > b.frequency_mhz;
      });
      for (const auto& m : rows) {
        std::snprintf(buf, sizeof buf, "%d,%s,%d,%.17g,%.17g", stage, instruction.c_str(),
                      m.frequency_mhz, m.time_s, m.energy_j);
        out << buf;
        for (const auto& column : extra) {
          auto v = column.value(stage, instruction, m.frequency_mhz);
          out << ",";
          if (!v) continue;
          std::snprintf(buf, sizeof buf, "%.17g", *v);
          out << buf;
        }
        out << "\n";
      }
    }
  }
}

}  // namespace perseus::profile
