// The control plane's request handling (architecture section 7), independent of the HTTP transport:
// routes each request to the job it names, answers now or (for the schedule barrier) later, and
// owns the jobs and their store. Single-threaded: every call comes from the server's event loop.
//
// Endpoints (Zeus pipeline-frequency-optimizer protocol plus Perseus's own):
//   POST /register_job, POST /register_rank/{id}, GET /schedule/{id}?rank=R[&round=K],
//   POST /result/{id}, POST /straggler/{id}, GET /healthz, GET /jobs, GET /jobs/{id},
//   DELETE /jobs/{id}[?force=true], GET /
// Errors are JSON {"detail": "one-line reason"} with a 4xx status (5xx: the job's scheduler
// failed), and never take the server down.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "perseus/server/auth_throttle.hpp"
#include "perseus/server/job.hpp"
#include "perseus/server/store.hpp"

namespace perseus::server {

struct ServerSettings {
  std::string store_path = ":memory:";
  std::string scheduler;  // default scheduler for jobs that name none ("" = jobs must name one)
  nlohmann::json scheduler_args = nlohmann::json::object();
  // Where the two came from, for errors: the options, or Zeus's ZEUS_PFO_SCHEDULER(_ARGS).
  std::string scheduler_from = "--scheduler", scheduler_args_from = "--scheduler-args";
  std::filesystem::path output_dir = ".";  // schedulers write under output_dir/<job id>/
  std::filesystem::path data_dir = ".";    // and read files only under data_dir
  // The cluster token every request but /healthz must carry ("" = none: loopback only, for
  // unmodified Zeus clients). With a token, each job also gets its own secret.
  std::string token;
  int max_ranks = 65536;  // world_size of one job at most
  int max_jobs = 10000;   // jobs in the store at most
  // The memory all jobs held together may take (Job::memory_bytes: their ranks and the
  // instructions of their plans), at most.
  std::uint64_t max_memory_bytes = 4ull << 30;
  // A registering or running job none of whose ranks sent a request for this long is stale
  // (its training probably stopped): marked on the status page, /jobs and /metrics.
  double stale_after_s = 300.0;
  // Jobs are deleted (from memory and the store) once this long without a request: a done or
  // failed job after expire_finished_after_s, a registering or running one (abandoned) after
  // expire_abandoned_after_s; 0 keeps them.
  double expire_finished_after_s = 7 * 24 * 3600.0;
  double expire_abandoned_after_s = 30 * 24 * 3600.0;
  // A job retries a failed store write its progress waits for this long (JobSettings).
  double store_retry_s = JobSettings{}.store_retry_s;
};

// What the control plane reads of one HTTP request.
struct Request {
  std::string method, target, body;
  std::string authorization;  // the Authorization header
  std::string job_secret;     // the X-Perseus-Job-Secret header
  std::string peer;           // the peer's address ("": not known; never locked out)
  // refuse_on_header admitted these credentials already: handle() does not check them again
  // (a job secret costs a SHA-256).
  bool credentials_checked = false;
};

// The transport's connections: open now, the caps, and how many were refused at a cap.
struct ConnectionStats {
  std::size_t open = 0;
  std::size_t max = 0;
  std::size_t max_per_peer = 0;
  std::uint64_t refused = 0;
};

// What GET /metrics shows, copied on the event loop.
struct MetricsSnapshot {
  std::vector<JobSummary> jobs;
  std::map<std::pair<std::string, int>, std::uint64_t> responses;  // (endpoint, status) -> count
  Histogram release_seconds{latency_bounds()};
  Histogram store_write_seconds{latency_bounds()};
  std::uint64_t expired = 0, deleted = 0;
  std::uint64_t memory_bytes = 0, max_memory_bytes = 0;  // the jobs' memory budget, and its cap
  std::optional<ConnectionStats> connections;
};
// The Prometheus text of `snapshot` (control_plane_metrics.cpp).
std::string metrics_text(const MetricsSnapshot& snapshot);

class ControlPlane {
 public:
  // Opens the store and restores every stored job. Throws perseus::Error for a bad store or
  // settings (unknown default scheduler).
  explicit ControlPlane(ServerSettings settings);

  // Handles one request; `respond` is called exactly once, now or later. Never throws: a request
  // error is a 4xx, anything else a 500, with a one-line detail that quotes no raw bytes.
  void handle(const Request& request, Responder respond);

  // What handle() would refuse of `request` on its header alone (cluster token, job secret; the
  // body is not looked at), counted in GET /metrics as answered. The transport asks before it
  // reserves room for a body, so an unauthenticated peer reserves nothing. nullopt: go on (and
  // the request may say credentials_checked).
  std::optional<Reply> refuse_on_header(const Request& request);

