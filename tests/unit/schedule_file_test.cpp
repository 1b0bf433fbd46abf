// Schedules read from files in PyTorch's notation (schedule_file.hpp): the CSV torch writes and
// JSON, idle cells and bookkeeping skipped, and one clear error per class of bad input.
#include "perseus/schedule/schedule_file.hpp"

#include <gtest/gtest.h>

#include <string>

#include "perseus/schedule/catalog.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::schedule {
namespace {

std::string error_of_text(const std::string& text) {
  return test::error_of([&] { parse_schedule_text(text, "order.csv"); });
}

TEST(ScheduleFile, ReadsTorchCsvWithIdleCellsAndBookkeeping) {
  // 2 ranks, 2 microbatches, 1F1B as torch writes it (rank 1 idles first).
  Schedule s = parse_schedule_text(
      "0F0,0F1,0B0,0B1,0REDUCE_GRAD\n"
      ",1F0,1B0,1F1,1B1,1REDUCE_GRAD\n",
      "dir/order.csv");
  EXPECT_EQ(s.name, "order.csv");
  EXPECT_EQ(s.num_stages, 2);
  EXPECT_EQ(s.num_microbatches, 2);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(schedule_to_csv(s), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  // What we write reads back as the same schedule.
  EXPECT_EQ(schedule_to_csv(parse_schedule_text(schedule_to_csv(s), "x.csv")), schedule_to_csv(s));
}

TEST(ScheduleFile, ReadsJsonArraysAndObjectsAndOverlappedPairs) {
  Schedule a = parse_schedule_text(R"([["0F0", null, "1F0", "1B0", "0B0"]])", "a.json");
  EXPECT_EQ(a.num_ranks(), 1);
  EXPECT_EQ(a.num_stages, 2);
  Schedule b = parse_schedule_text(
      R"({"0": ["0F0", "1F0", "(1B0;0F1)OVERLAP_F_B", "1F1", "1B1", "0B0", "0B1"]})", "b.json");
  ASSERT_EQ(b.ranks[0].size(), 7u);  // the pair is one item: its two actions, in order
  EXPECT_EQ(action_name(b.ranks[0][2]), "(1B0;0F1)OVERLAP_F_B");
  const std::vector<Instruction> pair = actions_of(b.ranks[0][2]);
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(action_name(pair[0]), "1B0");
  EXPECT_EQ(action_name(pair[1]), "0F1");
  EXPECT_EQ(b.num_instructions(), 8u);
  EXPECT_EQ(schedule_to_csv(b), "0F0,1F0,(1B0;0F1)OVERLAP_F_B,1F1,1B1,0B0,0B1\n");
  // Torch's pairs are a forward and a backward (B or I).
  EXPECT_CONTAINS(error_of_text("0F0,1F0,(1B0;0B0)OVERLAP_F_B,0F1\n"),
                  "rank 0 item 3: '(1B0;0B0)OVERLAP_F_B' is not an overlapped pair");
}

TEST(ScheduleFile, TheBuiltInSchedulesRoundTripThroughCsv) {
  for (const auto& name : schedule_names()) {
    if (name == "envelope") continue;
    Schedule s = make_schedule(name, 8, 8);
    Schedule back = parse_schedule_text(schedule_to_csv(s), name + ".csv");
    EXPECT_EQ(back.stage_rank, s.stage_rank) << name;
    EXPECT_EQ(schedule_to_csv(back), schedule_to_csv(s)) << name;
  }
}

TEST(ScheduleFile, NamesWhatIsWrong) {
  EXPECT_CONTAINS(error_of_text("0F0,0X0\n"),
                  "order.csv: rank 0 item 2: '0X0' is not an action in PyTorch's notation");
  EXPECT_CONTAINS(error_of_text("0F0,F1\n"), "rank 0 item 2: 'F1' is not an action");
  EXPECT_CONTAINS(error_of_text("0F0,1F0\n1B0,0B0\n"),
                  "order.csv: stage 1 has actions on rank 0 and on rank 1");
  EXPECT_CONTAINS(error_of_text("0F0,0B0\n2F0,2B0\n"),
                  "order.csv: stage 1 has no actions but stage 2 has");
  EXPECT_CONTAINS(error_of_text("0F0,0F1,0B0\n"), "no backward of stage 0 microbatch 1");
  EXPECT_CONTAINS(error_of_text("0F0,0B0,0F0\n"), "(0F0): 0F0 appears twice");
  EXPECT_CONTAINS(error_of_text("0F0,0I0\n"), "no backward_weight of stage 0 microbatch 0");
  EXPECT_CONTAINS(error_of_text("0F0,0W0,0I0\n"), "comes before its backward_input");
  EXPECT_CONTAINS(error_of_text("0B0,0F0\n"), "comes before its forward");
  EXPECT_CONTAINS(error_of_text("0F0,0B0\n1F0,1B0\n0F1\n"), "stage 0 has actions on rank 0");
  // Rank 0 waits for stage 1's backward before sending it the forward: a deadlock, named.
  EXPECT_CONTAINS(error_of_text("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n"),
                  "deadlocks: waiting forever are rank 0 at 0B0, rank 1 at 1F1");
  EXPECT_CONTAINS(error_of_text(""), "order.csv: no actions");
  EXPECT_CONTAINS(test::error_of([] { parse_schedule_text("[[\"0F0\", 3]]", "o.json"); }),
                  "o.json: field '[0][1]': must be an action string or null");
  EXPECT_CONTAINS(test::error_of([] { parse_schedule_text("{\"1\": []}", "o.json"); }),
                  "\"0\" is missing");
  EXPECT_CONTAINS(test::error_of([] { parse_schedule_text("[[\"0F0\"", "o.json"); }),
                  "o.json:1: invalid JSON at byte 8: syntax error while parsing array");
}

}  // namespace
}  // namespace perseus::schedule
