#include "perseus/client/optimizer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "perseus/client/frequency_controller.hpp"
#include "perseus/client/http_client.hpp"
#include "perseus/util/error.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::client {

namespace {

using nlohmann::json;

// A request to the server failed for good (after retries); the message says why.
class ServerFailure : public Error {
 public:
  using Error::Error;
};

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// The server's answer text, as one short line for a warning.
std::string one_line(const std::string& text, std::size_t max = 300) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void check_options(const OptimizerOptions& o) {
  auto bad = [](const std::string& field, const std::string& problem) {
    return Error("optimizer options: field '" + field + "': " + problem);
  };
  auto positive = [&](const char* field, int v) {
    if (v < 1) throw bad(field, "must be >= 1, got " + std::to_string(v));
  };
  positive("pp_degree", o.pp_degree);
  positive("dp_degree", o.dp_degree);
  positive("tp_degree", o.tp_degree);
  positive("world_size", o.world_size);
  positive("report_every", o.report_every);
  long long product = 1LL * o.pp_degree * o.dp_degree * o.tp_degree;
  if (product != o.world_size) {
    throw bad("world_size", "is " + std::to_string(o.world_size) +
                                " but pp_degree * dp_degree * tp_degree is " +
                                std::to_string(product));
  }
  auto index = [&](const char* field, int v, int bound, const char* bound_name) {
    if (v < 0 || v >= bound) {
      throw bad(field, "must be in 0.." + std::to_string(bound - 1) + " (" + bound_name + " " +
                           std::to_string(bound) + "), got " + std::to_string(v));
    }
  };
  index("rank", o.rank, o.world_size, "world_size");
  index("pp_rank", o.pp_rank, o.pp_degree, "pp_degree");
  index("dp_rank", o.dp_rank, o.dp_degree, "dp_degree");
  index("tp_rank", o.tp_rank, o.tp_degree, "tp_degree");
  auto seconds = [&](const char* field, double v, bool zero_ok) {
    if (!std::isfinite(v) || v < 0.0 || (!zero_ok && v == 0.0)) {
      throw bad(field, std::string("must be a ") + (zero_ok ? "finite number >= 0" : "positive") +
                           " number of seconds, got " + number(v));
    }
  };
  seconds("request_timeout_s", o.request_timeout_s, false);
  seconds("barrier_timeout_s", o.barrier_timeout_s, false);
  seconds("backoff_s", o.backoff_s, true);
  if (o.retries < 0) throw bad("retries", "must be >= 0, got " + std::to_string(o.retries));
  if (!o.scheduler_args.is_object()) throw bad("scheduler_args", "must be a JSON object");
  if (!o.server_url.empty()) {
    try {
      parse_http_url(o.server_url);
    } catch (const Error& e) {
      throw bad("server_url", e.what());
    }
  }
}

void stderr_warning(const std::string& message) {
  std::string line = "perseus: warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

// Per instruction name: the measurements of its occurrences in one iteration.
using Occurrences = std::map<std::string, std::vector<double>>;

}  // namespace

struct PipelineFrequencyOptimizer::Impl {
  OptimizerOptions opt;
  std::unique_ptr<GpuBackend> gpu;
  std::unique_ptr<FrequencyController> controller;
  std::unique_ptr<HttpClient> http;
  bool sync_clocks = false;

  // Warnings (the clock thread logs too) and failures to rethrow in strict mode.
  std::mutex log_mutex;
  std::set<std::string> logged;
  std::string pending_error;  // strict: a clock-thread failure to throw on the training thread

  // Server state.
  std::string job_id;
  bool rank_registered = false;
  std::optional<wire::FrequencySchedule> schedule;  // in use (nullopt: default clock)
  int next_round = 0;
  // A window's result the server has not acknowledged: sent again at the next boundary, before
  // anything else, because the server cannot plan the next round without it.
  std::optional<std::string> unsent_result;
  bool done = false, degraded = false;
  bool limit_set = false;  // a schedule's power limit is set

