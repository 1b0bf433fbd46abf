// Profile CSV reading (every malformed-input class), writing and the shared reference profiles.
#include <fstream>
#include <sstream>
#include <string>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::profile {
namespace {

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

const char* kHeader = "stage,instruction,frequency,time,energy\n";
// Two stages x {forward, backward} x two clocks; data lines 2..9.
const char* kRows =
    "0,forward,1410,0.05,24\n"
    "0,forward,855,0.08,18\n"
    "0,backward,1410,0.09,44\n"
    "0,backward,855,0.14,33\n"
    "1,forward,1410,0.05,24\n"
    "1,forward,855,0.08,18\n"
    "1,backward,1410,0.09,44\n"
    "1,backward,855,0.14,33\n";

Profile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_profile_csv(in, "prof.csv");
}

// The message of the perseus::Error that parsing `text` throws ("" and a failure if none).
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

// The valid two-stage profile with data line `line` (2..9) replaced by `replacement`.
std::string with_line(long line, const std::string& replacement) {
  std::istringstream in(kRows);
  std::string out = kHeader, row;
  for (long n = 2; std::getline(in, row); ++n) out += (n == line ? replacement : row) + "\n";
  return out;
}

TEST(CsvReader, ReadsValidProfile) {
  Profile p = parse(std::string(kHeader) + kRows);
  EXPECT_EQ(p.num_stages(), 2);
  EXPECT_EQ(p.instructions(1), (std::vector<std::string>{"forward", "backward"}));
  const Measurement& m = p.at(1, "backward", 855);
  EXPECT_EQ(m.time_s, 0.14);
  EXPECT_EQ(m.energy_j, 33.0);
  EXPECT_EQ(m.line, 9);
  EXPECT_EQ(p.source(), "prof.csv");
}

TEST(CsvReader, AcceptsAnyColumnOrderAndIgnoresExtraColumns) {
  Profile p = parse(
      "rank,energy,time,frequency,instruction,stage,pp_rank\n"
      "3,24,0.05,1410,forward,0,0\n"
      "3,18,0.08,855,forward,0,0\n");
  EXPECT_EQ(p.num_stages(), 1);
  EXPECT_EQ(p.at(0, "forward", 855).energy_j, 18.0);
  EXPECT_EQ(p.at(0, "forward", 1410).time_s, 0.05);
}

TEST(CsvReader, AcceptsCrlfBlankLinesSpacesAndQuotes) {
  Profile p = parse(
      "\r\n stage , instruction,frequency,time,energy\r\n"
      "\r\n"
      "0, \"forward\" ,1410 , 0.05,24\r\n"
      "   \r\n"
      "0,forward,855,0.08,\"18\"\r\n");
  EXPECT_EQ(p.at(0, "forward", 855).energy_j, 18.0);
  EXPECT_EQ(p.at(0, "forward", 855).line, 6);
  EXPECT_EQ(p.at(0, "forward", 1410).time_s, 0.05);
}

TEST(CsvReader, AcceptsIntegralValuesWrittenAsFloatsAndPlusSigns) {
  Profile p = parse(std::string(kHeader) + "0.0,forward,1410.0,+5e-2,+24\n");
  EXPECT_EQ(p.max_frequency(0, "forward"), 1410);
  EXPECT_EQ(p.at(0, "forward", 1410).time_s, 0.05);
  EXPECT_EQ(p.at(0, "forward", 1410).energy_j, 24.0);
}

TEST(CsvReader, RejectsMissingColumn) {
  EXPECT_CONTAINS(error_of("stage,instruction,frequency,time\n0,forward,1410,0.05\n"),
                  "prof.csv:1: missing column 'energy'");
  EXPECT_CONTAINS(error_of("stage,instruction,time,energy\n0,forward,0.05,1\n"),
                  "missing column 'frequency'");
}

TEST(CsvReader, RejectsDuplicateColumn) {
  EXPECT_CONTAINS(error_of("stage,instruction,frequency,time,energy,time\n"),
                  "prof.csv:1: duplicate column 'time'");
}

TEST(CsvReader, RejectsWrongFieldCount) {
  EXPECT_EQ(error_of(with_line(3, "0,forward,855,0.08")),
            "prof.csv:3: expected 5 fields as in the header, found 4");
  EXPECT_CONTAINS(error_of(with_line(4, "0,backward,1410,0.09,44,7")),
                  "prof.csv:4: expected 5 fields as in the header, found 6");
}

