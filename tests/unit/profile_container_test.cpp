// The Profile container: row checks in add(), whole-profile validation and lookups.
#include <string>

#include "perseus/profile/profile.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

using perseus::test::error_of;

namespace perseus::profile {
namespace {

Profile two_clocks(const std::string& source) {
  Profile p(source);
  p.add(0, "forward", {1410, 0.05, 24, 0});
  p.add(0, "forward", {855, 0.08, 18, 0});
  return p;
}

TEST(ProfileContainer, KnownInstructions) {
  EXPECT_EQ(known_instructions(), (std::vector<std::string>{"forward", "backward", "recompute",
                                                            "backward_input", "backward_weight"}));
  EXPECT_TRUE(is_known_instruction("backward_weight"));
  EXPECT_FALSE(is_known_instruction("Forward"));
}

TEST(ProfileContainer, Lookups) {
  Profile p = two_clocks("mem");
  p.add(0, "recompute", {1410, 0.02, 9, 0});
  p.add(0, "backward", {1410, 0.1, 40, 0});
  EXPECT_EQ(p.num_stages(), 1);
  EXPECT_TRUE(p.has(0, "forward"));
  EXPECT_FALSE(p.has(1, "forward"));
  EXPECT_EQ(p.instructions(0), (std::vector<std::string>{"forward", "backward", "recompute"}));
  EXPECT_EQ(p.rows(0, "forward").size(), 2u);
  EXPECT_EQ(p.at(0, "forward", 855).energy_j, 18.0);
  EXPECT_EQ(p.max_frequency(0, "forward"), 1410);
  EXPECT_EQ(Profile("empty").num_stages(), 0);
}

TEST(ProfileContainer, LookupErrorsNameTheProfile) {
  Profile p = two_clocks("prof.csv");
  EXPECT_EQ(error_of([&] { p.rows(0, "backward"); }),
            "prof.csv: no rows for stage 0 instruction 'backward'");
  EXPECT_EQ(error_of([&] { p.at(0, "forward", 1000); }),
            "prof.csv: no row for stage 0 instruction 'forward' at 1000 MHz");
  EXPECT_THROW(p.max_frequency(3, "forward"), Error);
}

TEST(ProfileContainer, AddRejectsOutOfRangeValuesWithLine) {
  Profile p("prof.csv");
  EXPECT_EQ(error_of([&] {
              p.add(0, "forward", {1410, 0.0, 1, 12});
            }),
            "prof.csv:12: field 'time': must be a positive number of seconds, got 0");
  EXPECT_EQ(error_of([&] {
              p.add(0, "forward", {1410, 0.1, -2, 4});
            }),
            "prof.csv:4: field 'energy': must be a non-negative number of joules, got -2");
  EXPECT_EQ(error_of([&] {
              p.add(-2, "forward", {1410, 0.1, 2, 0});
            }),
            "prof.csv: field 'stage': must not be negative, got -2");
  std::string unknown = error_of([&] { p.add(0, "wgrad", {1410, 0.1, 2, 3}); });
  EXPECT_EQ(unknown.rfind("prof.csv:3: field 'instruction': unknown instruction 'wgrad'", 0), 0u)
      << unknown;
  EXPECT_TRUE(p.all().empty());
}

TEST(ProfileContainer, ValidateAcceptsConsistentProfile) {
  Profile p = two_clocks("mem");
  p.add(1, "forward", {855, 0.08, 18, 0});
  p.add(1, "forward", {1410, 0.05, 24, 0});
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.num_stages(), 2);
}

TEST(ProfileContainer, ValidateRejectsStructuralProblems) {
  EXPECT_EQ(error_of([] { Profile("mem").validate(); }), "mem: profile has no rows");

  Profile gap = two_clocks("mem");
  gap.add(2, "forward", {1410, 0.05, 24, 0});
  EXPECT_EQ(error_of([&] { gap.validate(); }),
            "mem: field 'stage': stage 1 has no rows (stages must be 0..2 without gaps)");

  Profile missing = two_clocks("mem");
  missing.add(1, "forward", {1410, 0.05, 24, 0});
  missing.add(1, "backward", {1410, 0.1, 40, 0});
  EXPECT_EQ(error_of([&] { missing.validate(); }),
            "mem: field 'instruction': stage 0 has no 'backward' rows but stage 1 has");

  Profile slow = two_clocks("mem");
  slow.add(0, "backward", {1410, 0.2, 40, 0});
  slow.add(0, "backward", {1005, 0.1, 40, 0});
  std::string msg = error_of([&] { slow.validate(); });
  EXPECT_EQ(msg.rfind("mem: field 'time': stage 0 instruction 'backward' takes 0.2 s", 0), 0u)
      << msg;
}

}  // namespace
}  // namespace perseus::profile