  // The reporting window.
  int window_iterations = 0;
  std::vector<double> window_time, window_energy;
  std::vector<Occurrences> window_time_bd, window_energy_bd;
  bool mismatch = false;  // the loop's instructions do not match the schedule: default clock

  // The iteration in progress.
  bool in_step = false;
  double step_t0 = 0.0, step_e0 = 0.0;
  std::size_t position = 0;  // next schedule entry
  Occurrences iter_time_bd, iter_energy_bd;
  std::string running;
  double instr_t0 = 0.0, instr_e0 = 0.0;
  std::vector<IterationMeasurement> iterations;

  // ---- logging and failures ----

  void log(const std::string& message) {
    if (opt.log) {
      opt.log(message);
    } else {
      stderr_warning(message);
    }
  }

  // Logs `message` the first time it occurs.
  void warn_once(const std::string& message) {
    {
      std::lock_guard lock(log_mutex);
      if (!logged.insert(message).second) return;
    }
    log(message);
  }

  // A local problem (backend call, instruction mismatch): strict throws, else warns once.
  void local_problem(const std::string& message) {
    if (opt.strict) throw Error(message);
    warn_once(message);
  }

  void on_clock_error(const std::string& message) {
    const std::string text = "cannot apply the clock setting: " + message;
    if (opt.strict) {
      std::lock_guard lock(log_mutex);
      if (pending_error.empty()) pending_error = text;
      return;
    }
    warn_once(text);
  }

  void rethrow_clock_error() {
    if (!opt.strict) return;
    std::string error;
    {
      std::lock_guard lock(log_mutex);
      std::swap(error, pending_error);
    }
    if (!error.empty()) throw Error(error);
  }

