// A simulated GPU whose instruction time and energy follow a stage profile (architecture section
// 7): for tests, demos and CI, where no GPU exists. An instruction run at clock f takes the
// profile's time at f and costs its energy; under a power limit L it runs at the fastest profiled
// clock whose average power is at most L (else at its lowest-power clock, as the Zeus baselines
// price it); with both a locked clock and a limit, the limit chooses among the clocks at or below
// the lock. Time between instructions is spent blocked at the blocking power.
//
// The energy counter behaves like a real GPU's (perseus/measure/energy_counter.hpp; by default
// refreshed every 100 ms, 4 ms per read): total_energy_j() is what one read returns, and
// true_energy_j() the exact energy, for judging what the client measured. With
// `counter.ideal` every read is exact and free.
//
// Every call comes from the training thread (synchronous_clocks: the client applies clocks and
// limits there too, before the next instruction), except counter reads, which may come from a
// sampler thread (real-time mode).
//
// Two time modes:
//   virtual    time is a number advanced by instructions and wait_until(); deterministic. The
//              caller carries timestamps between processes (pipeline neighbours). The energy
//              sampler is virtual too: it computes the reads a sampler thread would have made
//              (back to back, each taking the read latency) over the time that has passed.
//   real-time  instruction_end sleeps until the profiled duration (times time_scale) has passed
//              since instruction_begin; now_s() is wall-clock time divided by time_scale.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "perseus/client/gpu_backend.hpp"
#include "perseus/measure/energy_counter.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus::client {

struct SimGpuOptions {
  // The profile stages this GPU runs: one, or several (interleaved and V-shaped schedules, whose
  // instructions name their stage: "forward@2", perseus/wire/protocol.hpp).
  std::vector<int> stages = {0};
  double blocking_power_w = 0.0;  // power while not running an instruction
  bool real_time = false;
  double time_scale = 1.0;          // real-time mode: wall seconds per simulated second
  measure::CounterOptions counter;  // the energy counter (default: a realistic one)
};

class SimGpu : public GpuBackend {
 public:
  // Throws perseus::Error when a stage is not in the profile or options are out of range.
  SimGpu(profile::Profile profile, SimGpuOptions options);

  std::vector<int> supported_clocks() const override;
  void lock_clock(int mhz) override;  // throws perseus::Error for unsupported clocks
  void reset_clock() override;
  void set_power_limit(double watts) override;
  void reset_power_limit() override;
  double now_s() override;
  // One counter read: the value of the last refresh; real-time mode blocks for the read latency.
  double total_energy_j() override;
  // The exact energy consumed so far (what an ideal counter would read now).
  double true_energy_j();
  // Virtual time: a deterministic sampler over the simulated counter; real time: the default
  // sampler thread.
  std::unique_ptr<EnergySampler> start_energy_sampler(
      const SamplerOptions& options, std::function<void(const std::string&)> on_error) override;
  void instruction_begin(const std::string& name) override;
  void instruction_end(const std::string& name) override;
  bool simulated() const override { return true; }
  bool synchronous_clocks() const override { return true; }
  // The simulated counter's response (lag and window, or first-order), which the client takes
  // back.
  measure::CounterResponse counter_response() const override { return options_.counter.response(); }

  // Blocks (at blocking power) until simulated time t; no-op when t <= now. Virtual mode advances
  // the simulated time; real-time mode sleeps until then.
  void wait_until(double t_s);
  // The clock the next instruction runs at (locked clock, or the power limit's choice for it).
  int current_clock(const std::string& instruction) const;
  // Every instruction run so far, oldest first, with the clock it ran at (the latest kMaxRuns):
  // what a test compares with the plan the client was to follow.
  struct Run {
    std::string instruction;
    int mhz = 0;
  };
  static constexpr std::size_t kMaxRuns = std::size_t{1} << 16;
  std::vector<Run> runs();

 private:
  // The (stage, kind) an instruction label names; throws when this GPU does not run its stage, or
  // when it names none and this GPU runs several.
  std::pair<int, std::string> resolve(const std::string& instruction) const;
  // The profile rows `instruction` runs at under the current lock and power limit.
  const profile::Measurement& row_for(const std::string& instruction) const;
  // Real-time mode: steady-clock seconds; sleeps until simulated time t_s.
  static double wall_s();
  void sleep_until_sim(double t_s) const;
  std::string stage_list() const;  // "0, 2"
  std::string where() const;

  class VirtualSampler;
  // The counter's value sampled at t (<= now). `forget_older`: no read will ask for an earlier
  // time again (a reader that moves forward), so an ideal counter's trace before t may go; a
  // realistic counter's trace is kept from its latest refresh on either way.
  double counter_value_at(double t_s, bool forget_older);

  profile::Profile profile_;
  SimGpuOptions options_;
  std::vector<int> clocks_;
  int locked_mhz_ = 0;          // 0: default (highest) clock
  double power_limit_w_ = 0.0;  // 0: none
  double now_s_ = 0.0;
  double begin_s_ = 0.0;
  double wall_origin_s_ = 0.0;
  std::string running_;  // the instruction between instruction_begin and _end ("" if none)
  const profile::Measurement* running_row_ = nullptr;  // its row (in profile_, which never changes)
  std::mutex trace_mutex_;  // trace_ and counter_ (a sampler thread reads the counter)
  measure::PowerTrace trace_;
  measure::EnergyCounter counter_;
  std::deque<Run> runs_;  // under trace_mutex_
};

}  // namespace perseus::client
