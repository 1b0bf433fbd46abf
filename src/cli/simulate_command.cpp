// `perseus simulate-training`: a pipeline-parallel training job on simulated GPUs in virtual
// time, against a running control-plane server. The command forks one process per rank
// (stages x pipelines), each with its own PipelineFrequencyOptimizer and SimGpu; neighbouring
// stages exchange activations and gradients over socket pairs and the parent synchronizes the
// iteration ends (perseus/pipeline_sim/job.hpp). The parent prints a summary and writes the
// per-iteration pipeline time and summed energy as JSON.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/client/http_client.hpp"
#include "perseus/client/server_session.hpp"
#include "perseus/pipeline_sim/job.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/schedule/schedule_file.hpp"
#include "perseus/server/job.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/util/files.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::cli {

namespace {

namespace pipeline = pipeline_sim;
using nlohmann::json;

constexpr int kMaxRanks = 512;  // processes this command forks at most
// --until-done gives up after this many reporting windows in a row in which the server failed
// some rank (each rank retries at every window boundary).
constexpr int kGiveUpWindows = 3;

struct SimulateArgs {
  std::string server, token_file, profile, scheduler, scheduler_args, job_metadata, out, trace_dir;
  ScheduleOptions schedule;
  int stages = 0, pipelines = 1, microbatches = 0, iterations = 20, max_iterations = 10000;
  int report_every = 5;
  double blocking_power = -1.0, timeout = 600.0;
  // The simulated GPUs' energy counter and how the clients attribute it.
  std::string counter = "realistic", attribution = "busy-overlap";
  measure::CounterOptions counter_options;
  bool until_done = false, has_iterations = false, has_job_metadata = false, strict = false;
  bool quiet = false, allow_implausible = false, json = false;
};

struct Setup {
  pipeline::SimulatedJob job;
  std::string profile_label;
};

void check_args(const SimulateArgs& a) {
  require(a.microbatches > 0, "--microbatches must be positive");
  require(a.pipelines > 0, "--pipelines must be positive");
  require(a.blocking_power >= 0.0 && std::isfinite(a.blocking_power),
          "--blocking-power must be a finite number of watts >= 0");
  require(a.iterations > 0, "--iterations must be positive");
  require(a.max_iterations > 0, "--max-iterations must be positive");
  require(a.report_every > 0, "--report-every must be positive");
  require(a.timeout >= 0.0 && std::isfinite(a.timeout),
          "--timeout must be a number of seconds >= 0 (0: no limit)");
  require(!(a.until_done && a.has_iterations),
          "give either --iterations or --until-done, not both");
  naming("--server", [&] { return client::parse_http_url(a.server); });
  if (!a.out.empty()) {
    require(!std::filesystem::is_directory(a.out),
            "--out " + a.out + " is a directory; give the JSON file to write");
    std::filesystem::path parent = std::filesystem::path(a.out).parent_path();
    ensure_writable_dir(parent.empty() ? std::filesystem::path(".") : parent);
  }
}

// The simulated job's instruction order, where the scheduler's arguments do not give it: the
// microbatches, and the schedule by name (a schedule file, or EnvPipe's envelope, which needs the
// profile, has no name the server can build; give those in --scheduler-args).
void with_instruction_order(nlohmann::json& args, const SimulateArgs& a) {
  if (!args.contains("microbatches")) args["microbatches"] = a.microbatches;
  const std::string& name = a.schedule.name;
  if (!args.contains("schedule") && a.schedule.file.empty() && !name.empty() &&
      name != "envelope") {
    args["schedule"] = name;
  }
  if (!args.contains("virtual_stages") && a.schedule.virtual_stages > 0) {
    args["virtual_stages"] = a.schedule.virtual_stages;
  }
}

Setup make_setup(const SimulateArgs& a) {
  Setup s;
  int stages = a.stages;
  if (a.profile.empty()) {
    require(stages >= 0, "--stages must be positive");
    if (stages == 0) stages = 4;
    const auto& gpu = profile::gpu_model("a100");
    s.job.profile = profile::synthesize_profile(gpu, profile::default_model(stages));
    s.profile_label = "synthesized " + gpu.name + " (embedded default)";
  } else {
    s.job.profile = read_profile(a.profile, a.allow_implausible);
    s.profile_label = a.profile;
    if (stages == 0) stages = s.job.profile.num_stages();
    require(stages == s.job.profile.num_stages(),
            "--stages " + std::to_string(stages) + " does not match profile " + a.profile + " (" +
                std::to_string(s.job.profile.num_stages()) + " stages)");
  }
  require(stages > 0, "--stages must be positive");
  s.job.schedule = resolve_schedule(a.schedule, s.job.profile, stages, a.microbatches);
  const long ranks = static_cast<long>(s.job.schedule.num_ranks()) * a.pipelines;
  require(ranks <= kMaxRanks, "GPUs per pipeline x --pipelines = " + std::to_string(ranks) +
                                  " ranks; at most " + std::to_string(kMaxRanks) +
                                  " processes are simulated");
  s.job.pipelines = a.pipelines;
  s.job.blocking_power_w = a.blocking_power;
  check_blocking_power(s.job.profile, a.blocking_power, a.allow_implausible);

  // An ideal counter ignores the realistic counter's settings.
  s.job.counter =
      a.counter == "ideal" ? measure::CounterOptions::named("ideal") : a.counter_options;
  naming("--counter-*", [&] { s.job.counter.validate(); });
  if (!a.trace_dir.empty()) {
    naming("--trace-dir", [&] { ensure_writable_dir(a.trace_dir); });
    s.job.trace_dir = a.trace_dir;
  }

  client::OptimizerOptions& o = s.job.optimizer;
  o.attribution =
      naming("--attribution", [&] { return measure::parse_attribution(a.attribution); });
  o.server_url = a.server;
  if (!a.token_file.empty()) o.token = token_from_file(a.token_file);
  o.report_every = a.report_every;
  o.strict = a.strict;
  o.scheduler = a.scheduler;
  // The job's own order, as a framework adapter registers it: the server plans for it, and
  // refuses (422) a plan or frontier made for another schedule or microbatch count.
  o.pipeline_order = nlohmann::json(schedule::action_texts(s.job.schedule));
  if (a.has_job_metadata) o.job_metadata = a.job_metadata;
  if (!a.scheduler_args.empty()) {
    o.scheduler_args =
        naming("--scheduler-args", [&] { return wire::parse_json(a.scheduler_args); });
    require(o.scheduler_args.is_object(), "--scheduler-args must be a JSON object");
  }
  if (!a.scheduler.empty() && server::takes_instruction_order(a.scheduler)) {
    with_instruction_order(o.scheduler_args, a);
  }
  return s;
}

// ---- output ----

struct Mean {
  int count = 0;
  double time_s = 0.0, energy_j = 0.0;
  // Over the iterations whose energy the clients' counters measured (IterationRecord).
  int measured_count = 0;
  double measured_energy_j = 0.0;
};

Mean mean_of(const std::vector<pipeline::IterationRecord>& its, std::size_t from, bool final_only) {
  Mean m;
  for (std::size_t i = from; i < its.size(); ++i) {
    if (final_only && !its[i].final) continue;
    ++m.count;
    m.time_s += its[i].time_s;
    m.energy_j += its[i].energy_j;
    if (its[i].measured_energy_j) {
      ++m.measured_count;
      m.measured_energy_j += *its[i].measured_energy_j;
    }
  }
  if (m.count > 0) {
    m.time_s /= m.count;
    m.energy_j /= m.count;
  }
  if (m.measured_count > 0) m.measured_energy_j /= m.measured_count;
  return m;
}

json mean_json(const Mean& m) {
  if (m.count == 0) return nullptr;
  return {{"iterations", m.count},
          {"mean_time_s", m.time_s},
          {"mean_energy_j", m.energy_j},
          {"measured_iterations", m.measured_count},
          {"mean_measured_energy_j", m.measured_count > 0 ? json(m.measured_energy_j) : json()}};
}

// What the run's energies are: energy_j is the simulated GPUs' own; measured_energy_j is what
// the clients' counters (the counter model's refresh, lag and noise) measured, as they sent the
// server.
constexpr const char* kEnergySource = "the simulated GPUs' true energy";
constexpr const char* kMeasuredEnergySource =
    "the clients' energy counters (simulated: the counter model's refresh, lag and noise)";

// The --out file: the run's setup, every iteration and the two means.
json result_json(const SimulateArgs& a, const Setup& setup, const pipeline::RunResult& result,
                 const Mean& last, const Mean& final) {
  json iterations = json::array();
  const auto& its = result.iterations;
  for (std::size_t i = 0; i < its.size(); ++i) {
    iterations.push_back(
        {{"iteration", i},
         {"time_s", its[i].time_s},
         {"energy_j", its[i].energy_j},
         {"measured_energy_j", its[i].measured_energy_j ? json(*its[i].measured_energy_j) : json()},
         {"round", its[i].round},
         {"final", its[i].final},
         {"degraded", its[i].degraded}});
  }
  return {{"job_id", result.job_id},
          {"gpus", "simulated"},
          {"energy_source", kEnergySource},
          {"measured_energy_source", kMeasuredEnergySource},
          {"server", a.server},
          {"profile", setup.profile_label},
          {"schedule", setup.job.schedule.name},
          {"stages", setup.job.schedule.num_stages},
          {"gpus_per_pipeline", setup.job.schedule.num_ranks()},
          {"pipelines", setup.job.pipelines},
          {"microbatches", setup.job.schedule.num_microbatches},
          {"blocking_power_w", a.blocking_power},
          {"report_every", a.report_every},
          {"finished", result.finished},
          {"gave_up", result.gave_up},
          {"iterations", iterations},
          {"last_window", mean_json(last)},
          {"final_schedule", mean_json(final)}};
}

// What the server measured for the job (GET /jobs/{id}) in the status page's words ("17.10 %,
// time +1.90 %; 0.0042 kWh saved so far"); "" when it cannot say (no job, nothing measured
// against all-max yet, a server that is not Perseus's or does not answer).
std::string server_saving(const client::OptimizerOptions& o, const std::string& job_id) {
  if (job_id.empty()) return "";
  try {
    client::HttpClient http = client::server_client(o);
    const client::HttpResponse r = http.get("/jobs/" + job_id, 5.0);
    if (!r.ok() || r.header("Server") != wire::kServerName) return "";
    return server::saving_text(nlohmann::json::parse(r.body));
  } catch (const std::exception&) {
    return "";
  }
}

void print_summary(const Setup& setup, const pipeline::RunResult& result, const Mean& last,
                   const Mean& final) {
  const auto& its = result.iterations;
  const int gpus = setup.job.schedule.num_ranks();
  std::printf("job             %s\n", result.job_id.empty() ? "(none)" : result.job_id.c_str());
  std::printf(
      "pipeline        %d stages on %d GPUs x %d pipelines = %d ranks, %s, %d microbatches\n",
      setup.job.schedule.num_stages, gpus, setup.job.pipelines, gpus * setup.job.pipelines,
      setup.job.schedule.name.c_str(), setup.job.schedule.num_microbatches);
  std::printf("iterations      %zu\n", its.size());
  const auto print_mean = [](const char* label, const Mean& m) {
    std::printf("%s%d iterations: %.6f s, %.4f J per iteration", label, m.count, m.time_s,
                m.energy_j);
    if (m.measured_count > 0) std::printf(" (counters: %.4f J)", m.measured_energy_j);
    std::printf("\n");
  };
  print_mean("last window     ", last);
  if (final.count > 0) {
    print_mean("final schedule  ", final);
  } else {
    std::printf("final schedule  not reached\n");
  }
  std::printf("energy          %s; counters: %s\n", kEnergySource, kMeasuredEnergySource);
  if (const std::string saving = server_saving(setup.job.optimizer, result.job_id);
      !saving.empty()) {
    std::printf("server saving   %s (energy and time against all-max, as the clients measured)\n",
                saving.c_str());
  }
  if (std::any_of(its.begin(), its.end(), [](const auto& i) { return i.degraded; })) {
    std::printf(
        "note            some ranks ran at the default clock (server failures, see warnings)\n");
  }
}

// A run that never followed the server, gave up on it, or (--until-done) never got its final
// schedule fails the command.
void check_outcome(const SimulateArgs& a, const pipeline::RunResult& result) {
  const auto& its = result.iterations;
  bool scheduled = std::any_of(its.begin(), its.end(), [](const auto& i) { return i.round >= 0; });
  require(scheduled, "no iteration ran a schedule of the server (" +
                         std::string(result.job_id.empty() ? "the job was not registered"
                                                           : "no rank got a schedule") +
                         ", see the warnings): every iteration ran at the default clock");
  require(!result.gave_up,
          "the server failed some rank for " + std::to_string(kGiveUpWindows) +
              " reporting windows in a row (see the warnings); gave up waiting for its final "
              "schedule");
  require(!a.until_done || result.finished,
          "the server did not send its final schedule within --max-iterations " +
              std::to_string(a.max_iterations) + " iterations");
}

void run_simulate(const SimulateArgs& a) {
  check_args(a);
  Setup setup = make_setup(a);
  pipeline::StopRule stop;
  stop.iterations = a.iterations;
  stop.until_done = a.until_done;
  stop.final_window = a.report_every;
  stop.max_iterations = a.max_iterations;
  stop.give_up_degraded = kGiveUpWindows * a.report_every;

  pipeline::RunResult result = pipeline::run_job(setup.job, stop, a.timeout);

  const auto& its = result.iterations;
  std::size_t window = std::min<std::size_t>(its.size(), static_cast<std::size_t>(a.report_every));
  Mean last = mean_of(its, its.size() - window, false);
  Mean final = mean_of(its, 0, true);
  json run = result_json(a, setup, result, last, final);
  if (!a.out.empty()) write_file_atomic(a.out, run.dump(2) + "\n");
  if (a.json) {
    run.erase("iterations");  // in --out; the summary is what run.json has besides them
    run["iterations"] = result.iterations.size();
    print_json(run);
  } else if (!a.quiet) {
    print_summary(setup, result, last, final);
  }
  check_outcome(a, result);
}

void add_counter_options(CLI::App& cmd, SimulateArgs& a) {
  measure::CounterOptions& c = a.counter_options;
  cmd.add_option("--counter", a.counter,
                 "Energy counter of the simulated GPUs: realistic (refreshed every 100 ms, 4 ms "
                 "per read, as measured on an H100) or ideal (exact, free reads)")
      ->check(CLI::IsMember({"realistic", "ideal"}))
      ->capture_default_str();
  cmd.add_option("--counter-refresh", c.refresh_period_s, "Counter refresh period in seconds")
      ->capture_default_str();
  cmd.add_option("--counter-jitter", c.refresh_jitter_s,
                 "Refresh intervals vary by up to this many seconds (0: a strict clock, as "
                 "measured on H100s)")
      ->capture_default_str();
  cmd.add_option("--counter-read-latency", c.read_latency_s,
                 "Seconds one counter read blocks the reader")
      ->capture_default_str();
  cmd.add_option("--counter-sampled-fraction", c.sampled_fraction,
                 "Share of each refresh window the power sensor sees (Yang et al. report 0.25 for "
                 "A100/H100 power readings; the energy counter of recorded H100 windows fits 1)")
      ->capture_default_str();
  cmd.add_option("--counter-lag", c.lag_s,
                 "Seconds by which each refresh trails the energy it reports (10 ms on an H100; "
                 "the client takes it back)")
      ->capture_default_str();
  cmd.add_option("--counter-window", c.window_s,
                 "Seconds over which each refresh averages the energy it reports, centred "
                 "--counter-lag before it (20 ms on an H100; at most twice the lag)")
      ->capture_default_str();
  cmd.add_option("--counter-time-constant", c.time_constant_s,
                 "Seconds: a first-order response instead of the window (--counter-window 0; "
                 "--counter-lag is then its dead time): energy spent s before a refresh is "
                 "counted by it with probability 1 - exp(-(s - lag) / this); measured on H100s: "
                 "0.011-0.012 with no dead time")
      ->capture_default_str();
  cmd.add_option("--counter-noise", c.noise,
                 "Relative standard deviation of each refresh's increment")
      ->capture_default_str();
  cmd.add_option_function<double>(
      "--counter-phase", [&c](double phase) { c.refresh_phase_s = phase; },
      "Seconds from the start to each counter's first refresh, in (0, refresh period] "
      "(default: drawn from the seed; a real counter refreshes on its own schedule)");
  cmd.add_option("--counter-seed", c.seed, "Seed of the counters' jitter, noise and phase")
      ->capture_default_str();
  cmd.add_option("--trace-dir", a.trace_dir,
                 "Write every rank's reporting windows as attribution traces "
                 "(rank-R-window-N.json, docs/formats.md) into this directory, for "
                 "perseus.attribute");
  cmd.add_option("--attribution", a.attribution,
                 "How clients attribute counter energy to instructions: busy-overlap, fit, "
                 "overlap or deltas")
      ->check(CLI::IsMember({"busy-overlap", "fit", "overlap", "deltas"}))
      ->capture_default_str();
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "simulate-training",
      "Run a pipeline-parallel job on simulated GPUs (one process per rank) against a server");
  auto a = std::make_shared<SimulateArgs>();
  cmd->add_option("--server", a->server, "Control-plane server URL (http://host:port) (required)")
      ->required();
  cmd->add_option("--token-file", a->token_file,
                  "The server's cluster token: the file's first line (default: $PERSEUS_TOKEN)");
  cmd->add_option("--profile", a->profile,
                  "Stage profile CSV (default: the embedded synthesized A100 profile)");
  cmd->add_option("--stages", a->stages, "Pipeline stages (default: the profile's; 4 embedded)");
  cmd->add_option("--pipelines", a->pipelines, "Data-parallel pipelines")->capture_default_str();
  cmd->add_option("--microbatches", a->microbatches, "Microbatches per iteration (required)")
      ->required();
  add_schedule_options(cmd, a->schedule, "default 1f1b; envelope is EnvPipe's");
  cmd->add_option("--blocking-power", a->blocking_power,
                  "Power in watts a GPU draws while blocked (83.64 for A100) (required)")
      ->required();
  cmd->add_option("--iterations", a->iterations, "Iterations to run")->capture_default_str();
  cmd->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  cmd->add_flag("--until-done", a->until_done,
                "Run until the server's final schedule ran one full reporting window");
  cmd->add_option("--max-iterations", a->max_iterations, "Iteration cap of --until-done")
      ->capture_default_str();
  cmd->add_option("--report-every", a->report_every, "Iterations per reporting window")
      ->capture_default_str();
  cmd->add_option("--scheduler", a->scheduler, "Scheduler of this job (default: the server's)");
  cmd->add_option(
      "--scheduler-args", a->scheduler_args,
      "Scheduler arguments, a JSON object (e.g. {\"output\": \"profile.csv\"}); the instruction "
      "order (microbatches, schedule, virtual_stages) is filled in from this job's for the "
      "schedulers that take it");
  cmd->add_option("--job-metadata", a->job_metadata, "Free-form job metadata sent to the server");
  cmd->add_option("--out", a->out,
                  "Write per-iteration pipeline time and summed energy (and the job id) as JSON");
  cmd->add_option("--timeout", a->timeout, "Give up after this many seconds (0: no limit)")
      ->capture_default_str();
  add_counter_options(*cmd, *a);
  cmd->add_flag("--strict", a->strict,
                "Fail when the server fails instead of running at the default clock");
  cmd->add_flag("--quiet", a->quiet, "Print nothing on success");
  add_json_flag(cmd, a->json);
  cmd->callback([cmd, a] {
    a->has_iterations = cmd->count("--iterations") > 0;
    a->has_job_metadata = cmd->count("--job-metadata") > 0;
    run_simulate(*a);
  });
}

}  // namespace perseus::cli