  // Runs a backend call from a hook; its failure is a local problem.
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const std::exception& e) {
      local_problem(std::string("GPU backend ") + what + " failed: " + e.what());
    }
    return decltype(f())();
  }

  void sync() {
    if (sync_clocks) controller->flush();
    rethrow_clock_error();
  }

  // ---- server requests ----

  // One request with bounded retries; `accept` turns the parsed JSON answer into the result and
  // throws perseus::Error when it is unacceptable (retried like garbage).
  template <typename Accept>
  auto call(bool post, const std::string& target, const std::string& body, double timeout_s,
            Accept&& accept) -> decltype(accept(json())) {
    std::string last;
    const int attempts = 1 + opt.retries;
    double delay = opt.backoff_s;
    for (int attempt = 1; attempt <= attempts; ++attempt) {
      if (attempt > 1 && delay > 0.0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
        delay *= 2.0;
      }
      try {
        HttpResponse r = post ? http->post(target, body, timeout_s) : http->get(target, timeout_s);
        if (!r.ok()) {
          last = std::string(post ? "POST " : "GET ") + http->url_of(target) + ": HTTP " +
                 std::to_string(r.status) + (r.body.empty() ? "" : ": " + one_line(r.body));
          continue;
        }
        try {
          return accept(wire::parse_json(r.body));
        } catch (const Error& e) {
          last = std::string(post ? "POST " : "GET ") + http->url_of(target) +
                 ": unusable answer: " + e.what();
        }
      } catch (const HttpError& e) {
        last = e.what();
      }
    }
    throw ServerFailure(last + " (" + std::to_string(attempts) +
                        (attempts == 1 ? " attempt)" : " attempts)"));
  }

  std::string register_job() {
    wire::JobInfo info;
    info.pp_degree = opt.pp_degree;
    info.dp_degree = opt.dp_degree;
    info.tp_degree = opt.tp_degree;
    info.world_size = opt.world_size;
    info.job_metadata = opt.job_metadata;
    if (!opt.scheduler.empty()) info.scheduler = opt.scheduler;
    if (!opt.scheduler_args.empty()) info.scheduler_args = opt.scheduler_args;
    return call(true, wire::kRegisterJobPath, wire::to_json(info).dump(), opt.request_timeout_s,
                [](const json& answer) {
                  if (!answer.is_string() || answer.get<std::string>().empty()) {
                    throw Error("expected the job id as a non-empty JSON string, got " +
                                one_line(answer.dump(), 80));
                  }
                  return answer.get<std::string>();
                });
  }

  // Finds this job's id (registering it on rank 0); throws ServerFailure when it stays unknown.
  void resolve_job_id() {
    if (!job_id.empty()) return;
    if (!opt.job_id.empty()) {
      job_id = opt.job_id;
      return;
    }
    if (const char* env = std::getenv("PERSEUS_JOB_ID"); env != nullptr && *env != '\0') {
      job_id = env;
      return;
    }
    std::string mine;
    std::optional<ServerFailure> failure;
    if (opt.rank == 0) {
      try {
        mine = register_job();
      } catch (const ServerFailure& f) {
        failure = f;
      }
    }
    // Every rank takes part in the exchange, also when rank 0 failed (it passes "").
    if (opt.share_job_id) {
      try {
        job_id = opt.share_job_id(mine);
      } catch (const std::exception& e) {
        throw ServerFailure(std::string("share_job_id failed: ") + e.what());
      }
    } else if (opt.rank == 0) {
      job_id = mine;
    }
    if (failure) throw *failure;
    if (job_id.empty()) {
      throw ServerFailure(opt.share_job_id
                              ? "rank 0 did not register the job (it shared an empty job id)"
                              : "rank " + std::to_string(opt.rank) +
                                    " has no job id: set options.job_id, PERSEUS_JOB_ID or "
                                    "options.share_job_id");
    }
  }

  void register_rank() {
    wire::RankInfo info;
    info.rank = opt.rank;
    info.dp_rank = opt.dp_rank;
    info.pp_rank = opt.pp_rank;
    info.tp_rank = opt.tp_rank;
    info.available_frequencies = gpu->supported_clocks();
    call(true, wire::kRegisterRankPath + job_id, wire::to_json(info).dump(), opt.request_timeout_s,
         [](const json&) { return 0; });
  }

  wire::FrequencySchedule fetch_schedule(int round) {
    std::string target = wire::kSchedulePath + job_id + "?rank=" + std::to_string(opt.rank) +
                         "&round=" + std::to_string(round);
    return call(false, target, "", opt.barrier_timeout_s, [&](const json& answer) {
      wire::FrequencySchedule s = wire::parse_frequency_schedule(answer);
      if (s.rank != opt.rank) {
        throw Error("schedule is for rank " + std::to_string(s.rank) + ", not " +
                    std::to_string(opt.rank));
      }
      if (s.power_limit_w && !(*s.power_limit_w > 0.0)) {
        throw Error("field 'power_limit_w': must be positive");
      }
      for (std::size_t i = 0; i < s.frequencies.size(); ++i) {
        if (s.frequencies[i].first.empty()) {
          throw Error("field 'frequencies[" + std::to_string(i) + "]': empty instruction name");
        }
      }
      return s;
    });
  }

  // The window's measurements as the result body of the round in use.
  std::string result_body() {
    wire::ProfilingResult result;
    result.rank = opt.rank;
    result.iter_time = window_time;
    result.iter_energy = window_energy;
    result.round = schedule->round;
    auto fold = [&](const std::vector<Occurrences>& per_iteration,
                    std::map<std::string, std::vector<std::vector<double>>>& out) {
      for (const auto& iteration : per_iteration) {
        for (const auto& [name, values] : iteration) out[name];
      }
      for (auto& [name, rows] : out) {
        for (const auto& iteration : per_iteration) {
          auto it = iteration.find(name);
          rows.push_back(it == iteration.end() ? std::vector<double>{} : it->second);
        }
      }
    };
    fold(window_time_bd, result.time_breakdown);
    fold(window_energy_bd, result.energy_breakdown);
    return wire::to_json(result).dump();
  }

  // Posts the unacknowledged result (reports are idempotent on the server); throws
  // ServerFailure and keeps it when the server does not take it.
  void post_unsent_result() {
    call(true, wire::kResultPath + job_id, *unsent_result, opt.request_timeout_s,
         [](const json&) { return 0; });
    unsent_result.reset();
  }

  // ---- state changes ----

  void reset_window() {
    window_iterations = 0;
    window_time.clear();
    window_energy.clear();
    window_time_bd.clear();
    window_energy_bd.clear();
    mismatch = false;
  }

  void apply(wire::FrequencySchedule s) {
    next_round = s.round + 1;
    done = s.done;
    degraded = false;
    if (s.power_limit_w) {
      controller->reset_clock();
      controller->set_power_limit(*s.power_limit_w);
      limit_set = true;
    } else if (limit_set) {
      controller->reset_power_limit();
      limit_set = false;
    }
    schedule = std::move(s);
    reset_window();
    sync();
  }

  void default_clock() {
    controller->reset_clock();
    if (limit_set) {
      controller->reset_power_limit();
      limit_set = false;
    }
  }

  void degrade(const std::string& why) {
    if (opt.strict) throw Error(why);
    if (!degraded) {
      log(why + "; running at the default clock, retrying every " +
          std::to_string(opt.report_every) + " iterations");
    }
    degraded = true;
    schedule.reset();
    default_clock();
    reset_window();
    sync();
  }

  // Registers what is missing and fetches the next round's schedule.
  void advance() {
    try {
      resolve_job_id();
      if (!rank_registered) {
        register_rank();
        rank_registered = true;
      }
      apply(fetch_schedule(next_round));
    } catch (const ServerFailure& f) {
      degrade(std::string("control-plane server ") + opt.server_url + ": " + f.what());
    }
  }

  void window_boundary() {
    if (schedule && !degraded) unsent_result = result_body();
    if (unsent_result) {
      try {
        post_unsent_result();
      } catch (const ServerFailure& f) {
        degrade(std::string("control-plane server ") + opt.server_url + ": " + f.what());
        return;
      }
    }
    advance();
  }

  // Checks the loop's instruction against the schedule; true when its clock should be locked.
  bool schedule_entry_matches(const std::string& name) {
    const auto& f = schedule->frequencies;
    if (position < f.size() && f[position].first == name) return true;
    std::string expected = position < f.size() ? "'" + f[position].first + "'" : "nothing more";
    local_problem("schedule for rank " + std::to_string(opt.rank) + " expects " + expected +
                  " as instruction " + std::to_string(position + 1) + " of the iteration, but " +
                  "the training loop ran '" + name +
                  "'; running at the default clock until the next schedule");
    return false;
  }
};

