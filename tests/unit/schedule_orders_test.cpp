// The multi-stage schedule generators against PyTorch 2.11's own orders
// (../shared/data/torch_schedules/pipeline_orders.json): same per-rank compute actions, and the
// combinations torch refuses are refused here too.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "perseus/schedule/dag.hpp"
#include "perseus/schedule/generators.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/schedule/schedule_file.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::schedule {
namespace {

using nlohmann::json;
using Generator = std::function<Schedule(int ranks, int stages_per_rank, int microbatches)>;

std::filesystem::path orders_path() {
  return test::shared_data() / "torch_schedules" / "pipeline_orders.json";
}

// Torch's class name -> our generator. The V-shaped ones take no stage count.
const std::map<std::string, Generator>& generators() {
  static const std::map<std::string, Generator> table = {
      {"Schedule1F1B", [](int r, int, int m) { return make_1f1b(r, m); }},
      {"ScheduleGPipe", [](int r, int, int m) { return make_gpipe(r, m); }},
      {"ScheduleInterleaved1F1B", make_interleaved_1f1b},
      {"ScheduleLoopedBFS", make_looped_bfs},
      {"ScheduleInterleavedZeroBubble", make_interleaved_zero_bubble},
      {"ScheduleZBVZeroBubble", [](int r, int, int m) { return make_zbv(r, m); }},
      {"ScheduleDualPipeV", [](int r, int, int m) { return make_dualpipev(r, m); }},
  };
  return table;
}

bool v_shaped(const std::string& cls) {
  return cls == "ScheduleZBVZeroBubble" || cls == "ScheduleDualPipeV";
}

// The stages per rank a class always builds (1 for the classic, 2 for the V-shaped ones), or 0
// when it takes any count.
int fixed_stages_per_rank(const std::string& cls) {
  if (cls == "Schedule1F1B" || cls == "ScheduleGPipe") return 1;
  return v_shaped(cls) ? 2 : 0;
}

// Torch's compute actions of one rank: idle steps and bookkeeping (REDUCE_GRAD, ...) left out,
// an overlapped "(0F3;3B1)OVERLAP_F_B" read as its two actions, forward first.
std::vector<std::string> torch_actions(const json& steps) {
  static const std::regex compute(R"(\d+[FBIW]\d+)");
  static const std::regex overlap(R"(\((\d+[FBIW]\d+);(\d+[FBIW]\d+)\)OVERLAP_F_B)");
  std::vector<std::string> out;
  for (const auto& step : steps) {
    if (step.is_null()) continue;
    std::string action = step.get<std::string>();
    std::smatch parts;
    if (std::regex_match(action, parts, overlap)) {
      out.push_back(parts[1]);
      out.push_back(parts[2]);
    } else if (std::regex_match(action, compute)) {
      out.push_back(action);
    }
  }
  return out;
}

// A rank's items as torch_actions reads torch's: a pair's two actions, in order.
std::vector<std::string> names_of(const std::vector<Instruction>& list) {
  std::vector<std::string> out;
  for (const auto& item : list) {
    for (const auto& action : actions_of(item)) out.push_back(action_name(action));
  }
  return out;
}

// The kind letters only ("3F1" -> "F").
std::vector<std::string> kinds_of(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) out.push_back(name.substr(name.find_first_of("FBIW"), 1));
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : " ") + name;
  return out;
}

struct Key {
  std::string cls;
  int ranks = 0;
  int stages_per_rank = 0;
  int microbatches = 0;
};

// "<Class>/pp<R>/v<V>/m<M>".
Key parse_key(const std::string& key) {
  static const std::regex pattern(R"(([^/]+)/pp(\d+)/v(\d+)/m(\d+))");
  std::smatch parts;
  if (!std::regex_match(key, parts, pattern)) throw Error("unexpected key '" + key + "'");
  return {parts[1], std::stoi(parts[2]), std::stoi(parts[3]), std::stoi(parts[4])};
}

// The same DAG: equal node lists (rank, position, action) and equal successor lists.
void expect_same_dag(const Schedule& a, const Schedule& b, const std::string& label) {
  Dag da(a), db(b);
  ASSERT_EQ(da.num_nodes(), db.num_nodes()) << label;
  for (int v = 0; v < da.num_nodes(); ++v) {
    const auto &na = da.node(v), &nb = db.node(v);
    ASSERT_EQ(na.rank, nb.rank) << label << " node " << v;
    ASSERT_EQ(action_name(na.instruction), action_name(nb.instruction)) << label << " node " << v;
    auto sa = da.successors(v), sb = db.successors(v);
    std::vector<int> ea(sa.begin(), sa.end()), eb(sb.begin(), sb.end());
    std::sort(ea.begin(), ea.end());
    std::sort(eb.begin(), eb.end());
    ASSERT_EQ(ea, eb) << label << " successors of node " << v;
  }
}

