#include "perseus/client/optimizer.hpp"

#include <chrono>
#include <utility>

#include "perseus/client/frequency_controller.hpp"
#include "perseus/client/measurement_window.hpp"
#include "perseus/client/problem_log.hpp"
#include "perseus/client/schedule_follower.hpp"
#include "perseus/client/server_session.hpp"
#include "perseus/client/window_checks.hpp"
#include "perseus/util/bounded_thread.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/steady_time.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::client {

namespace {

// A GPU backend query the server exchange needs failed (a GPU that fell off the bus).
class BackendFailure : public Error {
 public:
  using Error::Error;
};

}  // namespace

// The hook state machine: schedule in use, clock requests, windows.
struct PipelineFrequencyOptimizer::Impl {
  OptimizerOptions opt;
  // Warnings, and failures strict mode throws; first, so that it outlives the threads that report
  // to it.
  std::unique_ptr<ProblemLog> problems;
  std::unique_ptr<GpuBackend> gpu;
  std::unique_ptr<FrequencyController> controller;
  std::unique_ptr<EnergySampler> sampler;
  std::unique_ptr<MeasurementWindow> window;
  std::unique_ptr<ServerSession> session;
  std::vector<int> gpu_clocks;  // supported_clocks(), once asked

  std::unique_ptr<WindowChecks> checks;

  // Server state.
  std::unique_ptr<ScheduleFollower> follower;  // the schedule in use (none: default clock)
  int next_round = 0;
  bool done = false, degraded = false;
  bool final_reported = false;      // the final plans' first window went to the server
  int final_windows = 0;            // ... and this many more (wire::ProfilingResult::final_window)
  bool after_final_failed = false;  // one of those was not acknowledged: no more are sent
  bool job_failed = false;          // the server said so: no more exchanges
  bool scheduler_warned = false;    // warn_if_scheduler_ignored said so
  bool limit_set = false;           // a schedule's power limit is set

  int report_every = 0;  // iterations per window: the schedule's, else opt.report_every

  // The iteration in progress.
  bool in_step = false;
  struct Running {
    std::string kind;
    int stage;
    std::string label;  // what it was measured and matched under
  };
  std::optional<Running> running;  // between on_instruction_begin and _end
  std::vector<IterationMeasurement> iterations;
  WindowMeasurements last_window;

  // ---- backend calls ----

