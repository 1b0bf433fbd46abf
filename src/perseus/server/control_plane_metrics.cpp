// GET /metrics: the control plane in Prometheus's text format. Per job: rounds, the last measured
// iteration (per stage and in all), the saving against the job's own all-max round (and the
// energy saved so far, the slowdown), the ranks
// whose energy counter did not change in the latest round, straggler reports, idleness;
// server-wide: answers by endpoint and status, barrier release and store write latency, open
// connections, jobs. Each family's samples are written together, as the format requires.
#include "perseus/server/control_plane.hpp"
#include "perseus/server/metrics.hpp"

namespace perseus::server {

namespace {

// One gauge or counter family with a sample per job that has a value.
template <typename Value>
void per_job(PrometheusText& out, const std::vector<JobSummary>& jobs, const std::string& name,
             const std::string& type, const std::string& help, Value value) {
  out.family(name, type, help);
  for (const JobSummary& j : jobs) {
    if (auto v = value(j)) out.sample(name, {{"job", j.id}}, *v);
  }
}

void per_stage(PrometheusText& out, const std::vector<JobSummary>& jobs, const std::string& name,
               const std::string& help, bool energy) {
  out.family(name, "gauge", help);
  for (const JobSummary& j : jobs) {
    const auto& last = j.measured.last;
    if (!last) continue;
    const auto& values = energy ? last->stage_energy_j : last->stage_time_s;
    for (std::size_t s = 0; s < values.size(); ++s) {
      out.sample(name, {{"job", j.id}, {"stage", std::to_string(s)}}, values[s]);
    }
  }
}

// The families about jobs: one sample per job (or per job and stage).
void job_families(PrometheusText& out, const std::vector<JobSummary>& jobs) {
  using Maybe = std::optional<double>;
  per_job(out, jobs, "perseus_job_rounds", "gauge", "Rounds of plans the job's scheduler made",
          [](const JobSummary& j) -> Maybe { return static_cast<double>(j.round + 1); });
  per_job(out, jobs, "perseus_job_iteration_seconds", "gauge",
          "Mean iteration time of the job's last measured round (slowest stage)",
          [](const JobSummary& j) -> Maybe {
            return j.measured.last ? Maybe(j.measured.last->time_s()) : std::nullopt;
          });
  per_job(out, jobs, "perseus_job_iteration_energy_joules", "gauge",
          "Mean iteration energy of the job's last measured round (all stages and ranks)",
          [](const JobSummary& j) -> Maybe {
            return j.measured.last ? Maybe(j.measured.last->energy_j()) : std::nullopt;
          });
  per_stage(out, jobs, "perseus_job_stage_iteration_seconds",
            "Mean iteration time of one stage in the job's last measured round", false);
  per_stage(out, jobs, "perseus_job_stage_iteration_energy_joules",
            "Mean iteration energy of one stage (its ranks summed) in the last measured round",
            true);
  per_job(out, jobs, "perseus_job_energy_saving_ratio", "gauge",
          "1 - energy of the last measured round / energy of the job's last all-max round",
          [](const JobSummary& j) { return j.measured.energy_saving(); });
  per_job(out, jobs, "perseus_job_slowdown_ratio", "gauge",
          "time of the last measured round / time of the job's last all-max round - 1",
          [](const JobSummary& j) { return j.measured.slowdown(); });
  per_job(out, jobs, "perseus_job_energy_saved_joules", "gauge",
          "Energy the job saved so far over its measured windows against its all-max baseline "
          "(measured, else as its plans' planned saving says), all ranks",
          [](const JobSummary& j) { return j.energy_saved_j(j.baseline_json()); });
  per_job(out, jobs, "perseus_job_planned_energy_saving_ratio", "gauge",
          "What the plans the job runs were planned to save against all-max (the planner's "
          "evaluation; for a job that never measured an all-max round)",
          [](const JobSummary& j) -> Maybe {
            if (!j.planned) return std::nullopt;
            return j.planned->energy_saving;
          });
  per_job(out, jobs, "perseus_job_unmeasured_ranks", "gauge",
          "Ranks whose GPU energy counter did not change in the job's latest complete round",
          [](const JobSummary& j) -> Maybe {
            return static_cast<double>(j.measured.unmeasured_ranks.size());
          });
  per_job(out, jobs, "perseus_job_stragglers_reported_total", "counter",
          "Straggler reports the job received",
          [](const JobSummary& j) -> Maybe { return static_cast<double>(j.stragglers_reported); });
  per_job(out, jobs, "perseus_job_idle_seconds", "gauge",
          "Seconds since a rank of the job last sent a request",
          [](const JobSummary& j) -> Maybe { return j.idle_s; });
  per_job(out, jobs, "perseus_job_stale", "gauge",
          "1 when a registering or running job's ranks have been silent for --stale-after",
          [](const JobSummary& j) -> Maybe { return j.stale ? 1.0 : 0.0; });
}

}  // namespace

MetricsSnapshot ControlPlane::metrics_snapshot() const {
  MetricsSnapshot m;
  m.jobs = summaries();
  m.responses = requests_;
  m.release_seconds = release_seconds_;
  m.store_write_seconds = store_.write_latency();
  m.expired = expired_;
  m.deleted = deleted_;
  m.memory_bytes = memory_bytes_;
  m.max_memory_bytes = settings_.max_memory_bytes;
  if (connections_) m.connections = connections_();
  return m;
}

std::string metrics_text(const MetricsSnapshot& m) {
  const std::vector<JobSummary>& jobs = m.jobs;
  PrometheusText out;
  job_families(out, jobs);
  out.family("perseus_http_responses_total", "counter", "Answers by endpoint and HTTP status");
  for (const auto& [key, count] : m.responses) {
    out.sample("perseus_http_responses_total",
               {{"endpoint", key.first}, {"status", std::to_string(key.second)}},
               static_cast<double>(count));
  }
  out.family("perseus_barrier_release_seconds", "histogram",
             "From the last rank's schedule request to every answer written, per round");
  out.histogram("perseus_barrier_release_seconds", {}, m.release_seconds);
  out.family("perseus_store_write_seconds", "histogram", "One SQLite write, commit included");
  out.histogram("perseus_store_write_seconds", {}, m.store_write_seconds);
  out.family("perseus_jobs", "gauge", "Jobs the server holds");
  out.sample("perseus_jobs", {}, static_cast<double>(jobs.size()));
  out.family("perseus_jobs_memory_bytes", "gauge",
             "Server memory the jobs held are budgeted (their ranks and plans' instructions)");
  out.sample("perseus_jobs_memory_bytes", {}, static_cast<double>(m.memory_bytes));
  out.family("perseus_max_memory_bytes", "gauge", "What they may take at most (--max-memory)");
  out.sample("perseus_max_memory_bytes", {}, static_cast<double>(m.max_memory_bytes));
  out.family("perseus_jobs_expired_total", "counter",
             "Jobs deleted because they expired (--expire-finished-after, "
             "--expire-abandoned-after)");
  out.sample("perseus_jobs_expired_total", {}, static_cast<double>(m.expired));
  out.family("perseus_jobs_deleted_total", "counter", "Jobs deleted by DELETE /jobs/{id}");
  out.sample("perseus_jobs_deleted_total", {}, static_cast<double>(m.deleted));
  if (m.connections) {
    const ConnectionStats& c = *m.connections;
    out.family("perseus_open_connections", "gauge", "Connections the server holds open");
    out.sample("perseus_open_connections", {}, static_cast<double>(c.open));
    out.family("perseus_max_connections", "gauge",
               "Connections the server holds at most (--max-connections)");
    out.sample("perseus_max_connections", {}, static_cast<double>(c.max));
    out.family("perseus_max_connections_per_peer", "gauge",
               "Connections one peer address may hold (--max-connections-per-peer)");
    out.sample("perseus_max_connections_per_peer", {}, static_cast<double>(c.max_per_peer));
    out.family("perseus_refused_connections_total", "counter",
               "Connections closed at once because a connection cap was reached");
    out.sample("perseus_refused_connections_total", {}, static_cast<double>(c.refused));
  }
  return out.text();
}

}  // namespace perseus::server