// One key with an order: the generator's actions must equal torch's, rank by rank.
void expect_same_order(const std::string& key, const Key& k, const json& order) {
  Schedule s;
  try {
    s = generators().at(k.cls)(k.ranks, k.stages_per_rank, k.microbatches);
  } catch (const Error& e) {
    FAIL() << key << ": torch builds it, we refuse: " << e.what();
  }
  ASSERT_EQ(s.num_ranks(), k.ranks) << key;
  ASSERT_EQ(s.num_stages, k.ranks * k.stages_per_rank) << key;
  for (int r = 0; r < k.ranks; ++r) {
    auto want = torch_actions(order.at(std::to_string(r)));
    auto got = names_of(s.ranks[r]);
    // Torch 2.11 displays Schedule1F1B's last rank with microbatches shifted by one (README).
    if (k.cls == "Schedule1F1B" && r == k.ranks - 1) {
      want = kinds_of(want);
      got = kinds_of(got);
    }
    EXPECT_EQ(joined(got), joined(want)) << key << " rank " << r;
  }
  // The order read as a schedule file (torch's notation, idle steps and bookkeeping included)
  // is the generator's schedule, DAG and all; Schedule1F1B's displayed order is off by one.
  if (k.cls == "Schedule1F1B") return;
  Schedule file = parse_schedule_text(order.dump(), key + ".json");
  EXPECT_EQ(file.stage_rank, s.stage_rank) << key;
  EXPECT_EQ(file.num_microbatches, s.num_microbatches) << key;
  expect_same_dag(file, s, key);
}

TEST(ScheduleOrders, MatchTorchOrEqualRefusals) {
  if (!std::filesystem::exists(orders_path())) GTEST_SKIP() << orders_path() << " not found";
  json all = json::parse(std::ifstream(orders_path()));
  std::map<std::string, int> matched;
  std::map<std::string, int> refused;
  for (const auto& [key, value] : all.at("schedules").items()) {
    Key k = parse_key(key);
    if (k.cls == "_ScheduleForwardOnly") continue;
    ASSERT_TRUE(generators().count(k.cls)) << "no generator for " << key;
    bool torch_refuses = value.contains("error");
    int fixed = fixed_stages_per_rank(k.cls);
    if (fixed != 0 && k.stages_per_rank != fixed) {
      // A stage count our generator cannot take (the V-shaped ones always build 2 per rank):
      // torch must refuse it too.
      EXPECT_TRUE(torch_refuses) << key;
      continue;
    }
    if (torch_refuses) {
      EXPECT_THROW(generators().at(k.cls)(k.ranks, k.stages_per_rank, k.microbatches), Error)
          << key << " (torch: " << value.at("error").get<std::string>() << ")";
      ++refused[k.cls];
    } else {
      expect_same_order(key, k, value);
      ++matched[k.cls];
    }
  }
  for (const auto& [cls, generate] : generators()) EXPECT_GT(matched[cls], 0) << cls;
  EXPECT_GT(refused["ScheduleDualPipeV"], 0);
}

// Every (stage, microbatch) runs one forward and either one full backward or one input and one
// weight backward, in that order, all on the rank that holds the stage.
void expect_complete(const Schedule& s, const std::string& label) {
  // (stage, microbatch) -> position in its rank's list of each kind, -1 while not seen.
  std::map<std::pair<int, int>, std::array<int, kNumInstructionTypes>> seen;
  const std::array<int, kNumInstructionTypes> unseen = {-1, -1, -1, -1};
  for (int r = 0; r < s.num_ranks(); ++r) {
    for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
      for (const Instruction& a : actions_of(s.ranks[r][i])) {  // a pair's: at its position
        std::string where = label + " rank " + std::to_string(r) + " " + action_name(a);
        ASSERT_TRUE(a.stage >= 0 && a.stage < s.num_stages) << where;
        ASSERT_TRUE(a.microbatch >= 0 && a.microbatch < s.num_microbatches) << where;
        EXPECT_EQ(s.stage_rank[a.stage], r) << where << ": stage not on this rank";
        int& pos = seen.try_emplace({a.stage, a.microbatch}, unseen)
                       .first->second[static_cast<int>(a.type)];
        EXPECT_EQ(pos, -1) << where << ": repeated";
        pos = static_cast<int>(i);
      }
    }
  }
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(s.num_stages) * s.num_microbatches) << label;
  for (const auto& [sm, pos] : seen) {
    std::string where =
        label + " stage " + std::to_string(sm.first) + " microbatch " + std::to_string(sm.second);
    auto [f, b, in, w] = pos;
    EXPECT_GE(f, 0) << where << ": no forward";
    bool full = b >= 0 && in < 0 && w < 0;
    bool split = b < 0 && in >= 0 && w >= 0;
    EXPECT_TRUE(full || split) << where << ": needs one B, or one I and one W";
    EXPECT_LT(f, std::max(b, in)) << where << ": backward before forward";
    if (split) {
      EXPECT_LT(in, w) << where << ": weight before input backward";
    }
  }
}

