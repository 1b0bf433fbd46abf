// A measured profile's error columns (energy_stderr, energy_pooling_error): read, written back,
// kept by split_profile, refused when malformed, and summed up for the planner.
#include <sstream>
#include <string>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/measurement_error.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::profile {
namespace {

// Stage 1's forward and backward pooled beyond kUnsplitPoolingError at one clock; one row (line
// 5) without a standard error.
const char* kMeasured =
    "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error,clock_held_down\n"
    "0,forward,1410,0.05,24,0.004,0,0\n"
    "0,forward,855,0.08,18,0.002,0,0\n"
    "0,backward,1410,0.09,44,0.003,0,0\n"
    "0,backward,855,0.14,33,,0.01,0\n"
    "1,forward,1410,0.05,24,0.006,0.12,0\n"
    "1,forward,855,0.08,18,0.001,0.02,0\n"
    "1,backward,1410,0.09,44,0.009,0.08,0\n"
    "1,backward,855,0.14,33,0.005,0.01,0\n";

Profile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_profile_csv(in, "measured.csv");
}

std::string error_of(const std::string& text) {
  return test::error_of([&] { parse(text); });
}

TEST(MeasuredProfile, ReadsEachRowsRelativeErrors) {
  const Profile p = parse(kMeasured);
  EXPECT_EQ(p.at(1, "forward", 1410).energy_stderr, 0.006);
  EXPECT_EQ(p.at(1, "forward", 1410).energy_pooling_error, 0.12);
  EXPECT_FALSE(p.at(0, "backward", 855).energy_stderr.has_value());  // an empty field
  EXPECT_EQ(p.at(0, "backward", 855).energy_pooling_error, 0.01);
  const Profile plain = parse("stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n");
  EXPECT_FALSE(plain.at(0, "forward", 1410).energy_stderr.has_value());
}

TEST(MeasuredProfile, WritesTheErrorsBackOnlyWhereTheProfileHasThem) {
  std::ostringstream out;
  write_profile_csv(parse(kMeasured), out);
  EXPECT_EQ(out.str().substr(0, out.str().find('\n')),
            "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error");
  EXPECT_CONTAINS(out.str(), "0,backward,855,0.14000000000000001,33,,0.01\n");
  const Profile again = parse(out.str());
  EXPECT_EQ(again.at(1, "backward", 1410).energy_stderr, 0.009);
  EXPECT_EQ(again.at(1, "backward", 1410).energy_pooling_error, 0.08);

  std::ostringstream plain;
  write_profile_csv(parse("stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n"),
                    plain);
  EXPECT_EQ(plain.str(),
            "stage,instruction,frequency,time,energy\n0,forward,1410,0.050000000000000003,24\n");
}

TEST(MeasuredProfile, SplittingKeepsTheRelativeErrors) {
  SplitOptions o;
  o.virtual_stages = 2;
  o.split_backward = true;
  const Profile split = split_profile(parse(kMeasured), o);
  EXPECT_EQ(split.at(3, "backward_input", 1410).energy_stderr, 0.009);
  EXPECT_EQ(split.at(2, "forward", 1410).energy_pooling_error, 0.12);
  EXPECT_DOUBLE_EQ(split.at(2, "forward", 1410).energy_j, 12.0);
}

TEST(MeasuredProfile, RefusesAMalformedErrorNamingLineAndColumn) {
  std::string text = kMeasured;
  text.replace(text.find("0.006"), 5, "-0.01");
  std::string e = error_of(text);
  EXPECT_CONTAINS(e, "measured.csv:6");
  EXPECT_CONTAINS(e, "energy_stderr");
  text = kMeasured;
  text.replace(text.find("0.12"), 4, "high");
  e = error_of(text);
  EXPECT_CONTAINS(e, "measured.csv:6");
  EXPECT_CONTAINS(e, "energy_pooling_error");
  EXPECT_CONTAINS(e, "high");
  e = error_of(
      "stage,instruction,frequency,time,energy,energy_stderr,energy_stderr\n"
      "0,forward,1410,0.05,24,0.1,0.1\n");
  EXPECT_CONTAINS(e, "measured.csv:1");
  EXPECT_CONTAINS(e, "duplicate column 'energy_stderr'");
}

TEST(MeasuredProfile, SumsUpTheErrorsForThePlanner) {
  const MeasurementError e = measurement_error(parse(kMeasured));
  EXPECT_EQ(e.rows, 8u);
  ASSERT_TRUE(e.standard_error.has_value());
  EXPECT_EQ(e.standard_error->rows, 7u);
  EXPECT_DOUBLE_EQ(e.standard_error->median, 0.004);
  EXPECT_DOUBLE_EQ(e.standard_error->worst, 0.009);
  EXPECT_EQ(e.standard_error->worst_at.stage, 1);
  EXPECT_EQ(e.standard_error->worst_at.instruction, "backward");
  EXPECT_EQ(e.standard_error->worst_at.line, 8);
  ASSERT_TRUE(e.pooling_error.has_value());
  EXPECT_DOUBLE_EQ(e.pooling_error->worst, 0.12);
  ASSERT_EQ(e.unsplit.size(), 2u);  // stage 1's backward (0.08) and forward (0.12)
  EXPECT_EQ(e.unsplit[0].instruction, "backward");
  EXPECT_EQ(e.unsplit[0].rows, 1u);
  EXPECT_EQ(e.unsplit[0].of, 2u);
  EXPECT_DOUBLE_EQ(e.unsplit[1].worst, 0.12);

  const std::vector<std::string> lines = describe(e);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "energy standard error: median 0.40 %, worst 0.90 % (stage 1 backward at 1410 MHz, "
            "line 8), 7 of 8 rows");
  EXPECT_CONTAINS(lines[1], "worst 12.00 % (stage 1 forward at 1410 MHz, line 6)");
  EXPECT_CONTAINS(lines[1],
                  "only the sum is measured, not each energy, of stage 1 backward (1 of 2 rows, up "
                  "to 8.00 %), stage 1 forward (1 of 2 rows, up to 12.00 %)");
}

