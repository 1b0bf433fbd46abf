// perseus.plan/1 JSON plan files: round trips and every class of malformed input, each error
// naming its source and field. The list formats are in plan_list_io_test.cpp.
#include "perseus/plan/plan_io.hpp"

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

using perseus::test::error_of;
using perseus::test::write_text;

namespace perseus::plan {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string error_of_plan(const std::string& text, const std::string& source) {
  return error_of([&] { parse_plan(text, source); });
}

// A 2-stage, 3-microbatch 1F1B plan with distinct clocks everywhere.
Plan sample_plan(const schedule::Schedule& sched) {
  Plan p;
  p.schedule = sched.name;
  p.num_stages = sched.num_stages;
  p.num_microbatches = sched.num_microbatches;
  p.unit_time_s = 0.001;
  p.blocking_power_w = 83.64;
  p.predicted = TimeEnergy{1.234, 567.89};
  p.evaluated = TimeEnergy{1.2345678901, 567.123456789};
  int mhz = 1410;
  for (const auto& stage : sched.ranks) {
    std::vector<int> clocks;
    for (std::size_t i = 0; i < stage.size(); ++i, mhz -= 15) clocks.push_back(mhz);
    p.frequencies.push_back(clocks);
  }
  return p;
}

// The JSON document of sample_plan, for tests that break one field at a time.
json sample_json() {
  auto sched = schedule::make_1f1b(2, 3);
  return json::parse(plan_to_json(sample_plan(sched), sched));
}

std::string error_of_json(const json& doc) {
  return error_of_plan(doc.dump(), "plan.json");
}

// ---------------------------------------------------------------------------------------------
// Plan JSON

TEST(PlanIoJson, RoundTripKeepsEveryField) {
  auto sched = schedule::make_1f1b(2, 3);
  Plan p = sample_plan(sched);
  std::string text = plan_to_json(p, sched);
  Plan q = parse_plan(text, "plan.json");
  EXPECT_EQ(q.schedule, "1f1b");
  EXPECT_EQ(q.num_stages, 2);
  EXPECT_EQ(q.num_microbatches, 3);
  EXPECT_EQ(q.unit_time_s, p.unit_time_s);
  EXPECT_EQ(q.blocking_power_w, p.blocking_power_w);
  ASSERT_TRUE(q.predicted.has_value());
  ASSERT_TRUE(q.evaluated.has_value());
  EXPECT_EQ(q.predicted->time_s, p.predicted->time_s);
  EXPECT_EQ(q.predicted->energy_j, p.predicted->energy_j);
  EXPECT_EQ(q.evaluated->time_s, p.evaluated->time_s);
  EXPECT_EQ(q.evaluated->energy_j, p.evaluated->energy_j);
  EXPECT_EQ(q.frequencies, p.frequencies);
  // Writing the parsed plan again gives the same text.
  EXPECT_EQ(plan_to_json(q, sched), text);
}

TEST(PlanIoJson, InstructionsCarryScheduleTypeAndMicrobatch) {
  auto sched = schedule::make_gpipe(2, 3);
  Plan p = sample_plan(sched);
  json doc = json::parse(plan_to_json(p, sched));
  EXPECT_EQ(doc["format"], "perseus.plan/1");
  EXPECT_EQ(doc["schedule"], "gpipe");
  ASSERT_EQ(doc["stages"].size(), 2u);
  for (std::size_t s = 0; s < 2; ++s) {
    ASSERT_EQ(doc["stages"][s].size(), sched.ranks[s].size());
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      const json& inst = doc["stages"][s][i];
      EXPECT_EQ(inst["type"], schedule::type_name(sched.ranks[s][i].type));
      EXPECT_EQ(inst["microbatch"], sched.ranks[s][i].microbatch);
      EXPECT_EQ(inst["frequency_mhz"], p.frequencies[s][i]);
    }
  }
}

