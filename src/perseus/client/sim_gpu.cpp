#include "perseus/client/sim_gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/steady_time.hpp"
#include "perseus/util/text.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::client {

namespace {

double average_power(const profile::Measurement& m) {
  return m.energy_j / m.time_s;
}

}  // namespace

SimGpu::SimGpu(profile::Profile profile, SimGpuOptions options)
    : profile_(std::move(profile)),
      options_(options),
      trace_(options.blocking_power_w),
      counter_(trace_, options.counter) {
  const int stages = profile_.num_stages();
  if (options_.stages.empty()) throw Error("simulated GPU: no stage to run");
  for (int stage : options_.stages) {
    if (stage < 0 || stage >= stages) {
      throw Error("simulated GPU: stage " + std::to_string(stage) + " is not in profile " +
                  profile_.source() + " (" + std::to_string(stages) + " stages)");
    }
  }
  if (!(options_.blocking_power_w >= 0.0) || !std::isfinite(options_.blocking_power_w)) {
    throw Error("simulated GPU: blocking power must be a finite number of watts >= 0, got " +
                number(options_.blocking_power_w));
  }
  if (!(options_.time_scale > 0.0) || !std::isfinite(options_.time_scale)) {
    throw Error("simulated GPU: time scale must be a positive number, got " +
                number(options_.time_scale));
  }
  std::set<int, std::greater<>> clocks;
  for (int stage : options_.stages) {
    for (const auto& name : profile_.instructions(stage)) {
      for (const auto& row : profile_.rows(stage, name)) clocks.insert(row.frequency_mhz);
    }
  }
  if (clocks.empty()) {
    throw Error("simulated GPU: profile " + profile_.source() + " has no rows for stage " +
                stage_list());
  }
  clocks_.assign(clocks.begin(), clocks.end());
  if (options_.real_time) wall_origin_s_ = wall_s();
}

std::string SimGpu::stage_list() const {
  std::vector<std::string> items;
  for (int stage : options_.stages) items.push_back(std::to_string(stage));
  return join(items);
}

std::string SimGpu::where() const {
  return "simulated GPU (stage" + std::string(options_.stages.size() > 1 ? "s " : " ") +
         stage_list() + ")";
}

std::pair<int, std::string> SimGpu::resolve(const std::string& instruction) const {
  auto [kind, stage] = wire::parse_instruction_label(instruction);
  if (stage < 0) {
    if (options_.stages.size() > 1) {
      throw Error(where() + ": instruction '" + instruction +
                  "' names no stage, but this GPU runs several (KIND@STAGE)");
    }
    return {options_.stages.front(), kind};
  }
  if (std::find(options_.stages.begin(), options_.stages.end(), stage) == options_.stages.end()) {
    throw Error(where() + ": instruction '" + instruction + "' is of stage " +
                std::to_string(stage) + ", which this GPU does not run");
  }
  return {stage, kind};
}

double SimGpu::wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SimGpu::sleep_until_sim(double t_s) const {
  double wall = wall_origin_s_ + t_s * options_.time_scale;
  auto at = std::chrono::steady_clock::time_point(steady_duration(wall));
  std::this_thread::sleep_until(at);
}

std::vector<int> SimGpu::supported_clocks() const {
  return clocks_;
}

void SimGpu::lock_clock(int mhz) {
  if (std::find(clocks_.begin(), clocks_.end(), mhz) == clocks_.end()) {
    throw Error(where() + ": clock " + std::to_string(mhz) +
                " MHz is not supported (profiled clocks " + std::to_string(clocks_.back()) + ".." +
                std::to_string(clocks_.front()) + " MHz)");
  }
  locked_mhz_ = mhz;
}

void SimGpu::reset_clock() {
  locked_mhz_ = 0;
}

void SimGpu::set_power_limit(double watts) {
  if (!(watts > 0.0) || !std::isfinite(watts)) {
    throw Error(where() + ": power limit must be a positive number of watts, got " + number(watts));
  }
  power_limit_w_ = watts;
}

void SimGpu::reset_power_limit() {
  power_limit_w_ = 0.0;
}

const profile::Measurement& SimGpu::row_for(const std::string& instruction) const {
  const auto [stage, kind] = resolve(instruction);
  if (!profile_.has(stage, kind)) {
    throw Error(where() + ": profile " + profile_.source() + " has no '" + kind +
                "' rows for stage " + std::to_string(stage));
  }
  const auto& rows = profile_.rows(stage, kind);
  // A locked clock caps the clock; the instruction runs at the highest profiled clock at or
  // below it (its lowest clock when none is).
  const int cap = locked_mhz_ > 0 ? locked_mhz_ : std::numeric_limits<int>::max();
  const profile::Measurement* lowest = &rows.front();
  bool any = false;
  for (const auto& row : rows) {
    any = any || row.frequency_mhz <= cap;
    if (row.frequency_mhz < lowest->frequency_mhz) lowest = &row;
  }
  // The candidates: the rows at or below the cap (the lowest clock's when none is).
  auto candidate = [&](const profile::Measurement& row) {
    return any ? row.frequency_mhz <= cap : &row == lowest;
  };
  // A power limit: the fastest candidate whose average power fits, else the lowest-power one
  // (as the Zeus baselines price it).
  const profile::Measurement *best = nullptr, *lowest_power = nullptr;
  for (const auto& row : rows) {
    if (!candidate(row)) continue;
    const bool fits = !(power_limit_w_ > 0.0) || average_power(row) <= power_limit_w_;
    if (fits && (best == nullptr || row.frequency_mhz > best->frequency_mhz)) best = &row;
    if (lowest_power == nullptr || average_power(row) < average_power(*lowest_power)) {
      lowest_power = &row;
    }
  }
  return best != nullptr ? *best : *lowest_power;
}

