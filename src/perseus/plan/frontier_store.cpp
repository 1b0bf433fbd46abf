#include "perseus/plan/frontier_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "perseus/plan/frontier_query.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule_file.hpp"
#include "perseus/util/csv.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/json_fields.hpp"

// plans.txt ("perseus.plans/1"):
//   line 1: `perseus.plans/1 <plans> <instructions>`
//   line 2: `0 <clock> <clock> ...`, plan 0's clock of every instruction, stages in order and
//           each stage in schedule order
//   line k: `<k-2> <pos>:<clock> ...`, the instructions whose clock differs from the previous
//           plan (pos counts instructions as on line 2, from 0)

namespace perseus::plan {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPlansFormat = "perseus.plans/1";
constexpr const char* kMetaFormat = "perseus.frontier/1";

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string plans_text(const Frontier& frontier) {
  std::string out = std::string(kPlansFormat) + " " + std::to_string(frontier.points.size()) + " " +
                    std::to_string(frontier.initial_clocks.size()) + "\n0";
  for (int c : frontier.initial_clocks) out += " " + std::to_string(c);
  out += "\n";
  for (std::size_t i = 0; i < frontier.clock_changes.size(); ++i) {
    out += std::to_string(i + 1);
    for (auto [pos, mhz] : frontier.clock_changes[i]) {
      out += " " + std::to_string(pos) + ":" + std::to_string(mhz);
    }
    out += "\n";
  }
  return out;
}

constexpr const char* kCsvHeader =
    "index,planned_time_s,predicted_energy_j,evaluated_time_s,evaluated_energy_j";

std::vector<FrontierRow> frontier_rows(const PlanProblem& problem, const Frontier& frontier) {
  std::vector<FrontierRow> rows;
  rows.reserve(frontier.points.size());
  for (std::size_t i = 0; i < frontier.points.size(); ++i) {
    const auto& p = frontier.points[i];
    rows.push_back({i, static_cast<double>(p.quant_time) * problem.settings.unit_time_s,
                    p.predicted_energy_j, p.evaluated_time_s, p.evaluated_energy_j});
  }
  return rows;
}

// The rows and, last, whether each is Pareto-optimal in evaluated (time, energy).
std::string frontier_csv(const std::vector<FrontierRow>& rows, const TimeEnergy& all_max) {
  FrontierQuery query(rows, all_max);
  std::string out = std::string(kCsvHeader) + ",pareto\n";
  for (const auto& r : rows) {
    out += std::to_string(r.index) + "," + format_double(r.planned_time_s) + "," +
           format_double(r.predicted_energy_j) + "," + format_double(r.evaluated_time_s) + "," +
           format_double(r.evaluated_energy_j) + "," + (query.is_pareto(r.index) ? "1" : "0") +
           "\n";
  }
  return out;
}

json meta_json(const PlanProblem& problem, const Frontier& frontier, const FrontierInfo& info) {
  json models = json::array();
  for (int s = 0; s < problem.schedule.num_stages; ++s) {
    for (int t = 0; t < schedule::kNumInstructionTypes; ++t) {
      auto type = static_cast<schedule::InstructionType>(t);
      for (int v = 1; v < problem.dag.sink(); ++v) {
        const auto& node = problem.dag.node(v);
        if (node.stage() != s || node.instruction.type != type || node.instruction.overlapped()) {
          continue;
        }
        models.push_back({{"stage", s},
                          {"instruction", schedule::type_name(type)},
                          {"options", problem.options(v).options.size()},
                          {"model", problem.model(v).description()}});
        break;
      }
    }
  }
  const auto& st = problem.settings;
  return {{"format", kMetaFormat},
          {"profile", info.profile_source},
          {"schedule", problem.schedule.name},
          {"num_stages", problem.schedule.num_stages},
          {"num_microbatches", problem.schedule.num_microbatches},
          {"stages_per_rank", problem.schedule.stages_per_rank()},
          {"schedule_actions", schedule::schedule_to_csv(problem.schedule)},
          {"unit_time_s", st.unit_time_s},
          {"blocking_power_w", st.blocking_power_w},
          {"cost_model", cost_model_name(st.cost_model)},
          {"noise_factor", st.noise_factor},
          {"num_plans", frontier.points.size()},
          {"slowest_time_units", frontier.slowest_time},
          {"fastest_time_units", frontier.fastest_time},
          {"stop_reason", frontier.stop_reason},
          {"solve_seconds", info.seconds},
          {"min_cuts", frontier.min_cuts},
          {"all_max", {{"time_s", info.all_max.time_s}, {"energy_j", info.all_max.energy_j}}},
          {"cost_models", std::move(models)}};
}

[[noreturn]] void bad(const fs::path& file, long line, const std::string& what) {
  throw Error(located(file.string(), line, "", what));
}

std::vector<FrontierRow> read_rows(const fs::path& file) {
  const std::string path = file.string(), text = read_file(file);
  const std::vector<csv::Row> lines = csv::rows(text);
  // Frontiers written before the pareto column existed have the header without it.
  const std::vector<std::string_view> header = csv::split_fields(kCsvHeader);
  std::vector<std::string_view> with_pareto = header;
  with_pareto.push_back("pareto");
  if (lines.empty() || (lines[0].fields != header && lines[0].fields != with_pareto)) {
    bad(file, lines.empty() ? 0 : lines[0].line,
        std::string("bad header (expected ") + kCsvHeader + ",pareto)");
  }
  const std::vector<std::string_view>& columns = lines[0].fields;
  std::vector<FrontierRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const csv::Fields fields(path, lines[i].line);
    const auto& v = lines[i].fields;
    if (v.size() != columns.size()) {
      fields.fail("", "expected " + std::to_string(columns.size()) + " fields as in the header, " +
                          "found " + std::to_string(v.size()));
    }
    auto column = [&](std::size_t c) { return std::string(columns[c]); };
    FrontierRow r;
    if (fields.integer(v[0], column(0)) != static_cast<int>(rows.size())) {
      fields.fail(column(0), "must be " + std::to_string(rows.size()) + " (rows count up from 0)");
    }
    r.index = rows.size();
    r.planned_time_s = fields.non_negative(v[1], column(1));
    r.predicted_energy_j = fields.non_negative(v[2], column(2));
    r.evaluated_time_s = fields.non_negative(v[3], column(3));
    r.evaluated_energy_j = fields.non_negative(v[4], column(4));
    // The pareto flag is checked for form only: FrontierQuery recomputes it from the values.
    if (v.size() == 6 && v[5] != "0" && v[5] != "1") fields.fail(column(5), "must be 0 or 1");
    rows.push_back(r);
  }
  if (rows.empty()) bad(file, 0, "no plans");
  return rows;
}

