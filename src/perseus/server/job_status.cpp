// What a job shows: GET /jobs/{id} (status), what its ranks measured per round, its saving
// against its own all-max round (what GET /metrics and the status page show).
#include <algorithm>

#include "perseus/server/job.hpp"
#include "perseus/util/text.hpp"

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

// A round whose energy some rank's counter did not measure (wire::ProfilingResult's
// energy_measured) is no measurement: its energies are unknown.
void Job::record_measurement(int round, const Round& plans, const RankResults& results,
                             int final_window) {
  if (scheduler_) measured_.planned = scheduler_->planned_saving();
  measured_.unmeasured_ranks.clear();
  for (const auto& result : results) {
    if (result && !result->energy_measured) measured_.unmeasured_ranks.push_back(result->rank);
  }
  if (!measured_.unmeasured_ranks.empty()) return;
  RoundMeasurement m;
  m.round = round;
  for (const auto& stage : aggregate(results)) {
    m.stage_time_s.push_back(mean(stage.iter_time));
    m.stage_energy_j.push_back(mean(stage.iter_energy));
    m.stage_iterations.push_back(stage.iter_time.size());
  }
  if (runs_all_at(plans, top_clock_)) measured_.all_max = m;
  count_saved(m, final_window);
  measured_.last = std::move(m);
}

void Job::count_saved(const RoundMeasurement& m, int final_window) {
  if (m.stage_iterations.empty()) return;
  if (final_window > 0) {
    if (final_window <= measured_.counted_final_window) return;
    measured_.counted_final_window = final_window;
  } else {
    if (m.round <= measured_.counted_round) return;
    measured_.counted_round = m.round;
  }
  const auto iterations =
      static_cast<double>(*std::min_element(m.stage_iterations.begin(), m.stage_iterations.end()));
  if (measured_.all_max) {
    measured_.saved_j += (measured_.all_max->energy_j() - m.energy_j()) * iterations;
    return;
  }
  const std::optional<double> all_max =
      measured_.planned ? measured_.planned->all_max_energy_j(m.energy_j()) : std::nullopt;
  if (!all_max) return;
  measured_.saved_j += (*all_max - m.energy_j()) * iterations;
  measured_.planned_saved_j += (*all_max - m.energy_j()) * iterations;
}

namespace {

json measurement_json(const std::optional<RoundMeasurement>& m) {
  if (!m) return nullptr;
  return {{"round", m->round},
          {"stage_time_s", m->stage_time_s},
          {"stage_energy_j", m->stage_energy_j},
          {"stage_iterations", m->stage_iterations}};
}

std::optional<RoundMeasurement> measurement_from_json(const json& j) {
  if (j.is_null()) return std::nullopt;
  RoundMeasurement m;
  j.at("round").get_to(m.round);
  j.at("stage_time_s").get_to(m.stage_time_s);
  j.at("stage_energy_j").get_to(m.stage_energy_j);
  j.at("stage_iterations").get_to(m.stage_iterations);
  return m;
}

}  // namespace

json JobMeasurements::to_json() const {
  json j = {{"last", measurement_json(last)},
            {"all_max", measurement_json(all_max)},
            {"unmeasured_ranks", unmeasured_ranks},
            {"saved_j", saved_j},
            {"planned_saved_j", planned_saved_j},
            {"counted_round", counted_round},
            {"counted_final_window", counted_final_window}};
  if (planned) {
    j["planned"] = {{"energy_saving", planned->energy_saving}, {"slowdown", planned->slowdown}};
  }
  return j;
}

JobMeasurements JobMeasurements::from_json(const json& j) {
  JobMeasurements m;
  m.last = measurement_from_json(j.at("last"));
  m.all_max = measurement_from_json(j.at("all_max"));
  j.at("unmeasured_ranks").get_to(m.unmeasured_ranks);
  m.saved_j = j.value("saved_j", 0.0);  // absent in rows stored before it was counted
  m.planned_saved_j = j.value("planned_saved_j", 0.0);
  m.counted_round = j.value("counted_round", m.last ? m.last->round : -1);
  m.counted_final_window = j.value("counted_final_window", 0);
  if (auto it = j.find("planned"); it != j.end()) {
    m.planned =
        PlannedSaving{it->at("energy_saving").get<double>(), it->at("slowdown").get<double>()};
  }
  return m;
}

std::optional<double> JobMeasurements::energy_saving() const {
  if (!last || !all_max || all_max->energy_j() <= 0.0) return std::nullopt;
  return 1.0 - last->energy_j() / all_max->energy_j();
}

std::optional<double> JobMeasurements::slowdown() const {
  if (!last || !all_max || all_max->time_s() <= 0.0) return std::nullopt;
  return last->time_s() / all_max->time_s() - 1.0;
}

double Job::idle_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_activity_).count();
}

JobSummary Job::summary() const {
  JobSummary s;
  s.id = id_;
  s.state = state();
  s.scheduler = info_.scheduler.value_or("");
  s.error = error_;
  s.world_size = info_.world_size;
  s.pp_degree = info_.pp_degree;
  s.dp_degree = info_.dp_degree;
  s.tp_degree = info_.tp_degree;
  s.ranks_registered = registered();
  s.simulated_ranks = simulated_;
  s.round = computed() - 1;
  s.idle_s = idle_s();
  s.stragglers_reported = stragglers_reported_;
  s.measured = measured_;
  if (scheduler_) s.planned = scheduler_->planned_saving();
  return s;
}

