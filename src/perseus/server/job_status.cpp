// What a job shows: GET /jobs/{id} (status), what its ranks measured per round, its saving
// against its own all-max round (what GET /metrics and the status page show).
#include <algorithm>

#include "perseus/server/job.hpp"

namespace perseus::server {

namespace {

using nlohmann::json;

double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

}  // namespace

double RoundMeasurement::time_s() const {
  return stage_time_s.empty() ? 0.0 : *std::max_element(stage_time_s.begin(), stage_time_s.end());
}

double RoundMeasurement::energy_j() const {
  double sum = 0.0;
  for (double e : stage_energy_j) sum += e;
  return sum;
}

namespace {

// Whether every rank of `round` runs every instruction at `mhz` (no power limit, no pipeline
// running a plan of its own).
bool runs_all_at(const Round& round, int mhz) {
  if (mhz == 0 || !round.pipelines.empty()) return false;
  return std::all_of(round.stages.begin(), round.stages.end(), [&](const StagePlan& p) {
    return !p.power_limit_w && std::all_of(p.frequencies.begin(), p.frequencies.end(),
                                           [&](const auto& f) { return f.second == mhz; });
  });
}

}  // namespace

std::optional<RoundMeasurement> Job::latest_measured(
    const std::function<bool(const Round&)>& wanted) const {
  for (std::size_t r = rounds_.size(); r-- > 0;) {
    if (results_in_round_[r] < info_.world_size || !wanted(rounds_[r])) continue;
    if (!unmeasured_ranks(r).empty()) continue;  // their energies are unknown
    RoundMeasurement m;
    m.round = static_cast<int>(r);
    for (const auto& stage : aggregate(m.round)) {
      m.stage_time_s.push_back(mean(stage.iter_time));
      m.stage_energy_j.push_back(mean(stage.iter_energy));
      m.stage_iterations.push_back(stage.iter_time.size());
    }
    return m;
  }
  return std::nullopt;
}

std::vector<int> Job::unmeasured_ranks(std::size_t round) const {
  std::vector<int> out;
  for (const auto& result : results_[round]) {
    if (result && !result->energy_measured) out.push_back(result->rank);
  }
  return out;
}

std::vector<int> Job::latest_unmeasured_ranks() const {
  for (std::size_t r = rounds_.size(); r-- > 0;) {
    if (results_in_round_[r] == info_.world_size) return unmeasured_ranks(r);
  }
  return {};
}

JobMeasurements Job::measurements() const {
  const int top = top_clock_;
  return {latest_measured([](const Round&) { return true; }),
          latest_measured([top](const Round& round) { return runs_all_at(round, top); }),
          latest_unmeasured_ranks()};
}

std::optional<double> JobMeasurements::energy_saving() const {
  if (!last || !all_max || all_max->energy_j() <= 0.0) return std::nullopt;
  return 1.0 - last->energy_j() / all_max->energy_j();
}

double Job::idle_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_activity_).count();
}

json Job::status(bool detailed) const {
  json j = {{"job_id", id_},
            {"state", state()},
            {"scheduler", info_.scheduler.value_or("")},
            {"world_size", info_.world_size},
            {"pp_degree", info_.pp_degree},
            {"dp_degree", info_.dp_degree},
            {"tp_degree", info_.tp_degree},
            {"ranks_registered", registered()},
            {"round", static_cast<int>(rounds_.size()) - 1},
            {"idle_s", idle_s()}};
  if (!error_.empty()) j["error"] = error_;
  const JobMeasurements measured = measurements();
  auto saving = measured.energy_saving();
  j["energy_saving"] = saving ? json(*saving) : json(nullptr);
  j["unmeasured_ranks"] = measured.unmeasured_ranks;
  if (!detailed) return j;
  j["job_metadata"] = info_.job_metadata ? json(*info_.job_metadata) : json(nullptr);
  j["scheduler_args"] = info_.scheduler_args.value_or(json::object());
  j["pipeline_order"] = info_.pipeline_order.value_or(nullptr);
  if (!rounds_.empty()) {
    std::size_t current = rounds_.size() - 1;
    j["released"] = static_cast<bool>(released_[current]);
    j["results_in_round"] = results_in_round_[current];
    j["current_plan"] = round_to_json(rounds_[current]);
  }
  if (const auto& last = measured.last) {
    json stages = json::array();
    for (std::size_t s = 0; s < last->stage_time_s.size(); ++s) {
      stages.push_back({{"iterations", last->stage_iterations[s]},
                        {"mean_time_s", last->stage_time_s[s]},
                        {"mean_energy_j", last->stage_energy_j[s]}});
    }
    j["last_results"] = {{"round", last->round}, {"stages", std::move(stages)}};
  }
  if (measured.all_max) j["all_max_round"] = measured.all_max->round;
  if (scheduler_) j["scheduler_status"] = scheduler_->status();
  j["barrier_release_ms"] = release_ms_;
  return j;
}

}  // namespace perseus::server