// A non-negative decimal integer that fits `limit`, or -1 (no exceptions, no sign, no junk).
long parse_count(const std::string& s, long limit) {
  if (s.empty() || s.size() > 9) return -1;
  long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v <= limit ? v : -1;
}

// The plans of `sched`, one clock list per rank; a position counts actions rank by rank.
std::vector<FrequencyPlan> read_plans(const fs::path& file, const schedule::Schedule& sched) {
  std::vector<int> rank_of;  // per position
  for (int r = 0; r < sched.num_ranks(); ++r)
    rank_of.insert(rank_of.end(), sched.ranks[r].size(), r);
  std::istringstream in(read_file(file));
  std::string format;
  std::size_t count = 0, width = 0;
  if (!(in >> format >> count >> width) || format != kPlansFormat || width != rank_of.size()) {
    bad(file, 1,
        "bad header (expected " + std::string(kPlansFormat) + " with " +
            std::to_string(rank_of.size()) + " instructions)");
  }
  std::vector<int> clocks(width, 0);
  std::vector<FrequencyPlan> plans;
  std::string line;
  std::getline(in, line);
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::getline(in, line)) bad(file, static_cast<long>(i) + 2, "missing plan");
    std::istringstream ls(line);
    std::size_t index = 0;
    if (!(ls >> index) || index != i) bad(file, static_cast<long>(i) + 2, "bad plan index");
    std::string tok;
    std::size_t k = 0;
    for (; ls >> tok; ++k) {
      // Plan 0 lists every clock; later plans list `<pos>:<clock>` changes.
      std::size_t colon = tok.find(':');
      long pos = static_cast<long>(k), c = -1;
      if (i == 0 && colon == std::string::npos) {
        c = parse_count(tok, 1000000);
      } else if (i > 0 && colon != std::string::npos) {
        pos = parse_count(tok.substr(0, colon), 1000000000);
        c = parse_count(tok.substr(colon + 1), 1000000);
      }
      if (pos < 0 || static_cast<std::size_t>(pos) >= width || c <= 0) {
        bad(file, static_cast<long>(i) + 2, "bad entry '" + tok + "'");
      }
      clocks[static_cast<std::size_t>(pos)] = static_cast<int>(c);
    }
    if (i == 0 && k != width) {
      bad(file, 2,
          "plan 0 has " + std::to_string(k) + " clocks, expected " + std::to_string(width));
    }
    FrequencyPlan plan(sched.ranks.size());
    for (std::size_t k = 0; k < width; ++k) plan[rank_of[k]].push_back(clocks[k]);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace

