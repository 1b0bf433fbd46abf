#include "perseus/server/dump_export.hpp"

#include <algorithm>
#include <fstream>

#include "perseus/server/job.hpp"
#include "perseus/util/error.hpp"

namespace perseus::server {
namespace {

using nlohmann::json;

void write_json(const std::filesystem::path& path, const json& value) {
  std::ofstream out(path);
  out << value.dump() << '\n';
  if (!out) throw Error("cannot write " + path.string());
}

std::vector<json> sorted_by_rank(std::vector<json> bodies) {
  std::sort(bodies.begin(), bodies.end(),
            [](const json& a, const json& b) { return a.at("rank") < b.at("rank"); });
  return bodies;
}

// The schedule of every rank for one round, in rank order.
json round_schedules(const Round& round, const std::vector<json>& ranks) {
  json out = json::array();
  for (const auto& rank : ranks) {
    const StagePlan& plan =
        plan_for(round, rank.at("dp_rank").get<int>(), rank.at("pp_rank").get<int>());
    json states = json::array();
    for (const auto& [name, mhz] : plan.frequencies) {
      states.push_back(plan.power_limit_w ? json(*plan.power_limit_w) : json(mhz));
    }
    out.push_back(
        {{"rank", rank.at("rank")}, {"power_states", states}, {"frequencies", plan.frequencies}});
  }
  return out;
}

}  // namespace

ExportedJob export_job(const StoredJob& job, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir.string() + ": " + ec.message());
  auto ranks = sorted_by_rank(job.ranks);
  bool power_limit = false;
  for (const auto& round : job.rounds) {
    for (const auto& stage : round.at("stages")) power_limit |= stage.contains("power_limit_w");
  }
  write_json(dir / "perseus.json",
             {{"job_id", job.job_id},
              {"scheduler", job.info.value("scheduler", "")},
              {"scheduler_args", job.info.value("scheduler_args", json::object())},
              {"mode", power_limit ? "power limit" : "frequency"},
              {"dump_data", true},
              {"dump_dir", dir.string()}});
  write_json(dir / "ranks.json", ranks);
  for (std::size_t r = 0; r < job.rounds.size(); ++r) {
    std::string n = std::to_string(job.first_round + static_cast<int>(r));
    write_json(dir / (n + ".sched.json"), round_schedules(round_from_json(job.rounds[r]), ranks));
    if (r < job.results.size() && !job.results[r].empty()) {
      write_json(dir / (n + ".prof.json"), sorted_by_rank(job.results[r]));
    }
  }
  ExportedJob exported{static_cast<int>(job.rounds.size()), JobSummary::stored(job).to_json()};
  write_json(dir / "summary.json", exported.summary);
  return exported;
}

}  // namespace perseus::server