// The sizes torch refuses (besides non-positive ones): interleaved schedules need M divisible
// by max(1, M / R), DualPipeV needs M >= 2R.
bool torch_refuses(const std::string& cls, int ranks, int microbatches) {
  if (cls == "ScheduleInterleaved1F1B" || cls == "ScheduleInterleavedZeroBubble") {
    return microbatches % std::max(1, microbatches / ranks) != 0;
  }
  return cls == "ScheduleDualPipeV" && microbatches < 2 * ranks;
}

TEST(ScheduleOrders, EveryStageAndMicrobatchRunsOnceOnItsRank) {
  for (const auto& [cls, generate] : generators()) {
    for (int r = 1; r <= 5; ++r) {
      for (int v = 1; v <= 3; ++v) {
        int fixed = fixed_stages_per_rank(cls);
        if (fixed != 0 && v != fixed) continue;
        for (int m = 1; m <= 13; ++m) {
          std::string label =
              cls + "/pp" + std::to_string(r) + "/v" + std::to_string(v) + "/m" + std::to_string(m);
          if (torch_refuses(cls, r, m)) {
            EXPECT_THROW(generate(r, v, m), Error) << label;
          } else {
            expect_complete(generate(r, v, m), label);
          }
        }
      }
    }
  }
}

TEST(ScheduleOrders, StagesSitWhereTheLayoutSays) {
  Schedule looped = make_interleaved_1f1b(3, 2, 6);
  EXPECT_EQ(looped.stage_rank, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(looped.name, "interleaved-1f1b");
  Schedule v = make_zbv(3, 6);
  EXPECT_EQ(v.stage_rank, (std::vector<int>{0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(v.name, "zbv");
  EXPECT_EQ(make_looped_bfs(2, 2, 2).name, "looped-bfs");
  EXPECT_EQ(make_interleaved_zero_bubble(2, 2, 2).name, "interleaved-zero-bubble");
  EXPECT_EQ(make_dualpipev(2, 4).name, "dualpipev");
}

TEST(ScheduleOrders, RefusesWhatTorchRefuses) {
  for (auto make : {make_interleaved_1f1b, make_looped_bfs, make_interleaved_zero_bubble}) {
    EXPECT_THROW(make(0, 2, 4), Error);
    EXPECT_THROW(make(2, 0, 4), Error);
    EXPECT_THROW(make(2, 2, 0), Error);
  }
  for (auto make : {make_zbv, make_dualpipev}) {
    EXPECT_THROW(make(-1, 4), Error);
    EXPECT_THROW(make(2, 0), Error);
  }
  // Interleaved schedules split M into max(1, M / R) equal rounds: 9 on 4 ranks is 2 rounds of
  // 4.5, refused; 6 and 3 on 4 ranks are one round, accepted.
  EXPECT_CONTAINS(test::error_of([] { make_interleaved_1f1b(4, 2, 9); }), "rounds");
  EXPECT_THROW(make_interleaved_zero_bubble(4, 2, 9), Error);
  EXPECT_NO_THROW(make_interleaved_1f1b(4, 2, 6));
  EXPECT_NO_THROW(make_interleaved_zero_bubble(4, 2, 3));
  EXPECT_NO_THROW(make_looped_bfs(4, 2, 9));
  // DualPipeV needs M >= 2R; ZBV takes any M.
  EXPECT_CONTAINS(test::error_of([] { make_dualpipev(4, 7); }), "microbatches");
  EXPECT_NO_THROW(make_dualpipev(4, 8));
  EXPECT_NO_THROW(make_zbv(4, 1));
}

}  // namespace
}  // namespace perseus::schedule