TEST(PlanIoJson, PredictedAndEvaluatedAreOptional) {
  auto sched = schedule::make_1f1b(2, 3);
  Plan p = sample_plan(sched);
  p.predicted.reset();
  p.evaluated.reset();
  std::string text = plan_to_json(p, sched);
  EXPECT_EQ(text.find("predicted"), std::string::npos);
  Plan q = parse_plan(text, "plan.json");
  EXPECT_FALSE(q.predicted.has_value());
  EXPECT_FALSE(q.evaluated.has_value());
  EXPECT_EQ(q.frequencies, p.frequencies);
  json doc = json::parse(text);
  doc["predicted"] = nullptr;
  EXPECT_FALSE(parse_plan(doc.dump(), "plan.json").predicted.has_value());
}

TEST(PlanIoJson, ReadPlanFileRoundTripAndMissingFile) {
  perseus::test::TempDir tmp;
  auto sched = schedule::make_1f1b(2, 3);
  Plan p = sample_plan(sched);
  fs::path file = tmp.path() / "plan_00007.json";
  write_text(file, plan_to_json(p, sched));
  EXPECT_EQ(read_plan_file(file.string()).frequencies, p.frequencies);
  std::string missing = (tmp.path() / "nope.json").string();
  EXPECT_CONTAINS(error_of([&] { read_plan_file(missing); }), missing);
}

TEST(PlanIoJson, MalformedJsonNamesTheSource) {
  for (const std::string text : {"{", "{\"format\": \"perseus.plan/1\",", "{\"format\": perseus}",
                                 "{} trailing", "{\"a\": 1,\n\"b\": }"}) {
    std::string msg = error_of_plan(text, "plan.json");
    EXPECT_CONTAINS(msg, "plan.json");
    EXPECT_CONTAINS(msg, "invalid JSON");
  }
  // The line of the problem is reported.
  EXPECT_CONTAINS(error_of_plan("{\"format\": \"perseus.plan/1\",\n\"num_stages\": x}", "p.json"),
                  "p.json:2:");
}

TEST(PlanIoJson, UnknownTextIsRejected) {
  EXPECT_CONTAINS(error_of_plan("", "empty.json"), "empty.json: unknown plan format");
  EXPECT_CONTAINS(error_of_plan("  \n\t", "blank.json"), "blank.json");
  EXPECT_CONTAINS(error_of_plan("\"just a string\"", "s.json"), "s.json");
}

TEST(PlanIoJson, WrongFormatIsRejected) {
  json doc = sample_json();
  doc["format"] = "perseus.plan/2";
  std::string msg = error_of_json(doc);
  EXPECT_CONTAINS(msg, "plan.json: field 'format': not a Perseus plan format");
  EXPECT_EQ(msg.find("perseus.plan/2"), std::string::npos);  // file contents are not echoed
  EXPECT_CONTAINS(msg, "perseus.plan/1");
  doc["format"] = 1;
  EXPECT_CONTAINS(error_of_json(doc), "plan.json: field 'format': must be a string, got 1");
}

TEST(PlanIoJson, MissingFieldsAreNamed) {
  for (const char* name : {"format", "schedule", "num_stages", "num_microbatches", "stages"}) {
    json doc = sample_json();
    doc.erase(name);
    EXPECT_CONTAINS(error_of_json(doc), std::string("plan.json: field '") + name + "': missing");
  }
  json doc = sample_json();
  doc["stages"][1][2].erase("frequency_mhz");
  EXPECT_CONTAINS(error_of_json(doc), "plan.json: field 'stages[1][2].frequency_mhz': missing");
  doc = sample_json();
  doc["evaluated"].erase("energy_j");
  EXPECT_CONTAINS(error_of_json(doc), "plan.json: field 'evaluated.energy_j': missing");
}

