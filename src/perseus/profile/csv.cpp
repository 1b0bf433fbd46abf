#include "perseus/profile/csv.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <iterator>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include "perseus/util/csv.hpp"
#include "perseus/util/error.hpp"

namespace perseus::profile {

namespace {

// Required columns, in the order write_profile_csv writes them.
enum Column { kStage, kInstruction, kFrequency, kTime, kEnergy, kNumColumns };
constexpr std::array<const char*, kNumColumns> kColumnNames = {"stage", "instruction", "frequency",
                                                               "time", "energy"};

// Columns a measured profile may carry, each read where present (an empty field: no value): a
// relative error (a number >= 0) or a clock (an integer MHz, checked by Profile::validate).
struct OptionalColumn {
  const char* name;
  std::optional<double> Measurement::*error = nullptr;
  std::optional<int> Measurement::*clock = nullptr;

  bool has_value(const Measurement& m) const {
    return error ? (m.*error).has_value() : (m.*clock).has_value();
  }
};
constexpr std::size_t kNumOptionalColumns = 3;
constexpr std::array<OptionalColumn, kNumOptionalColumns> kOptionalColumns = {{
    {"energy_stderr", &Measurement::energy_stderr},
    {"energy_pooling_error", &Measurement::energy_pooling_error},
    {"energy_pooling_reference_mhz", nullptr, &Measurement::energy_pooling_reference_mhz},
}};

struct Header {
  std::array<size_t, kNumColumns> index{};
  std::array<std::optional<size_t>, kNumOptionalColumns> optional_index{};
  size_t num_fields = 0;
};

// Where column `name` is in the header; nullopt when it is absent. Throws when it is there twice.
std::optional<size_t> find_column(const std::vector<std::string_view>& names, const char* name,
                                  const std::string& source, long line_number) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  if (std::find(it + 1, names.end(), name) != names.end()) {
    throw Error(located(source, line_number, "", std::string("duplicate column '") + name + "'"));
  }
  return static_cast<size_t>(it - names.begin());
}

Header parse_header(const std::vector<std::string_view>& names, const std::string& source,
                    long line_number) {
  Header header;
  header.num_fields = names.size();
  for (int c = 0; c < kNumColumns; ++c) {
    const std::optional<size_t> at = find_column(names, kColumnNames[c], source, line_number);
    if (!at) {
      throw Error(located(source, line_number, "",
                          std::string("missing column '") + kColumnNames[c] +
                              "' (the header needs stage,instruction,frequency,time,energy)"));
    }
    header.index[c] = *at;
  }
  for (std::size_t c = 0; c < kNumOptionalColumns; ++c) {
    header.optional_index[c] = find_column(names, kOptionalColumns[c].name, source, line_number);
  }
  return header;
}

void add_row(Profile& profile, const Header& header, const csv::Row& row) {
  const csv::Fields parse(profile.source(), row.line);
  if (row.fields.size() != header.num_fields) {
    parse.fail("", "expected " + std::to_string(header.num_fields) +
                       " fields as in the header, found " + std::to_string(row.fields.size()));
  }
  auto field = [&](Column c) { return row.fields[header.index[c]]; };
  int stage = parse.integer(field(kStage), "stage");
  Measurement m;
  m.frequency_mhz = parse.integer(field(kFrequency), "frequency");
  m.time_s = parse.number(field(kTime), "time");
  m.energy_j = parse.number(field(kEnergy), "energy");
  for (std::size_t c = 0; c < kNumOptionalColumns; ++c) {
    const std::optional<size_t> at = header.optional_index[c];
    if (!at || row.fields[*at].empty()) continue;
    const OptionalColumn& column = kOptionalColumns[c];
    if (column.error) {
      m.*column.error = parse.non_negative(row.fields[*at], column.name);
    } else {
      m.*column.clock = parse.integer(row.fields[*at], column.name);
    }
  }
  m.line = row.line;
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
  Profile profile = parse_profile_rows(in, source);
  profile.validate();
  return profile;
}

Profile parse_profile_rows(std::istream& in, const std::string& source) {
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw Error(located(source, 0, "", "read error"));
  const std::vector<csv::Row> rows = csv::rows(text);
  if (rows.empty()) {
    throw Error(
        located(source, 0, "",
                "empty file: expected a header with stage,instruction,frequency,time,energy"));
  }
  const Header header = parse_header(rows[0].fields, source, rows[0].line);
  Profile profile(source);
  for (std::size_t r = 1; r < rows.size(); ++r) add_row(profile, header, rows[r]);
  if (profile.all().empty()) {
    throw Error(located(source, rows[0].line, "", "no data rows after the header"));
  }
  return profile;
}

void write_profile_csv(const Profile& profile, std::ostream& out,
                       const std::vector<ExtraColumn>& extra) {
  // The relative errors of a measured profile, each where some row has one.
  std::array<bool, kNumOptionalColumns> written{};
  for (const auto& [key, rows] : profile.all()) {
    for (const Measurement& m : rows) {
      for (std::size_t c = 0; c < kNumOptionalColumns; ++c) {
        written[c] = written[c] || kOptionalColumns[c].has_value(m);
      }
    }
  }
  out << "stage,instruction,frequency,time,energy";
  for (std::size_t c = 0; c < kNumOptionalColumns; ++c) {
    if (written[c]) out << "," << kOptionalColumns[c].name;
  }
  for (const auto& column : extra) out << "," << column.name;
  out << "\n";
  char buf[128];
  auto value = [&](const std::optional<double>& v) {
    out << ",";
    if (!v) return;
    std::snprintf(buf, sizeof buf, "%.17g", *v);
    out << buf;
  };
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
        for (std::size_t c = 0; c < kNumOptionalColumns; ++c) {
          if (!written[c]) continue;
          const OptionalColumn& column = kOptionalColumns[c];
          if (column.error) {
            value(m.*column.error);
          } else {
            const std::optional<int>& mhz = m.*column.clock;
            value(mhz ? std::optional<double>(*mhz) : std::nullopt);
          }
        }
        for (const auto& column : extra) value(column.value(stage, instruction, m.frequency_mhz));
        out << "\n";
      }
    }
  }
}

}  // namespace perseus::profile