Plan StoredFrontier::plan(std::size_t index) const {
  const FrontierRow& r = rows.at(index);
  Plan p;
  p.schedule = schedule;
  p.num_stages = num_stages;
  p.num_microbatches = num_microbatches;
  p.stages_per_rank = stages_per_rank;
  p.unit_time_s = unit_time_s;
  p.blocking_power_w = blocking_power_w;
  p.predicted = TimeEnergy{r.planned_time_s, r.predicted_energy_j};
  p.evaluated = TimeEnergy{r.evaluated_time_s, r.evaluated_energy_j};
  p.frequencies = plans.at(index);
  return p;
}

schedule::Schedule StoredFrontier::build_schedule() const {
  if (schedule_actions.empty()) {
    return schedule::make_schedule(schedule, num_stages, num_microbatches, stages_per_rank);
  }
  schedule::Schedule s = schedule::parse_schedule_text(schedule_actions, "schedule_actions");
  if (s.num_stages != num_stages || s.num_microbatches != num_microbatches) {
    throw Error("schedule_actions has " + std::to_string(s.num_stages) + " stages and " +
                std::to_string(s.num_microbatches) + " microbatches, not " +
                std::to_string(num_stages) + " and " + std::to_string(num_microbatches));
  }
  if (s.stages_per_rank() != stages_per_rank) {
    throw Error("schedule_actions runs " + std::to_string(s.stages_per_rank()) +
                " stages per rank, not stages_per_rank " + std::to_string(stages_per_rank));
  }
  s.name = schedule;
  return s;
}

StoredFrontier stored_frontier(const PlanProblem& problem, const Frontier& frontier,
                               const TimeEnergy& all_max) {
  StoredFrontier f;
  f.schedule = problem.schedule.name;
  f.num_stages = problem.schedule.num_stages;
  f.num_microbatches = problem.schedule.num_microbatches;
  f.stages_per_rank = problem.schedule.stages_per_rank();
  f.schedule_actions = schedule::schedule_to_csv(problem.schedule);
  f.unit_time_s = problem.settings.unit_time_s;
  f.blocking_power_w = problem.settings.blocking_power_w;
  f.all_max = all_max;
  f.rows = frontier_rows(problem, frontier);
  // Replays the clock changes once, plan by plan (Frontier::clocks(i) starts over each time).
  std::vector<int> clocks = frontier.initial_clocks;
  for (std::size_t i = 0; i < frontier.points.size(); ++i) {
    if (i > 0 && i <= frontier.clock_changes.size()) {
      for (auto [pos, mhz] : frontier.clock_changes[i - 1]) clocks[pos] = mhz;
    }
    f.plans.push_back(to_frequency_plan(problem.dag, clocks));
  }
  return f;
}