json JobSummary::to_json() const {
  json j = {{"job_id", id},
            {"state", state},
            {"scheduler", scheduler},
            {"world_size", world_size},
            {"pp_degree", pp_degree},
            {"dp_degree", dp_degree},
            {"tp_degree", tp_degree},
            {"ranks_registered", ranks_registered},
            {"simulated_ranks", simulated_ranks},
            {"round", round},
            {"idle_s", idle_s},
            {"stale", stale}};
  if (!error.empty()) j["error"] = error;
  auto saving = measured.energy_saving();
  j["energy_saving"] = saving ? json(*saving) : json(nullptr);
  j["planned_energy_saving"] = planned ? json(planned->energy_saving) : json(nullptr);
  j["planned_slowdown"] = planned ? json(planned->slowdown) : json(nullptr);
  auto slowdown = measured.slowdown();
  j["slowdown"] = slowdown ? json(*slowdown) : json(nullptr);
  j["baseline"] = baseline_json();
  const auto saved = energy_saved_j(j["baseline"]);
  j["energy_saved_kwh"] = saved ? json(*saved / kJoulesPerKwh) : json(nullptr);
  j["energy_saved_planned_kwh"] =
      saved ? json(measured.planned_saved_j / kJoulesPerKwh) : json(nullptr);
  j["unmeasured_ranks"] = measured.unmeasured_ranks;
  if (const auto& last = measured.last) {
    json stages = json::array();
    for (std::size_t s = 0; s < last->stage_time_s.size(); ++s) {
      stages.push_back({{"iterations", last->stage_iterations[s]},
                        {"mean_time_s", last->stage_time_s[s]},
                        {"mean_energy_j", last->stage_energy_j[s]}});
    }
    j["last_results"] = {{"round", last->round}, {"stages", std::move(stages)}};
  }
  return j;
}

JobSummary JobSummary::stored(const StoredJob& job) {
  JobSummary s;
  s.id = job.job_id;
  s.error = job.error.empty() ? job.unreadable : job.error;
  const bool final_released = !job.rounds.empty() && job.rounds.back().value("done", false) &&
                              !job.released.empty() && job.released.back();
  s.state = job_state(!s.error.empty(), !job.rounds.empty(), final_released);
  s.scheduler = job.info.value("scheduler", "");
  s.world_size = job.info.value("world_size", 0);
  s.pp_degree = job.info.value("pp_degree", 0);
  s.dp_degree = job.info.value("dp_degree", 0);
  s.tp_degree = job.info.value("tp_degree", 0);
  s.ranks_registered = static_cast<int>(job.ranks.size());
  for (const auto& rank : job.ranks) s.simulated_ranks += rank.value("simulated_gpu", false);
  s.round = job.first_round + static_cast<int>(job.rounds.size()) - 1;
  if (job.active_at > 0) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    s.idle_s = std::max(0.0, std::chrono::duration<double>(now).count() - job.active_at);
  }
  s.stragglers_reported = job.stragglers.size();
  if (!job.measurements.is_null()) s.measured = JobMeasurements::from_json(job.measurements);
  s.planned = s.measured.planned;
  return s;
}

std::string saving_text(const json& job) {
  const auto shown = [&](const char* field) {
    return job.contains(field) && !job[field].is_null();
  };
  const auto percent = [&](const char* field) {
    return fixed(100.0 * job[field].get<double>(), 2) + " %";
  };
  std::string text;
  if (shown("energy_saving")) {
    text = percent("energy_saving");
    if (shown("slowdown"))
      text += ", time " + std::string(job["slowdown"].get<double>() >= 0.0 ? "+" : "") +
              percent("slowdown");
  } else if (shown("planned_energy_saving")) {
    text = percent("planned_energy_saving") + " (planned)";
  }
  if (shown("energy_saved_kwh")) {
    const bool planned =
        shown("energy_saved_planned_kwh") && job["energy_saved_planned_kwh"].get<double>() != 0.0;
    text += (text.empty() ? "" : "; ") + fixed(job["energy_saved_kwh"].get<double>(), 4) +
            " kWh saved so far" + (planned ? " (against the planned all-max)" : "");
  }
  return text;
}

std::optional<double> JobSummary::energy_saved_j(const json& baseline) const {
  if (baseline.is_null() && measured.saved_j == 0.0) return std::nullopt;
  return measured.saved_j;
}

json JobSummary::baseline_json() const {
  if (const auto& all_max = measured.all_max) {
    return {{"source", "measured"},
            {"round", all_max->round},
            {"time_s", all_max->time_s()},
            {"energy_j", all_max->energy_j()}};
  }
  if (!measured.last || !planned) return nullptr;
  const std::optional<double> energy = planned->all_max_energy_j(measured.last->energy_j());
  if (!energy) return nullptr;
  return {{"source", "planned"},
          {"round", nullptr},
          {"time_s", planned->all_max_time_s(measured.last->time_s())},
          {"energy_j", *energy}};
}

std::optional<Round> Job::current_plan() const {
  if (held_.empty()) return std::nullopt;
  return held_.back().plans;
}

json Job::status() const {
  json j = summary().to_json();
  j["job_metadata"] = info_.job_metadata ? json(*info_.job_metadata) : json(nullptr);
  j["scheduler_args"] = info_.scheduler_args.value_or(json::object());
  j["pipeline_order"] = info_.pipeline_order.value_or(nullptr);
  if (!held_.empty()) {
    j["released"] = held_.back().released;
    j["results_in_round"] = held_.back().results_in;
  }
  if (measured_.all_max) j["all_max_round"] = measured_.all_max->round;
  if (scheduler_) j["scheduler_status"] = scheduler_->status();
  j["barrier_release_ms"] = release_ms_;
  return j;
}

}  // namespace perseus::server