PipelineFrequencyOptimizer::PipelineFrequencyOptimizer(OptimizerOptions options,
                                                       std::unique_ptr<GpuBackend> gpu)
    : impl_(std::make_unique<Impl>()) {
  if (!gpu) throw Error("optimizer options: no GPU backend given");
  check_options(options);
  Impl& m = *impl_;
  m.opt = std::move(options);
  m.gpu = std::move(gpu);
  m.sync_clocks = m.gpu->synchronous_clocks();
  m.controller = std::make_unique<FrequencyController>(
      *m.gpu, [&m](const std::string& message) { m.on_clock_error(message); });
  if (m.opt.server_url.empty()) return;
  m.http = std::make_unique<HttpClient>(m.opt.server_url, m.opt.request_timeout_s);
  m.advance();
}

PipelineFrequencyOptimizer::~PipelineFrequencyOptimizer() {
  Impl& m = *impl_;
  m.controller->stop();
  try {
    m.gpu->reset_clock();
  } catch (...) {  // restoring is best effort; never throw from a destructor
  }
  try {
    m.gpu->reset_power_limit();
  } catch (...) {
  }
}

void PipelineFrequencyOptimizer::on_step_begin() {
  Impl& m = *impl_;
  m.rethrow_clock_error();
  m.in_step = true;
  m.position = 0;
  m.iter_time_bd.clear();
  m.iter_energy_bd.clear();
  m.step_t0 = m.guarded("now_s", [&] { return m.gpu->now_s(); });
  m.step_e0 = m.guarded("total_energy_j", [&] { return m.gpu->total_energy_j(); });
}