TEST(CsvReader, RejectsNonNumericFields) {
  EXPECT_EQ(error_of(with_line(7, "1,forward,855,abc,18")),
            "prof.csv:7: field 'time': not a number 'abc'");
  EXPECT_EQ(error_of(with_line(2, "x,forward,1410,0.05,24")),
            "prof.csv:2: field 'stage': not a number 'x'");
  EXPECT_EQ(error_of(with_line(5, "0,backward,fast,0.14,33")),
            "prof.csv:5: field 'frequency': not a number 'fast'");
  EXPECT_EQ(error_of(with_line(9, "1,backward,855,0.14,33J")),
            "prof.csv:9: field 'energy': not a number '33J'");
  EXPECT_EQ(error_of(with_line(6, "1,forward,1410,,24")),
            "prof.csv:6: field 'time': missing value");
  EXPECT_EQ(error_of(with_line(6, "1,forward,1410,+-0.05,24")),
            "prof.csv:6: field 'time': not a number '+-0.05'");
  EXPECT_EQ(error_of(with_line(6, "1,forward,1410,0.05 0.06,24")),
            "prof.csv:6: field 'time': not a number '0.05 0.06'");
}

TEST(CsvReader, RejectsNonFiniteFields) {
  EXPECT_EQ(error_of(with_line(3, "0,forward,855,0.08,inf")),
            "prof.csv:3: field 'energy': not a finite number 'inf'");
  EXPECT_EQ(error_of(with_line(3, "0,forward,855,nan,18")),
            "prof.csv:3: field 'time': not a finite number 'nan'");
  EXPECT_EQ(error_of(with_line(3, "0,forward,855,1e999,18")),
            "prof.csv:3: field 'time': out of range '1e999'");
}

TEST(CsvReader, RejectsNonIntegerStageOrFrequency) {
  EXPECT_EQ(error_of(with_line(6, "1.5,forward,1410,0.05,24")),
            "prof.csv:6: field 'stage': not an integer '1.5'");
  EXPECT_EQ(error_of(with_line(2, "0,forward,1410.5,0.05,24")),
            "prof.csv:2: field 'frequency': not an integer '1410.5'");
  EXPECT_EQ(error_of(with_line(2, "0,forward,1e12,0.05,24")),
            "prof.csv:2: field 'frequency': out of range '1e12'");
}

TEST(CsvReader, RejectsNegativeStage) {
  EXPECT_EQ(error_of(with_line(6, "-1,forward,1410,0.05,24")),
            "prof.csv:6: field 'stage': must not be negative, got -1");
}

TEST(CsvReader, RejectsNonPositiveFrequency) {
  EXPECT_EQ(error_of(with_line(3, "0,forward,0,0.08,18")),
            "prof.csv:3: field 'frequency': must be positive, got 0");
  EXPECT_CONTAINS(error_of(with_line(3, "0,forward,-855,0.08,18")),
                  "prof.csv:3: field 'frequency': must be positive");
}

TEST(CsvReader, RejectsNonPositiveTime) {
  EXPECT_EQ(error_of(with_line(4, "0,backward,1410,-0.5,44")),
            "prof.csv:4: field 'time': must be a positive number of seconds, got -0.5");
  EXPECT_CONTAINS(error_of(with_line(4, "0,backward,1410,0,44")), "prof.csv:4: field 'time'");
}

TEST(CsvReader, RejectsNegativeEnergy) {
  EXPECT_EQ(error_of(with_line(8, "1,backward,1410,0.09,-1")),
            "prof.csv:8: field 'energy': must be a non-negative number of joules, got -1");
  EXPECT_NO_THROW(parse(with_line(8, "1,backward,1410,0.09,0")));
}

TEST(CsvReader, RejectsUnknownInstruction) {
  std::string msg = error_of(with_line(5, "0,fwd,855,0.14,33"));
  EXPECT_CONTAINS(msg, "prof.csv:5: field 'instruction': unknown instruction 'fwd'");
  EXPECT_CONTAINS(msg, "known: forward, backward, recompute, backward_input, backward_weight");
}

TEST(CsvReader, RejectsDuplicateRowNamingBothLines) {
  EXPECT_EQ(error_of(with_line(3, "0,forward,1410,0.05,24")),
            "prof.csv:3: field 'frequency': duplicate row for stage 0 instruction 'forward' at "
            "1410 MHz (also at line 2)");
}

TEST(CsvReader, RejectsMissingStage) {
  std::string text = std::string(kHeader) + kRows;
  for (auto pos = text.find("\n1,"); pos != std::string::npos; pos = text.find("\n1,")) {
    text[pos + 1] = '2';  // renumber stage 1 as stage 2
  }
  EXPECT_EQ(error_of(text),
            "prof.csv: field 'stage': stage 1 has no rows (stages must be 0..2 without gaps)");
}

TEST(CsvReader, RejectsStageLackingAnInstruction) {
  std::string text = std::string(kHeader) + kRows;
  text = text.substr(0, text.find("1,backward"));
  EXPECT_EQ(error_of(text),
            "prof.csv: field 'instruction': stage 1 has no 'backward' rows but stage 0 has (line "
            "4)");
}

TEST(CsvReader, RejectsEmptyFileAndHeaderOnly) {
  EXPECT_CONTAINS(error_of(""), "prof.csv: empty file");
  EXPECT_CONTAINS(error_of("\r\n  \n"), "prof.csv: empty file");
  EXPECT_EQ(error_of(std::string("\n") + kHeader + "\n"),
            "prof.csv:2: no data rows after the header");
}