  // Runs a backend call from a hook; its failure is a local problem.
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const std::exception& e) {
      problems->local_problem(std::string("GPU backend ") + what + " failed: " + e.what());
    }
    return decltype(f())();
  }

  double now() {
    return guarded("now_s", [&] { return gpu->now_s(); });
  }

  // The GPU's clocks, asked once (registration needs them); throws BackendFailure.
  const std::vector<int>& supported_clocks() {
    if (gpu_clocks.empty()) {
      try {
        gpu_clocks = gpu->supported_clocks();
      } catch (const std::exception& e) {
        throw BackendFailure(std::string("GPU backend supported_clocks failed: ") + e.what());
      }
    }
    return gpu_clocks;
  }

  // ---- clock requests (none in observe-only mode) ----

  void lock_clock(int mhz) {
    if (!opt.observe) controller->lock_clock(mhz);
  }

  void default_clock() {
    if (opt.observe) return;
    controller->reset_clock();
    if (limit_set) {
      controller->reset_power_limit();
      limit_set = false;
    }
  }

  void apply_power_limit(const wire::FrequencySchedule& s) {
    if (opt.observe) return;
    if (s.power_limit_w) {
      controller->reset_clock();
      controller->set_power_limit(*s.power_limit_w);
      limit_set = true;
    } else if (limit_set) {
      controller->reset_power_limit();
      limit_set = false;
    }
  }

  // ---- the reporting window ----

  // Attributes the window's energy; returns its measurements.
  WindowMeasurements close_window() {
    check_driver_calls();
    WindowMeasurements m = window->close();
    if (!m.iter_time.empty()) last_window = m;
    for (std::size_t i = 0; i < m.iter_time.size(); ++i) {
      iterations.push_back({m.iter_time[i], m.iter_energy[i]});
    }
    checks->check(m, *sampler);
    return m;
  }

  // ---- state changes ----

  void apply(wire::FrequencySchedule s) {
    next_round = s.round + 1;
    done = s.done;
    report_every = s.report_every.value_or(opt.report_every);
    degraded = false;
    apply_power_limit(s);
    follower->follow(std::move(s));
    problems->rethrow_clock_error();
  }

  void degrade(const std::string& why) {
    if (opt.strict) throw Error(why);
    if (!degraded) {
      problems->log(why + "; running at the default clock, retrying every " +
                    std::to_string(report_every) + " iterations");
    }
    fall_back();
  }

  // The job failed on the server for good, or asking again would do harm (`why` says which):
  // the client stops asking.
  void give_up(const std::string& why, bool job_failed_there = true) {
    if (opt.strict) throw Error(why);
    problems->log(why + (job_failed_there ? "; the job failed for good" : "") +
                  ": running at the default clock, without the server from now on");
    job_failed = true;
    fall_back();
  }

  void fall_back() {
    degraded = true;
    follower->drop();
    default_clock();
    problems->rethrow_clock_error();
  }

  // Zeus's server runs its default scheduler for every job: a job's own is ignored there.
  void warn_if_scheduler_ignored() {
    if (scheduler_warned || opt.rank != 0 || opt.scheduler.empty() || !session->zeus_server()) {
      return;
    }
    scheduler_warned = true;
    problems->log("control-plane server " + opt.server_url + " is not Perseus's (Zeus's?): it " +
                  "ignores this job's own scheduler '" + opt.scheduler + "' and runs its default");
  }

  std::string server_problem(const ServerFailure& f) const {
    return std::string("control-plane server ") + opt.server_url + ": " + f.what();
  }

  // One bounded exchange with the server (at most stall_bound_s): posts the pending result,
  // registers what is missing and fetches the next round's schedule.
  void exchange() {
    session->start_exchange();
    try {
      session->post_pending();
      session->ensure_registered(supported_clocks(), gpu->simulated());
      warn_if_scheduler_ignored();
      apply(session->fetch_schedule(next_round));
      session->exchange_succeeded();
    } catch (const JobFailed& f) {
      give_up(server_problem(f));
    } catch (const StopAsking& f) {
      give_up(server_problem(f), false);
    } catch (const ServerFailure& f) {
      session->exchange_failed();
      degrade(server_problem(f));
    } catch (const BackendFailure& f) {
      session->exchange_failed();
      degrade(f.what());
    }
  }

  void window_boundary() {
    WindowMeasurements m = close_window();
    if (!session || job_failed) return;
    if (done && final_reported) return report_after_final(std::move(m));
    if (follower->schedule() && !degraded) {
      session->queue_result(std::move(m), follower->schedule()->round);
    }
    if (session->backing_off()) return;  // the circuit breaker is open: no request this window
    if (done) return report_final();
    exchange();
  }

  // The final plans' first window, once, so that the job shows what they measured (saved);
  // after it the client asks nothing more. A failure changes nothing the training runs: it is
  // not retried.
  void report_final() {
    final_reported = true;
    session->start_exchange();
    try {
      session->post_pending();
      session->exchange_succeeded();
    } catch (const ServerFailure&) {
      session->exchange_failed();
    }
  }

  // A later window of the final plans, so that the energy the job saved keeps counting while it
  // trains (Perseus's server only: Zeus's counts nothing). One request, bounded by the stall
  // bound; the first that fails ends these reports, so a server gone away costs one stall.
  void report_after_final(WindowMeasurements m) {
    if (after_final_failed || session->zeus_server() || !follower->schedule() || degraded) return;
    session->queue_result(std::move(m), follower->schedule()->round, ++final_windows);
    session->start_exchange();
    try {
      session->post_pending();
    } catch (const ServerFailure& f) {
      after_final_failed = true;
      problems->log(server_problem(f) +
                    "; the final plans' windows are no longer reported (the "
                    "job's energy saved stops counting; training is not affected)");
    }
  }

  // ---- following the schedule ----

  // The clock the next instruction runs at (0: default), applied when it changes.
  int clock_for(const std::string& label) {
    const ScheduleFollower::Clock clock = follower->next(label);
    if (!clock.change) return 0;
    if (clock.mhz > 0) {
      lock_clock(clock.mhz);
    } else {
      default_clock();
    }
    problems->rethrow_clock_error();
    return clock.mhz;
  }

  void check_iteration_length() {
    if (!follower->step_end_departs()) return;
    default_clock();
    problems->rethrow_clock_error();
  }

  // ---- a driver that does not answer ----

  // Driver calls blocked for kDriverCallStuckS on the sampler or clock thread, said once each.
  void check_driver_calls() {
    auto check = [&](const std::optional<RunningCall>& call, const char* meanwhile) {
      if (call && call->running_s >= kDriverCallStuckS) {
        problems->warn_once(stuck_call_warning(*call, meanwhile));
      }
    };
    check(sampler->running_call(),
          "and windows without a counter change are reported as unmeasured meanwhile");
    check(controller->running_call(), "at whatever clock and power limit the GPU has meanwhile");
  }

  // At destruction `call` (or another) did not return within shutdown_bound_s: says so and
  // silences the log for the calls that may still return.
  void leave_behind(const std::optional<RunningCall>& call) {
    problems->log(left_behind_warning(call, opt.shutdown_bound_s, !opt.observe));
    problems->silence();
  }
};