void PipelineFrequencyOptimizer::on_instruction_begin(const std::string& name) {
  Impl& m = *impl_;
  // Power-limit schedules set their limit once per round; clock schedules lock per instruction.
  if (m.schedule && !m.mismatch && !m.schedule->power_limit_w) {
    if (m.schedule_entry_matches(name)) {
      m.controller->lock_clock(m.schedule->frequencies[m.position].second);
    } else {
      m.mismatch = true;
      m.controller->reset_clock();
    }
    m.sync();
  }
  ++m.position;
  m.running = name;
  m.instr_t0 = m.guarded("now_s", [&] { return m.gpu->now_s(); });
  m.instr_e0 = m.guarded("total_energy_j", [&] { return m.gpu->total_energy_j(); });
  m.guarded("instruction_begin", [&] { m.gpu->instruction_begin(name); });
}

void PipelineFrequencyOptimizer::on_instruction_end(const std::string& name) {
  Impl& m = *impl_;
  m.guarded("instruction_end", [&] { m.gpu->instruction_end(name); });
  double t = m.guarded("now_s", [&] { return m.gpu->now_s(); });
  double e = m.guarded("total_energy_j", [&] { return m.gpu->total_energy_j(); });
  if (m.running != name) {
    m.local_problem("on_instruction_end('" + name + "') does not follow on_instruction_begin('" +
                    name + "'); its measurement is dropped");
    return;
  }
  m.running.clear();
  if (!m.in_step) return;
  m.iter_time_bd[name].push_back(t - m.instr_t0);
  m.iter_energy_bd[name].push_back(e - m.instr_e0);
}

void PipelineFrequencyOptimizer::on_step_end() {
  Impl& m = *impl_;
  double t = m.guarded("now_s", [&] { return m.gpu->now_s(); });
  double e = m.guarded("total_energy_j", [&] { return m.gpu->total_energy_j(); });
  m.rethrow_clock_error();
  if (!m.in_step) {
    m.local_problem("on_step_end without on_step_begin; the iteration is not measured");
    return;
  }
  m.in_step = false;
  m.iterations.push_back({t - m.step_t0, e - m.step_e0});
  if (!m.http || m.done) return;
  if (m.schedule && !m.mismatch && !m.schedule->power_limit_w &&
      m.position != m.schedule->frequencies.size()) {
    m.local_problem("the training loop ran " + std::to_string(m.position) +
                    " instructions in an iteration but the schedule for rank " +
                    std::to_string(m.opt.rank) + " has " +
                    std::to_string(m.schedule->frequencies.size()));
    m.mismatch = true;
    m.controller->reset_clock();
    m.sync();
  }
  m.window_time.push_back(t - m.step_t0);
  m.window_energy.push_back(e - m.step_e0);
  m.window_time_bd.push_back(std::move(m.iter_time_bd));
  m.window_energy_bd.push_back(std::move(m.iter_energy_bd));
  m.iter_time_bd.clear();
  m.iter_energy_bd.clear();
  if (++m.window_iterations < m.opt.report_every) return;
  m.window_boundary();
}

const std::string& PipelineFrequencyOptimizer::job_id() const {
  return impl_->job_id;
}

int PipelineFrequencyOptimizer::round() const {
  return impl_->schedule ? impl_->schedule->round : -1;
}

bool PipelineFrequencyOptimizer::done() const {
  return impl_->done;
}

bool PipelineFrequencyOptimizer::degraded() const {
  return impl_->degraded;
}

const std::vector<IterationMeasurement>& PipelineFrequencyOptimizer::iterations() const {
  return impl_->iterations;
}

GpuBackend& PipelineFrequencyOptimizer::gpu() {
  return *impl_->gpu;
}

}  // namespace perseus::client
