// The plan formats that are lists of clocks (the freqs_pipeline list literal and Zeus's
// (instruction, clock) pairs): round trips, the reader never evaluating code, and every class of
// malformed input, each error naming its source and line.
#include <filesystem>
#include <string>
#include <vector>

#include "perseus/plan/plan_io.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "test_support.hpp"

using perseus::test::error_of;

namespace perseus::plan {
namespace {

namespace fs = std::filesystem;

std::string plan_error(const std::string& text, const std::string& source,
                       const std::vector<int>& stage_of_rank = {}) {
  return error_of([&] { parse_plan(text, source, stage_of_rank); });
}

// ---------------------------------------------------------------------------------------------
// The freqs_pipeline list literal

TEST(PlanIoList, RoundTrip) {
  const FrequencyPlan freqs = {{1410, 1395, 1380}, {990, 975}, {855}};
  for (const std::string comment : {"", "plan 3: evaluated time 1.5 s"}) {
    std::string text = plan_to_python_list(freqs, comment);
    EXPECT_EQ(text.rfind("[\n[1410, 1395, 1380],\n", 0), 0u) << text;
    if (!comment.empty()) {
      EXPECT_CONTAINS(text, "# " + comment + "\n");
    }
    Plan p = parse_plan(text, "freqs_pipeline_00003.py");
    EXPECT_EQ(p.frequencies, freqs);
    EXPECT_EQ(p.num_stages, 3);
    EXPECT_EQ(p.num_microbatches, 0);  // stages of different lengths: no 2M to read
    EXPECT_EQ(p.schedule, "");         // a list of clocks does not name its schedule
    EXPECT_FALSE(p.predicted.has_value());
    EXPECT_FALSE(p.evaluated.has_value());
  }
}

TEST(PlanIoList, AcceptsCommentsWhitespaceAndTrailingCommas) {
  Plan p = parse_plan("# header comment\n[ # stage list\n [1410,1395 ,],\n\n  [ 855 ] , ]  \n# end",
                      "x.py");
  EXPECT_EQ(p.frequencies, (FrequencyPlan{{1410, 1395}, {855}}));
  EXPECT_EQ(parse_plan("[[1410]]", "x.py").frequencies, (FrequencyPlan{{1410}}));
}

TEST(PlanIoList, NeverEvaluatesCode) {
  perseus::test::TempDir tmp;
  const fs::path marker = tmp.path() / "pwned";
  const std::string touch = "__import__('os').system('touch " + marker.string() + "')";
  struct Case {
    std::string text;
    std::string expected;  // "<source>:<line>: ..." prefix or problem
  };
  const std::vector<Case> cases = {
      {touch, "evil.py:1:"},
      {"# a comment\n" + touch, "evil.py:2:"},
      {"[[1410, 1395],\n [x]]", "evil.py:2: expected a clock in MHz"},
      {"[[1410, 1395], [" + touch + "]]", "evil.py:1: expected a clock in MHz"},
      {"[\n[1410, 1395],\n]\n" + touch, "evil.py:4: unexpected text after the closing ']'"},
      {"[[1410]] + [[1395]]", "evil.py:1: unexpected text after the closing ']'"},
      {"[[1410 for _ in range(3)]]", "evil.py:1: expected ',' or ']'"},
      {"[[1410, 1395.5]]", "evil.py:1: expected ',' or ']'"},
      {"[[1410] [1395]]", "evil.py:1: expected ',' or ']'"},
      {"[[1410], 1395]", "evil.py:1: expected '['"},
      {"[[1410, -5]]", "evil.py:1: expected a clock in MHz"},
      {"[[1410, 0]]", "evil.py:1: clock must be positive"},
      {"[[1410, 99999999]]", "evil.py:1: expected a clock in MHz"},
      {"[[True]]", "evil.py:1: expected a clock in MHz"},
      {"[]", "evil.py:1: no stages"},
      {"[\n[1410, 1395],\n", "evil.py:3:"},
      {"[[1410, 1395]", "evil.py:1:"},
  };
  for (const Case& c : cases) {
    std::string msg = plan_error(c.text, "evil.py");
    EXPECT_EQ(msg.rfind("evil.py:", 0), 0u) << msg;
    EXPECT_CONTAINS(msg, c.expected);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
  EXPECT_FALSE(fs::exists(marker));
}

TEST(PlanIoList, EqualEvenStagesGiveTheMicrobatchCount) {
  Plan p = parse_plan("[[1410, 1395, 1380, 1365], [990, 975, 960, 945]]", "x.py");
  EXPECT_EQ(p.num_microbatches, 2);
  EXPECT_EQ(p.schedule, "");
  auto choice = plan_schedule(p, {}, "x.py");
  EXPECT_EQ(choice.name, "1f1b");
  EXPECT_EQ(choice.microbatches, 2);
  EXPECT_EQ(plan_schedule(p, {"gpipe", 0}, "x.py").name, "gpipe");  // the file does not say
  EXPECT_CONTAINS(error_of([&] {
                    plan_schedule(p, {"", 3}, "x.py");
                  }),
                  "x.py: the plan is for 2 microbatches, not 3");
  Plan odd = parse_plan("[[1410, 1395, 1380], [990]]", "y.py");
  EXPECT_EQ(plan_schedule(odd, {"", 5}, "y.py").microbatches, 5);
  EXPECT_CONTAINS(error_of([&] { plan_schedule(odd, {}, "y.py"); }),
                  "y.py: the plan does not say its microbatch count");
}

// ---------------------------------------------------------------------------------------------
// Zeus's list of (instruction, clock) pairs

TEST(PlanIoZeus, RoundTripIdentifiesTheSchedule) {
  for (const std::string name : {"1f1b", "gpipe", "envelope:1,1,0"}) {
    auto sched = schedule::make_schedule(name, 3, 5);
    FrequencyPlan freqs;
    for (std::size_t s = 0; s < 3; ++s) {
      freqs.emplace_back();
      for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
        freqs.back().push_back(static_cast<int>(1410 - 15 * (s + i)));
      }
    }
    std::string text = plan_to_zeus_list(freqs, sched, "plan 7");
    EXPECT_EQ(text.rfind("[\n[(\"forward\", 1410), (\"forward\", 1395)", 0), 0u) << text;
    EXPECT_CONTAINS(text, "# plan 7\n");
    Plan p = parse_plan(text, "freqs_pipeline_00007.py");
    EXPECT_EQ(p.frequencies, freqs);
    EXPECT_EQ(p.schedule, name);
    EXPECT_EQ(p.num_microbatches, 5);
    EXPECT_EQ(p.num_stages, 3);
    EXPECT_CONTAINS(error_of([&] {
                      plan_schedule(p, {"other", 0}, "z.py");
                    }),
                    "z.py: the plan is for the " + name + " schedule, not other");
  }
}

TEST(PlanIoZeus, AcceptsListsSingleQuotesAndTrailingCommas) {
  Plan p = parse_plan("[[['forward', 1410], ('backward', 1395,),],]", "z.py");
  EXPECT_EQ(p.frequencies, (FrequencyPlan{{1410, 1395}}));
  EXPECT_EQ(p.num_microbatches, 1);
}

TEST(PlanIoZeus, MalformedPairsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[[('forward', 1410), 1395]]", "z.py:1: expected an (instruction, MHz) pair"},
      {"[[1410, ('backward', 1395)]]", "z.py:1: expected a clock in MHz like the entries before"},
      {"[[(forward, 1410)]]", "z.py:1: expected a quoted instruction name"},
      {"[[('forward\\x', 1410)]]", "z.py:1: unterminated or escaped name"},
      {"[[('forward', 1410]]", "z.py:1: expected ')'"},
      {"[[('forward' 1410)]]", "z.py:1: expected ','"},
      {"[[('sideways', 1410)]]", "z.py: stage 0: unknown instruction type 'sideways'"},
      {"[[('forward', 1410), ('backward', 1395)],\n [('backward', 990), ('forward', 975)]]",
       "z.py: stage 1's instruction order is not that of 1f1b, gpipe or an envelope schedule"},
  };
  for (const auto& [text, expected] : cases) {
    std::string msg = plan_error(text, "z.py");
    EXPECT_CONTAINS(msg, expected);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// Zeus's per-rank file of 2 stages of 1F1B (2 microbatches): list r is its stage's list
// (stage_of_each_list[r]); list `odd_rank`'s first clock differs.
std::string zeus_rank_file(const std::vector<int>& stage_of_each_list, int odd_rank = -1) {
  const std::vector<std::string> orders = {
      "('forward', 1395), ('forward', 1395), "
      "('backward', 1395), ('backward', 1395)",
      "('forward', 1365), ('backward', 1365), "
      "('forward', 1365), ('backward', 1365)"};
  std::string text = "[\n";
  for (std::size_t r = 0; r < stage_of_each_list.size(); ++r) {
    std::string list = orders[static_cast<std::size_t>(stage_of_each_list[r])];
    if (static_cast<int>(r) == odd_rank) list.replace(list.find("1395"), 4, "1380");
    text += "[" + list + "],\n";
  }
  return text + "]\n";
}

TEST(PlanIoZeus, PerRankListsFoldIntoStagesByTheRanksStages) {
  const FrequencyPlan stages = {{1395, 1395, 1395, 1395}, {1365, 1365, 1365, 1365}};
  // Copies adjacent (Megatron's order), known or not; copies interleaved, known.
  Plan adjacent = parse_plan(zeus_rank_file({0, 0, 1, 1}), "z.py", {0, 0, 1, 1});
  Plan guessed = parse_plan(zeus_rank_file({0, 0, 0, 1, 1, 1}), "z.py");
  Plan interleaved = parse_plan(zeus_rank_file({0, 1, 0, 1}), "z.py", {0, 1, 0, 1});
  for (const Plan* p : {&adjacent, &guessed, &interleaved}) {
    EXPECT_EQ(p->frequencies, stages);
    EXPECT_EQ(p->num_stages, 2);
    EXPECT_EQ(p->schedule, "1f1b");
    EXPECT_EQ(p->num_microbatches, 2);
  }
}

TEST(PlanIoZeus, CopiesOfAStageThatDifferAreNamed) {
  EXPECT_CONTAINS(plan_error(zeus_rank_file({0, 0, 1, 1}, 1), "z.py", {0, 0, 1, 1}),
                  "z.py: ranks 0 and 1 both run stage 0 but their lists differ; Perseus serves "
                  "one plan per stage");
  // Unknown ranks: the lists taken as stages are what is wrong.
  EXPECT_CONTAINS(plan_error(zeus_rank_file({0, 0, 1, 1}, 1), "z.py"),
                  "z.py: stage 2's instruction order is not that of 1f1b");
}

}  // namespace
}  // namespace perseus::plan
