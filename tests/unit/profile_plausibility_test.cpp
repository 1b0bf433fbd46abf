// Plausibility of a profile and a blocking power for one GPU: the bounds, the row named (the
// first in file order), the unit hint, and what passes.
#include <string>

#include "perseus/profile/plausibility.hpp"
#include "test_support.hpp"

using perseus::test::error_of;

namespace perseus::profile {
namespace {

// Two forward rows on lines 2 and 3: 480 W and 225 W.
Profile sane() {
  Profile p("p.csv");
  p.add(0, "forward", {1410, 0.05, 24, 2});
  p.add(0, "forward", {855, 0.08, 18, 3});
  return p;
}

std::string implausible(const Profile& p) {
  try {
    check_plausible(p);
  } catch (const ImplausibleInput& e) {
    return e.what();
  }
  return "";
}

TEST(ProfilePlausibility, RealisticProfilesPass) {
  EXPECT_EQ(implausible(sane()), "");
  EXPECT_NO_THROW(check_blocking_power(sane(), 83.64, "--blocking-power"));
  EXPECT_NO_THROW(check_blocking_power(sane(), 480.0, "--blocking-power"));  // the highest
}

TEST(ProfilePlausibility, NamesTheFirstRowInFileOrderAndTheLikelyUnit) {
  Profile ms("ms.csv");  // milliseconds: 0.48 W and 0.225 W; the backward row comes first
  ms.add(0, "forward", {1410, 50, 24, 7});
  ms.add(0, "backward", {1410, 100, 45, 4});
  std::string msg = implausible(ms);
  EXPECT_CONTAINS(msg, "ms.csv:4: field 'energy': average power 45 J / 100 s = 0.45 W");
  EXPECT_CONTAINS(msg, "outside 5..2000 W");
  EXPECT_CONTAINS(msg, "time in milliseconds, or energy in kilojoules?");
  Profile mj("mj.csv");
  mj.add(0, "forward", {1410, 0.05, 24000, 2});
  EXPECT_CONTAINS(implausible(mj), "energy in millijoules");
  Profile absurd("x.csv");  // a factor of 1000 does not explain it: no hint
  absurd.add(0, "forward", {1410, 1, 1e-6, 2});
  EXPECT_EQ(implausible(absurd).find('?'), std::string::npos) << implausible(absurd);
  EXPECT_NE(implausible(absurd), "");
}

TEST(ProfilePlausibility, ClocksOutsideTheRange) {
  Profile khz("khz.csv");
  khz.add(0, "forward", {1410000, 0.05, 24, 2});
  EXPECT_CONTAINS(implausible(khz),
                  "khz.csv:2: field 'frequency': 1410000 MHz is outside 50..5000");
  Profile low("low.csv");
  low.add(0, "forward", {49, 0.05, 24, 2});
  EXPECT_CONTAINS(implausible(low), "49 MHz");
}

TEST(ProfilePlausibility, BlockingPowerAboveTheHighestInstructionPower) {
  std::string msg = error_of([] { check_blocking_power(sane(), 83640, "--blocking-power"); });
  EXPECT_CONTAINS(msg,
                  "--blocking-power: 83640 W is above the highest instruction power of "
                  "p.csv (480 W)");
  EXPECT_CONTAINS(msg, "in milliwatts?");
  EXPECT_THROW(check_blocking_power(sane(), 481, "x"), ImplausibleInput);
}

}  // namespace
}  // namespace perseus::profile
