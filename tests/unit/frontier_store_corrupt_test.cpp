// Every class of corrupt frontier file (frontier.csv, plans.txt, meta.json), each error naming the
// file and what is wrong, and each file's absence named by its path.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontier_store_fixture.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "test_support.hpp"

using perseus::test::join_lines;

namespace perseus::plan {
namespace {

// Writes the frontier, applies `corrupt` to the text of `file`, and returns read_frontier's error.
std::string corrupted(const fs::path& dir, const std::string& file,
                      const std::function<std::string(const std::string&)>& corrupt) {
  std::string text = read_text(dir / file);
  write_text(dir / file, corrupt(text));
  std::string msg = error_of([&] { read_frontier(dir); });
  write_text(dir / file, text);  // restore for the next case
  return msg;
}

// `text` with line `n` (1-based) replaced.
std::function<std::string(const std::string&)> replace_line(std::size_t n,
                                                            const std::string& line) {
  return [n, line](const std::string& text) {
    auto lines = lines_of(text);
    lines.at(n - 1) = line;
    return join_lines(lines);
  };
}

// `text` without its last line.
std::string drop_last_line(const std::string& text) {
  auto lines = lines_of(text);
  lines.pop_back();
  return join_lines(lines);
}

struct Corruption {
  std::function<std::string(const std::string&)> corrupt;
  std::string expected;  // part of the error message
};

// Each corruption of `file` is reported with `expected`, and so is the file's absence (by path).
void expect_reported(const fs::path& dir, const std::string& file,
                     const std::vector<Corruption>& cases) {
  for (std::size_t k = 0; k < cases.size(); ++k) {
    std::string msg = corrupted(dir, file, cases[k].corrupt);
    EXPECT_CONTAINS(msg, cases[k].expected) << "case " << k;
  }
  EXPECT_CONTAINS(error_of([&] {
                    fs::remove(dir / file);
                    read_frontier(dir);
                  }),
                  (dir / file).string());
}

TEST_F(FrontierStore, CorruptPlansFileIsReportedWithItsName) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  const std::string plans = (dir / "plans.txt").string();
  const std::string first = lines_of(read_text(dir / "plans.txt")).at(1);
  const std::vector<Corruption> cases = {
      {[](const std::string&) { return std::string("garbage\n"); }, plans + ":1: bad header"},
      {[](const std::string&) { return std::string(); }, plans + ":1: bad header"},
      {replace_line(1, "perseus.plans/1 3 7"), plans + ":1: bad header"},
      {replace_line(2, "0 abc"), plans + ":2:"},
      {replace_line(2, "0 1410 1395"), plans + ":2:"},    // too few clocks
      {replace_line(2, first + " 1410"), plans + ":2:"},  // too many clocks
      {replace_line(2, "1" + first.substr(1)), plans + ":2: bad plan index"},
      {replace_line(3, "1 5:"), plans + ":3:"},
      {replace_line(3, "1 :1410"), plans + ":3:"},
      {replace_line(3, "1 x:1410"), plans + ":3:"},
      {replace_line(3, "1 5:99999999999999"), plans + ":3:"},
      {replace_line(3, "1 99999:1410"), plans + ":3: bad entry '99999:1410'"},
      {replace_line(3, "1 0:0"), plans + ":3: bad entry '0:0'"},
      {replace_line(3, "1 0:-1410"), plans + ":3:"},
      {drop_last_line, plans},
  };
  expect_reported(dir, "plans.txt", cases);
}

TEST_F(FrontierStore, CorruptFrontierCsvIsReportedWithItsName) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  const std::string csv = (dir / "frontier.csv").string();
  const std::vector<Corruption> cases = {
      {replace_line(1, "stage,instruction,frequency,time,energy"), csv + ":1:"},
      {replace_line(3, "1,abc,1,2,3,0"), csv + ":3: field 'planned_time_s': not a number 'abc'"},
      {replace_line(3, "1,1,2,3"), csv + ":3: expected 6 fields as in the header, found 4"},
      {replace_line(3, "1,1,2,3,4,5"), csv + ":3: field 'pareto': must be 0 or 1"},
      {replace_line(3, "7,1,2,3,4,0"), csv + ":3: field 'index': must be 1 (rows count up from 0)"},
      {replace_line(3, "1,1,2,nan,4,0"),
       csv + ":3: field 'evaluated_time_s': not a finite number 'nan'"},
      {replace_line(3, "1,1,-2,3,4,0"),
       csv + ":3: field 'predicted_energy_j': must be >= 0, got '-2'"},
      {drop_last_line, "frontier.csv has"},
  };
  expect_reported(dir, "frontier.csv", cases);
}