void write_frontier(const fs::path& dir, const PlanProblem& problem, const Frontier& frontier,
                    const FrontierInfo& info) {
  StagingDir staging(dir, "meta.json");
  write_file_atomic(staging.path() / "frontier.csv",
                    frontier_csv(frontier_rows(problem, frontier), info.all_max));
  write_file_atomic(staging.path() / "plans.txt", plans_text(frontier));
  write_file_atomic(staging.path() / "meta.json",
                    meta_json(problem, frontier, info).dump(1) + "\n");
  staging.commit();
}

StoredFrontier read_frontier_rows(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {
    const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    throw Error(dir.string() + ": is a file; a frontier is the directory `perseus plan` wrote (" +
                (dir.filename() == "frontier.csv" || dir.filename() == "meta.json" ||
                         dir.filename() == "plans.txt"
                     ? "here " + parent.string()
                     : "meta.json, frontier.csv, plans.txt") +
                ")");
  }
  StoredFrontier f;
  const fs::path meta_path = dir / "meta.json";
  const JsonFields fields(meta_path.string());
  const json meta = fields.parse(read_file(meta_path));
  if (fields.text_field(meta, "format") != kMetaFormat) {
    fields.fail("format", std::string("not a frontier (expected ") + kMetaFormat + ")");
  }
  f.schedule = fields.text_field(meta, "schedule", true);
  f.num_stages = fields.int_field(meta, "num_stages", 1);
  f.num_microbatches = fields.int_field(meta, "num_microbatches", 1);
  f.stages_per_rank =
      meta.contains("stages_per_rank") ? fields.int_field(meta, "stages_per_rank", 1) : 1;
  if (f.num_stages % f.stages_per_rank != 0) {
    fields.fail("stages_per_rank", "must divide num_stages (" + std::to_string(f.num_stages) + ")");
  }
  f.schedule_actions =
      meta.contains("schedule_actions") ? fields.text_field(meta, "schedule_actions") : "";
  f.unit_time_s = fields.number_field(meta, "unit_time_s");
  f.blocking_power_w = fields.number_field(meta, "blocking_power_w");
  const json& all_max = fields.member(meta, "all_max");
  f.all_max.time_s = fields.number_at(all_max, "all_max", "time_s");
  f.all_max.energy_j = fields.number_at(all_max, "all_max", "energy_j");
  f.rows = read_rows(dir / "frontier.csv");
  return f;
}

StoredFrontier read_frontier(const fs::path& dir) {
  StoredFrontier f = read_frontier_rows(dir);
  const fs::path meta_path = dir / "meta.json";
  schedule::Schedule sched;
  try {
    sched = f.build_schedule();
  } catch (const Error& e) {
    bad(meta_path, 0, e.what());
  }
  f.plans = read_plans(dir / "plans.txt", sched);
  if (f.plans.size() != f.rows.size()) {
    bad(dir / "plans.txt", 0,
        std::to_string(f.plans.size()) + " plans but frontier.csv has " +
            std::to_string(f.rows.size()) + " rows");
  }
  return f;
}

std::size_t select_by_index(const StoredFrontier& f, long index) {
  if (index < 0 || static_cast<std::size_t>(index) >= f.rows.size()) {
    throw Error("plan index " + std::to_string(index) + " out of range (the frontier has " +
                std::to_string(f.rows.size()) + " plans, 0.." + std::to_string(f.rows.size() - 1) +
                ")");
  }
  return static_cast<std::size_t>(index);
}

}  // namespace perseus::plan