PipelineFrequencyOptimizer::PipelineFrequencyOptimizer(OptimizerOptions options,
                                                       std::unique_ptr<GpuBackend> gpu)
    : impl_(std::make_unique<Impl>()) {
  if (!gpu) throw Error("optimizer options: no GPU backend given");
  options.validate();
  Impl& m = *impl_;
  m.opt = std::move(options);
  m.report_every = m.opt.report_every;
  m.problems = std::make_unique<ProblemLog>(m.opt.log, m.opt.strict);
  m.follower = std::make_unique<ScheduleFollower>(m.opt.rank, m.opt.strict);
  m.gpu = std::move(gpu);
  m.controller = std::make_unique<FrequencyController>(
      *m.gpu, [&m](const std::string& message) { m.problems->clock_error(message); });
  SamplerOptions sampling;
  sampling.min_period_s = m.opt.sampler_period_s;
  m.sampler = m.gpu->start_energy_sampler(
      sampling, [&m](const std::string& message) { m.problems->warn_once(message); });
  m.window =
      std::make_unique<MeasurementWindow>(*m.sampler, m.opt.attribution, m.gpu->counter_response());
  m.checks = std::make_unique<WindowChecks>(*m.problems, !m.opt.observe);
  if (m.opt.server_url.empty()) return;
  m.session = std::make_unique<ServerSession>(m.opt);
  m.exchange();
}

PipelineFrequencyOptimizer::~PipelineFrequencyOptimizer() {
  Impl& m = *impl_;
  // Restored on the clock thread, so that a driver that does not answer is bounded too (a clock
  // or power limit still pending there is replaced, not applied first).
  if (!m.opt.observe) {
    m.controller->reset_clock();
    m.controller->reset_power_limit();
  }
  const auto deadline = std::chrono::steady_clock::now() + steady_duration(m.opt.shutdown_bound_s);
  const bool sampler_stopped = m.sampler->stop_until(deadline);
  const bool clocks_stopped = m.controller->stop_until(deadline);
  if (sampler_stopped && clocks_stopped) return;
  m.leave_behind(sampler_stopped ? m.controller->running_call() : m.sampler->running_call());
  // The calls left behind may still return into the client's objects.
  keep_for_good(std::shared_ptr<Impl>(std::move(impl_)));
}

void PipelineFrequencyOptimizer::on_step_begin() {
  Impl& m = *impl_;
  m.problems->rethrow_clock_error();
  if (m.in_step) {
    m.problems->local_problem(
        "on_step_begin while an iteration is running (no on_step_end); that iteration is dropped");
  }
  m.in_step = true;
  m.follower->step_begin();
  m.window->step_begin(m.now());
}