// A JSON file's text with `change` applied to its document.
std::function<std::string(const std::string&)> edit(const std::function<void(json&)>& change) {
  return [change](const std::string& text) {
    json doc = json::parse(text);
    change(doc);
    return doc.dump();
  };
}

TEST_F(FrontierStore, CorruptMetadataIsReportedWithItsName) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  const std::string meta = (dir / "meta.json").string();
  const std::vector<Corruption> cases = {
      {[](const std::string& t) { return t.substr(0, t.size() / 2); }, ": invalid JSON at byte "},
      {[](const std::string&) { return std::string(); }, "invalid JSON at byte 1"},
      {edit([](json& d) { d["format"] = "perseus.frontier/9"; }),
       "field 'format': not a frontier (expected perseus.frontier/1)"},
      {edit([](json& d) { d.erase("format"); }), "field 'format': missing"},
      {edit([](json& d) { d.erase("num_stages"); }), "field 'num_stages': missing"},
      {edit([](json& d) { d["num_stages"] = "3"; }),
       "field 'num_stages': must be an integer >= 1, got \"3\""},
      {edit([](json& d) { d["num_stages"] = 0; }), "field 'num_stages': must be an integer >= 1"},
      {edit([](json& d) { d["num_microbatches"] = -4; }),
       "field 'num_microbatches': must be an integer >= 1, got -4"},
      {edit([](json& d) { d["num_microbatches"] = 4.5; }),  // was read as 4
       "field 'num_microbatches': must be an integer >= 1, got 4.5"},
      {edit([](json& d) {  // an older file names its schedule only
         d["schedule"] = "zigzag";
         d.erase("schedule_actions");
       }),
       "zigzag"},
      {edit([](json& d) { d["unit_time_s"] = nullptr; }),
       "field 'unit_time_s': must be a number, got null"},
      {edit([](json& d) { d["blocking_power_w"] = -1; }),
       "field 'blocking_power_w': must be a finite number >= 0, got -1"},
      {edit([](json& d) { d["all_max"].erase("energy_j"); }), "field 'all_max.energy_j': missing"},
      {edit([](json& d) { d["all_max"] = 7; }), "field 'all_max': must be an object"},
      {edit([](json& d) { d["schedule_actions"] = "0F0,0X0\n"; }), "0X0"},
      {edit([](json& d) { d["schedule_actions"] = 5; }),
       "field 'schedule_actions': must be a string, got 5"},
      {edit([](json& d) { d["stages_per_rank"] = 0; }),
       "field 'stages_per_rank': must be an integer >= 1, got 0"},
      {edit([](json& d) { d["stages_per_rank"] = 2; }),
       "field 'stages_per_rank': must divide num_stages (3)"},
      {edit([](json& d) { d["stages_per_rank"] = 3; }),  // the actions run one stage per rank
       "schedule_actions runs 1 stages per rank, not stages_per_rank 3"},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    std::string msg = corrupted(dir, "meta.json", cases[k].corrupt);
    EXPECT_CONTAINS(msg, meta) << "case " << k;
    EXPECT_CONTAINS(msg, cases[k].expected) << "case " << k;
  }
  std::string missing = (tmp.path() / "nope" / "meta.json").string();
  EXPECT_CONTAINS(error_of([&] { read_frontier(tmp.path() / "nope"); }), missing);
}

// A stage count that disagrees with the schedule's actions is caught; without them, by the plans'
// width.
TEST_F(FrontierStore, MetadataStageCountMustMatchTheScheduleAndPlans) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  const std::string meta = (dir / "meta.json").string();
  std::string msg = corrupted(dir, "meta.json", edit([](json& d) { d["num_stages"] = 2; }));
  EXPECT_CONTAINS(msg, meta + ": schedule_actions has 3 stages and 4 microbatches, not 2 and 4");
  msg = corrupted(dir, "meta.json", edit([](json& d) {
                    d["num_stages"] = 2;
                    d.erase("schedule_actions");
                  }));
  EXPECT_CONTAINS(msg, (dir / "plans.txt").string());
}

}  // namespace
}  // namespace perseus::plan