int SimGpu::current_clock(const std::string& instruction) const {
  return row_for(instruction).frequency_mhz;
}

double SimGpu::now_s() {
  if (!options_.real_time) return now_s_;
  return (wall_s() - wall_origin_s_) / options_.time_scale;
}

double SimGpu::counter_value_at(double t_s, bool forget_older) {
  std::lock_guard lock(trace_mutex_);
  double value = counter_.value_at(t_s);
  if (!options_.counter.ideal) {
    trace_.forget_before(counter_.last_refresh_s() - options_.counter.reach_s());
  } else if (forget_older) {
    trace_.forget_before(t_s);
  }
  return value;
}

double SimGpu::true_energy_j() {
  double now = now_s();
  std::lock_guard lock(trace_mutex_);
  return trace_.energy_at(now);
}

double SimGpu::total_energy_j() {
  const double latency = options_.counter.read_latency_s;
  // A direct read of the present: the virtual sampler may still read earlier times.
  if (!options_.real_time) return counter_value_at(now_s_, false);
  // The device answers from the middle of the call.
  auto pause = std::chrono::duration<double>(0.5 * latency * options_.time_scale);
  std::this_thread::sleep_for(pause);
  double value = counter_value_at(now_s(), true);
  std::this_thread::sleep_for(pause);
  return value;
}

void SimGpu::instruction_begin(const std::string& name) {
  if (!running_.empty()) {
    throw Error(where() + ": instruction_begin('" + name + "') while '" + running_ +
                "' is still running");
  }
  const profile::Measurement& m = row_for(name);
  running_row_ = &m;
  running_ = name;
  begin_s_ = now_s();
  std::lock_guard lock(trace_mutex_);
  trace_.add_busy(begin_s_, begin_s_ + m.time_s, average_power(m));
  if (runs_.size() == kMaxRuns) runs_.pop_front();
  runs_.push_back({name, m.frequency_mhz});
}

std::vector<SimGpu::Run> SimGpu::runs() {
  std::lock_guard lock(trace_mutex_);
  return {runs_.begin(), runs_.end()};
}

void SimGpu::instruction_end(const std::string& name) {
  if (running_ != name) {
    throw Error(where() + ": instruction_end('" + name + "') without instruction_begin('" + name +
                "')" + (running_.empty() ? "" : " ('" + running_ + "' is running)"));
  }
  const profile::Measurement& m = *running_row_;
  // Real time: sleeping longer than asked is time spent blocked, not running.
  if (options_.real_time) {
    sleep_until_sim(begin_s_ + m.time_s);
  } else {
    now_s_ += m.time_s;
  }
  running_.clear();
}

void SimGpu::wait_until(double t_s) {
  if (options_.real_time) {
    if (t_s > now_s()) sleep_until_sim(t_s);
    return;
  }
  now_s_ = std::max(now_s_, t_s);
}

// ---- the virtual-time energy sampler ----

// The reads a sampler thread would have made, back to back from time 0 (each taking the read
// latency, +-5 % seeded jitter, at least the minimum period apart), over the simulated time
// that has passed; an ideal counter is observed exactly at every change of power.
class SimGpu::VirtualSampler : public EnergySampler {
 public:
  VirtualSampler(SimGpu& gpu, const SamplerOptions& options)
      : gpu_(gpu),
        options_(options),
        series_(options.capacity),
        random_(gpu.options_.counter.seed ^ 0x5eed5eedULL) {}

  std::vector<measure::CounterSample> series(double from_s, double to_s) override {
    catch_up(gpu_.now_s());
    return series_.between(from_s, to_s);
  }
  void forget_before(double t_s) override { series_.forget_before(t_s); }

 private:
  void catch_up(double now) {
    const measure::CounterOptions& c = gpu_.options_.counter;
    if (c.ideal) {
      if (series_.size() == 0) series_.add_exact(0.0, 0.0);
      std::vector<double> times;
      {
        std::lock_guard lock(gpu_.trace_mutex_);
        times = gpu_.trace_.boundaries(observed_s_, now);
      }
      times.push_back(now);
      for (double t : times) series_.add_exact(t, gpu_.counter_value_at(t, true));
      observed_s_ = now;
      return;
    }
    std::uniform_real_distribution<double> jitter(0.95, 1.05);
    if (cost_s_ < 0.0) cost_s_ = c.read_latency_s * jitter(random_);
    while (next_read_s_ + cost_s_ <= now) {
      series_.add_read(next_read_s_, next_read_s_ + cost_s_,
                       gpu_.counter_value_at(next_read_s_ + 0.5 * cost_s_, true));
      next_read_s_ += std::max({cost_s_, options_.min_period_s, 1e-6});
      cost_s_ = c.read_latency_s * jitter(random_);
    }
  }

  SimGpu& gpu_;
  SamplerOptions options_;
  measure::CounterSeries series_;
  std::mt19937_64 random_;
  double next_read_s_ = 0.0, observed_s_ = 0.0;
  double cost_s_ = -1.0;  // the next read's duration (drawn once)
};

std::unique_ptr<EnergySampler> SimGpu::start_energy_sampler(
    const SamplerOptions& options, std::function<void(const std::string&)> on_error) {
  if (options_.real_time) return GpuBackend::start_energy_sampler(options, std::move(on_error));
  return std::make_unique<VirtualSampler>(*this, options);
}

}  // namespace perseus::client