TEST(PlanIoJson, WrongTypesAreNamed) {
  struct Case {
    std::function<void(json&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](json& d) { d["schedule"] = 5; }, "field 'schedule': must be a string, got 5"},
      {[](json& d) { d["num_stages"] = "2"; },
       "field 'num_stages': must be an integer >= 1, got \"2\""},
      {[](json& d) { d["num_stages"] = 2.5; },
       "field 'num_stages': must be an integer >= 1, got 2.5"},
      {[](json& d) { d["num_stages"] = true; },
       "field 'num_stages': must be an integer >= 1, got true"},
      {[](json& d) { d["num_microbatches"] = nullptr; },
       "field 'num_microbatches': must be an integer >= 1, got null"},
      {[](json& d) { d["num_microbatches"] = 1e12; },
       "field 'num_microbatches': must be an integer >= 1, got 1000000000000.0"},
      {[](json& d) { d["unit_time_s"] = "1ms"; },
       "field 'unit_time_s': must be a number, got \"1ms\""},
      {[](json& d) { d["blocking_power_w"] = json::array(); },
       "field 'blocking_power_w': must be a number, got a list"},
      {[](json& d) { d["blocking_power_w"] = -83.64; },
       "field 'blocking_power_w': must be a finite number >= 0, got -83.64"},
      {[](json& d) { d["predicted"] = 3; }, "field 'predicted': must be an object"},
      {[](json& d) { d["evaluated"]["time_s"] = "1.2"; },
       "field 'evaluated.time_s': must be a number, got \"1.2\""},
      {[](json& d) { d["stages"] = json::object(); },
       "field 'stages': must be a list of rank lists"},
      {[](json& d) { d["stages"][1] = 1410; },
       "field 'stages[1]': must be a list of {\"frequency_mhz\": ...} entries"},
      {[](json& d) { d["stages"][0][3] = 1410; }, "field 'stages[0][3]': must be an object"},
      {[](json& d) { d["stages"][0][1]["frequency_mhz"] = "1410"; },
       "field 'stages[0][1].frequency_mhz': must be an integer >= 1, got \"1410\""},
      {[](json& d) { d["stages"][0][1]["frequency_mhz"] = 1410.5; },
       "field 'stages[0][1].frequency_mhz': must be an integer >= 1, got 1410.5"},
      {[](json& d) { d["stages"][0][1]["frequency_mhz"] = true; },
       "field 'stages[0][1].frequency_mhz': must be an integer >= 1, got true"},
      {[](json& d) { d["stages"][0][1]["frequency_mhz"] = 4294968706; },
       "field 'stages[0][1].frequency_mhz': must be an integer >= 1, got 4294968706"},
  };
  for (const Case& c : cases) {
    json doc = sample_json();
    c.change(doc);
    std::string msg = error_of_json(doc);
    EXPECT_CONTAINS(msg, "plan.json");
    EXPECT_CONTAINS(msg, c.expected);
  }
}

TEST(PlanIoJson, IntegralFloatsAreIntegers) {
  json doc = sample_json();
  doc["num_stages"] = 2.0;
  doc["stages"][1][4]["frequency_mhz"] = 1005.0;
  Plan p = parse_plan(doc.dump(), "plan.json");
  EXPECT_EQ(p.num_stages, 2);
  EXPECT_EQ(p.frequencies[1][4], 1005);
}

TEST(PlanIoJson, NonPositiveClocksAreRejected) {
  for (int mhz : {0, -1410}) {
    json doc = sample_json();
    doc["stages"][1][4]["frequency_mhz"] = mhz;
    EXPECT_CONTAINS(error_of_json(doc),
                    "plan.json: field 'stages[1][4].frequency_mhz': must be an " +
                        ("integer >= 1, got " + std::to_string(mhz)));
  }
}

TEST(PlanIoJson, NonPositiveCountsAreRejected) {
  json doc = sample_json();
  doc["num_stages"] = 0;
  doc["stages"] = json::array();
  EXPECT_CONTAINS(error_of_json(doc),
                  "plan.json: field 'num_stages': must be an integer >= 1, got 0");
  doc = sample_json();
  doc["num_microbatches"] = -3;
  EXPECT_CONTAINS(error_of_json(doc),
                  "plan.json: field 'num_microbatches': must be an integer >= 1, got -3");
}

TEST(PlanIoJson, NumStagesMustMatchStages) {
  json doc = sample_json();
  doc["num_stages"] = 3;
  EXPECT_CONTAINS(error_of_json(doc),
                  "plan.json: num_stages is 3 and stages_per_rank 1 but 'stages' has 2 rank lists");
  doc["num_stages"] = 1;
  EXPECT_CONTAINS(error_of_json(doc),
                  "plan.json: num_stages is 1 and stages_per_rank 1 but 'stages' has 2 rank lists");
}

}  // namespace
}  // namespace perseus::plan