// Stage 1 split by the profiler's split-clock rounds: its 855 MHz rows measured as differences
// from its 1410 MHz rows, which refer to themselves.
const char* kSplit =
    "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error,"
    "energy_pooling_reference_mhz\n"
    "0,forward,1410,0.05,24,0.004,0,\n"
    "0,forward,855,0.08,18,0.002,0,\n"
    "0,backward,1410,0.09,44,0.003,0,\n"
    "0,backward,855,0.14,33,0.005,0,\n"
    "1,forward,1410,0.05,24,0.006,0.125,1410\n"
    "1,forward,855,0.08,18,0.009,0.16666666666666666,1410\n"
    "1,backward,1410,0.09,44,0.009,0.068181818181818177,1410\n"
    "1,backward,855,0.14,33,0.009,0.090909090909090912,1410\n";

TEST(MeasuredProfile, ReadsAndWritesTheClockAPooledRowWasMeasuredFrom) {
  const Profile p = parse(kSplit);
  EXPECT_EQ(p.at(1, "forward", 855).energy_pooling_reference_mhz, 1410);
  EXPECT_FALSE(p.at(0, "forward", 855).energy_pooling_reference_mhz);
  std::ostringstream out;
  write_profile_csv(p, out);
  EXPECT_EQ(out.str().substr(0, out.str().find('\n')),
            "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error,"
            "energy_pooling_reference_mhz");
  EXPECT_CONTAINS(out.str(), ",0.16666666666666666,1410\n");
  EXPECT_EQ(parse(out.str()).at(1, "backward", 855).energy_pooling_reference_mhz, 1410);
  // Each such row's own energy is measured up to its reference's offset, not merely the sum.
  const MeasurementError e = measurement_error(p);
  EXPECT_TRUE(e.unsplit.empty());
  ASSERT_EQ(e.offset.size(), 2u);
  EXPECT_EQ(e.offset[1].instruction, "forward");
  EXPECT_EQ(e.offset[1].rows, 2u);
  EXPECT_CONTAINS(describe(e)[1],
                  "measured as a difference from its row at one clock, whose error in J its rows "
                  "share (split-clock rounds: it does not move a plan that runs only such rows), "
                  "of stage 1 backward (2 of 2 rows, up to 9.09 %), stage 1 forward (2 of 2 "
                  "rows, up to 16.67 %)");
}

TEST(MeasuredProfile, RefusesAPoolingReferenceThatDoesNotHold) {
  auto refused = [](const std::string& from, const std::string& to) {
    std::string text = kSplit;
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  std::string e = refused("0.125,1410", "0.125,fast");
  EXPECT_CONTAINS(e, "measured.csv:6");
  EXPECT_CONTAINS(e, "energy_pooling_reference_mhz");
  EXPECT_CONTAINS(e, "fast");
  e = refused("0.16666666666666666,1410", "0.16666666666666666,700");
  EXPECT_CONTAINS(e,
                  "measured.csv:7: field 'energy_pooling_reference_mhz': 700 MHz: no row for "
                  "stage 1 instruction 'forward' at that clock");
  e = refused("0.16666666666666666,1410", ",1410");
  EXPECT_CONTAINS(e, "measured.csv:7");
  EXPECT_CONTAINS(e, "the row has no energy_pooling_error to share");
  e = refused("0.006,0.125,1410", "0.006,,");
  EXPECT_CONTAINS(e, "measured.csv:7");
  EXPECT_CONTAINS(e, "its row has no energy_pooling_error (line 6)");
  e = refused("0.006,0.125,1410", "0.006,0.125,855");
  EXPECT_CONTAINS(e, "its row refers to another clock");
}

TEST(MeasuredProfile, SaysOnlyWhatTheColumnsHold) {
  const Profile plain = parse("stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n");
  EXPECT_TRUE(describe(measurement_error(plain)).empty());
  std::string pooled_within = kMeasured;
  pooled_within.replace(pooled_within.find("0.12"), 4, "0.03");
  pooled_within.replace(pooled_within.find(",0.08,0\n"), 6, ",0.04,");
  const std::vector<std::string> lines = describe(measurement_error(parse(pooled_within)));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_CONTAINS(lines[1], "worst 4.00 % (stage 1 backward at 1410 MHz, line 8)");
  EXPECT_CONTAINS(lines[1], "every instruction's own energy within 5.00 %");

  std::string unpooled =  // every row with a power of its own
      "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error\n"
      "0,forward,1410,0.05,24,0.004,0\n"
      "0,forward,855,0.08,18,0.002,0\n";
  EXPECT_CONTAINS(describe(measurement_error(parse(unpooled)))[1],
                  "none, every instruction's power fitted on its own");
  unpooled.replace(unpooled.find("0.002,0\n"), 8, "0.002,1e-6\n");  // one barely pooled
  EXPECT_CONTAINS(describe(measurement_error(parse(unpooled)))[1],
                  "worst < 0.01 % (stage 0 forward at 855 MHz, line 3)");
}

}  // namespace
}  // namespace perseus::profile