TEST(CsvReader, RejectsSlowerAtHighestClockThanAtLowest) {
  std::string msg = error_of(with_line(6, "1,forward,1410,0.09,24"));
  EXPECT_CONTAINS(msg, "prof.csv:6: field 'time': stage 1 instruction 'forward'");
  EXPECT_CONTAINS(msg, "highest clock 1410 MHz");
  EXPECT_CONTAINS(msg, "lowest clock 855 MHz (line 7)");
}

// Measured noise: an instruction whose time hardly depends on the clock may come out a little
// slower at the top (here 1.25 %, within the 2 % allowed).
TEST(CsvReader, AcceptsNoiseAtTheHighestClock) {
  Profile p = parse(with_line(6, "1,forward,1410,0.081,24"));
  EXPECT_EQ(p.at(1, "forward", 1410).time_s, 0.081);
}

TEST(CsvReader, ReadsFileAndNamesItInErrors) {
  test::TempDir dir;
  std::string path = (dir.path() / "bad.csv").string();
  std::ofstream(path) << with_line(7, "1,forward,855,abc,18");
  try {
    read_profile_csv(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":7: field 'time': not a number 'abc'");
  }
  std::ofstream(path) << kHeader << kRows;
  EXPECT_EQ(read_profile_csv(path).source(), path);
}

TEST(CsvReader, RejectsUnopenableFile) {
  test::TempDir dir;
  std::string missing = (dir.path() / "missing.csv").string();
  try {
    read_profile_csv(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), missing + ": cannot open");
  }
  EXPECT_THROW(read_profile_csv(dir.path().string()), Error);
}

TEST(CsvWriter, WritesSortedCanonicalRows) {
  Profile p("mem");
  p.add(1, "forward", {855, 0.08, 18, 0});
  p.add(0, "backward", {855, 0.14, 33, 0});
  p.add(0, "forward", {855, 0.08, 18, 0});
  p.add(0, "backward", {1410, 0.09, 44.5, 0});
  p.add(0, "forward", {1410, 0.05, 24, 0});
  p.add(1, "forward", {1410, 0.1, 0.3, 0});
  std::ostringstream out;
  write_profile_csv(p, out);
  EXPECT_EQ(out.str(),
            "stage,instruction,frequency,time,energy\n"
            "0,forward,1410,0.050000000000000003,24\n"
            "0,forward,855,0.080000000000000002,18\n"
            "0,backward,1410,0.089999999999999997,44.5\n"
            "0,backward,855,0.14000000000000001,33\n"
            "1,forward,1410,0.10000000000000001,0.29999999999999999\n"
            "1,forward,855,0.080000000000000002,18\n");
}

TEST(CsvWriter, RoundTripsExactly) {
  Profile p = synthesize_profile(gpu_model("a40"), default_model(3), 0.03, 11);
  std::ostringstream first;
  write_profile_csv(p, first);
  std::istringstream in(first.str());
  Profile back = parse_profile_csv(in, "again.csv");
  for (const auto& [key, rows] : p.all()) {
    for (const Measurement& m : rows) {
      const Measurement& r = back.at(key.first, key.second, m.frequency_mhz);
      EXPECT_EQ(r.time_s, m.time_s);
      EXPECT_EQ(r.energy_j, m.energy_j);
    }
  }
  std::ostringstream second;
  write_profile_csv(back, second);
  EXPECT_EQ(second.str(), first.str());
}

// Shared reference profiles: 8 stages x {forward, backward} x every clock of the GPU.
void expect_shared_profile(const char* file, size_t clocks, int max_mhz, int min_mhz) {
  Profile p = read_profile_csv((test::shared_data() / "perseus/stage_profiles" / file).string());
  ASSERT_EQ(p.num_stages(), 8);
  for (int stage = 0; stage < 8; ++stage) {
    EXPECT_EQ(p.instructions(stage), (std::vector<std::string>{"forward", "backward"}));
    for (const char* instruction : {"forward", "backward"}) {
      EXPECT_EQ(p.rows(stage, instruction).size(), clocks) << file << " stage " << stage;
      EXPECT_EQ(p.max_frequency(stage, instruction), max_mhz);
      EXPECT_NO_THROW(p.at(stage, instruction, min_mhz));
    }
  }
}

TEST(CsvShared, ReadsGpt3A100Profile) {
  PERSEUS_REQUIRE_SHARED_DATA();
  expect_shared_profile("gpt3-175b+a100_sxm_bf16.csv", 38, 1410, 855);
}

TEST(CsvShared, ReadsBloomA40Profile) {
  PERSEUS_REQUIRE_SHARED_DATA();
  expect_shared_profile("bloom+a40_bf16.csv", 60, 1740, 855);
}

}  // namespace
}  // namespace perseus::profile