void PipelineFrequencyOptimizer::on_instruction_begin(const std::string& name, int stage) {
  Impl& m = *impl_;
  const std::string label = m.follower->label_of(name, stage);
  // Power-limit schedules set their limit once per round; clock schedules lock per instruction.
  const int mhz = m.clock_for(label);
  if (!m.in_step) {
    m.problems->local_problem("on_instruction_begin('" + label +
                              "') outside an iteration (before on_step_begin or after "
                              "on_step_end); its measurement is dropped");
  } else if (m.running) {
    m.problems->local_problem("on_instruction_begin('" + label + "') while '" + m.running->label +
                              "' is running (no on_instruction_end); the measurement of '" +
                              m.running->label + "' is dropped");
  }
  m.running = Impl::Running{name, stage, label};
  m.window->instruction_begin(m.now(), label, mhz);
  m.guarded("instruction_begin", [&] { m.gpu->instruction_begin(label); });
}

void PipelineFrequencyOptimizer::on_instruction_end(const std::string& name, int stage) {
  Impl& m = *impl_;
  const bool follows = m.running && m.running->kind == name && m.running->stage == stage;
  const std::string label = follows ? m.running->label : wire::instruction_label(name, stage);
  m.guarded("instruction_end", [&] { m.gpu->instruction_end(label); });
  const double t = m.now();
  if (!follows) {
    const std::string began =
        m.running ? "on_instruction_begin('" + m.running->label + "')" : "any on_instruction_begin";
    m.problems->local_problem("on_instruction_end('" + label + "') does not follow " + began +
                              "; its measurement is dropped");
    return;
  }
  m.running.reset();
  m.window->instruction_end(t);
}

void PipelineFrequencyOptimizer::on_step_end() {
  Impl& m = *impl_;
  const double t = m.now();
  m.problems->rethrow_clock_error();
  if (!m.in_step) {
    m.problems->local_problem("on_step_end without on_step_begin; the iteration is not measured");
    return;
  }
  if (m.running) {
    m.problems->local_problem("on_step_end while '" + m.running->label +
                              "' is running (call on_instruction_end first); its measurement "
                              "runs past the iteration's end");
  }
  m.in_step = false;
  m.window->step_end(t);
  if (m.session && !m.done) m.check_iteration_length();
  m.follower->count_iteration();
  if (m.window->iterations() < static_cast<std::size_t>(m.report_every)) return;
  const std::string warning = m.follower->window_warning(m.window->iterations());
  if (!warning.empty()) m.problems->log(warning);
  m.window_boundary();
}

std::string PipelineFrequencyOptimizer::job_credential() const {
  return impl_->session ? impl_->session->credential() : "";
}

const std::string& PipelineFrequencyOptimizer::job_id() const {
  static const std::string none;
  return impl_->session ? impl_->session->job_id() : none;
}

int PipelineFrequencyOptimizer::round() const {
  const auto& schedule = impl_->follower->schedule();
  return schedule ? schedule->round : -1;
}

bool PipelineFrequencyOptimizer::done() const {
  return impl_->done;
}

bool PipelineFrequencyOptimizer::job_failed() const {
  return impl_->job_failed;
}

std::vector<std::pair<std::string, int>> PipelineFrequencyOptimizer::planned_clocks() const {
  const auto& schedule = impl_->follower->schedule();
  if (!schedule || impl_->degraded || impl_->follower->departed()) return {};
  return schedule->frequencies;
}

bool PipelineFrequencyOptimizer::degraded() const {
  return impl_->degraded || impl_->follower->departed();
}

std::size_t PipelineFrequencyOptimizer::mismatched_iterations() const {
  return impl_->follower->departed_iterations();
}

const std::vector<IterationMeasurement>& PipelineFrequencyOptimizer::iterations() const {
  return impl_->iterations;
}

const WindowMeasurements& PipelineFrequencyOptimizer::last_window() const {
  return impl_->last_window;
}

GpuBackend& PipelineFrequencyOptimizer::gpu() {
  return *impl_->gpu;
}

}  // namespace perseus::client