  std::size_t num_jobs() const { return jobs_.size(); }
  // What the transport calls a few times a second: jobs retry their failed store writes
  // (Job::retry_store), starts the renderer was busy for are tried again (start), and expired
  // jobs are deleted (expire_jobs).
  void tick();
  // DELETE /jobs/{id} and `perseus serve delete-job`: deletes the job from the store and the
  // server (its waiting ranks get 404); a registering or running one only with `force` (409
  // without). 404 for an unknown job, 503 when the store fails (nothing deleted).
  Reply delete_job(const std::string& id, bool force);
  // What the transport says of its connections, for GET /metrics (default: not exported).
  void set_connection_stats(std::function<ConnectionStats()> stats) {
    connections_ = std::move(stats);
  }
  // How the transport makes a large answer (GET /jobs, /metrics, the status page) off its event
  // loop: it runs `render` elsewhere, then calls `respond` with the result on the loop (default:
  // both at once, here).
  using Offload = std::function<void(std::function<Reply()> render, Responder respond)>;
  void set_offload(Offload offload) { offload_ = std::move(offload); }

 private:
  void route(const Request& request, const Responder& respond);
  // The 401 for a request without the cluster token, when the server has one (logged);
  // `query_token` (a ?token=, or empty) stands in for the header. nullopt: go on.
  std::optional<Reply> refuse_unauthenticated(const Request& request, const std::string& path,
                                              std::string_view query_token) const;
  // The refusal of a request to `path`: 429 while its peer is locked out after failed
  // authentications (AuthThrottle), else check_credentials's, counted as a failure.
  std::optional<Reply> authenticate(const Request& request, const std::string& path,
                                    std::string_view query_token);
  // The refusal (401 cluster token, 403 job secret, logged) of a request to `path` whose
  // credentials do not admit it; `query_token` is a ?token=, which the pages a browser reads
  // may carry instead of the header (GET /, /jobs, /jobs/{id}, /metrics). nullopt: go on.
  std::optional<Reply> check_credentials(const Request& request, const std::string& path,
                                         std::string_view query_token) const;
  // POST /register_job: checked here, then its scheduler (which reads the files its arguments
  // name) off the event loop, then admitted (admit).
  void register_job(const nlohmann::json& body, const Responder& respond);
  // The 429 of a registration past --max-jobs or --max-memory (expired jobs deleted first), for
  // a job whose rounds hold `instructions` (0: not known yet, its ranks alone count).
  std::optional<Reply> refuse_registration(const wire::JobInfo& info, std::size_t instructions);
  // Makes and stores the job `id` whose scheduler was checked (its first round held
  // `instructions`).
  Reply admit(const std::string& id, const wire::JobInfo& info, std::size_t instructions);
  // Makes the scheduler of `job`, whose ranks all registered, off the event loop (it reads the
  // files its arguments name), then starts the job with it on the loop; when the transport is
  // too busy to take it, tick() tries again.
  void start(Job& job);
  // Removes the job from the store and the server; its waiting ranks get 404 with `why`.
  void remove(const std::string& id, const std::string& why);
  // Why `job` is past its expiry ("": it is not).
  std::string expired(const Job& job) const;
  std::unique_ptr<Job> restore(const StoredJob& stored);
  // Deletes the jobs past their expiry (ServerSettings), at most once a second however often it
  // is called; tick() calls it, and a registration at --max-jobs first.
  void expire_jobs();
  // Holds `job` (its barrier releases feed GET /metrics).
  void add(std::unique_ptr<Job> job);
  // Every job's summary (with "stale"), oldest first: what GET /jobs, the status page and
  // GET /metrics show, copied so that they can be written off the event loop.
  std::vector<JobSummary> summaries() const;
  bool stale(const Job& job) const;
  // What GET /metrics shows, copied (control_plane_metrics.cpp).
  MetricsSnapshot metrics_snapshot() const;
  // Answers with what `render` makes of its copies: on the transport's worker thread when it
  // has one (set_offload), so a large answer never holds up the event loop.
  void off_loop(std::function<Reply()> render, const Responder& respond);
  std::string new_job_id(const wire::JobInfo& info) const;
  Job* find(const std::string& id);
  JobSettings job_settings() const;

  ServerSettings settings_;
  Store store_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::vector<std::string> order_;  // job ids, oldest first
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (endpoint, status) -> count
  Histogram release_seconds_{latency_bounds()};                    // every job's barrier releases
  std::function<ConnectionStats()> connections_;
  Offload offload_;
  AuthThrottle throttle_;
  std::chrono::steady_clock::time_point next_expiry_{};
  // Ids of jobs deleted within kRetiredIdMemory: a new job never gets one (the deleted job's
  // ranks would act on it), also when its id's clock second repeats (a clock set back).
  std::map<std::string, std::chrono::steady_clock::time_point> retired_;
  std::set<std::string> registering_;        // ids of jobs whose scheduler is being checked
  std::set<std::string> deferred_starts_;    // ids of jobs start() found the renderer busy for
  std::uint64_t expired_ = 0, deleted_ = 0;  // jobs removed by expiry, by DELETE
  std::uint64_t memory_bytes_ = 0;           // Job::memory_bytes of all jobs
};

}  // namespace perseus::server
