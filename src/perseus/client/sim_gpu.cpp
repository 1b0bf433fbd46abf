#include "perseus/client/sim_gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "perseus/util/error.hpp"

namespace perseus::client {

namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

double average_power(const profile::Measurement& m) {
  return m.energy_j / m.time_s;
}

}  // namespace

SimGpu::SimGpu(profile::Profile profile, SimGpuOptions options)
    : profile_(std::move(profile)), options_(options) {
  const int stages = profile_.num_stages();
  if (options_.stage < 0 || options_.stage >= stages) {
    throw Error("simulated GPU: stage " + std::to_string(options_.stage) + " is not in profile " +
                profile_.source() + " (" + std::to_string(stages) + " stages)");
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
  for (const auto& name : profile_.instructions(options_.stage)) {
    for (const auto& row : profile_.rows(options_.stage, name)) clocks.insert(row.frequency_mhz);
  }
  if (clocks.empty()) {
    throw Error("simulated GPU: profile " + profile_.source() + " has no rows for stage " +
                std::to_string(options_.stage));
  }
  clocks_.assign(clocks.begin(), clocks.end());
  if (options_.real_time) wall_origin_s_ = wall_s();
}

std::string SimGpu::where() const {
  return "simulated GPU (stage " + std::to_string(options_.stage) + ")";
}

double SimGpu::wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SimGpu::sleep_until_sim(double t_s) const {
  double wall = wall_origin_s_ + t_s * options_.time_scale;
  auto at = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(wall)));
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
  if (!profile_.has(options_.stage, instruction)) {
    throw Error(where() + ": profile " + profile_.source() + " has no '" + instruction +
                "' rows for stage " + std::to_string(options_.stage));
  }
  const auto& rows = profile_.rows(options_.stage, instruction);
  // A locked clock caps the clock; the instruction runs at the highest profiled clock at or
  // below it (its lowest clock when none is).
  const int cap = locked_mhz_ > 0 ? locked_mhz_ : std::numeric_limits<int>::max();
  std::vector<const profile::Measurement*> candidates;
  const profile::Measurement* lowest = &rows.front();
  for (const auto& row : rows) {
    if (row.frequency_mhz <= cap) candidates.push_back(&row);
    if (row.frequency_mhz < lowest->frequency_mhz) lowest = &row;
  }
  if (candidates.empty()) candidates.push_back(lowest);
  // A power limit: the fastest candidate whose average power fits, else the lowest-power one
  // (as the Zeus baselines price it).
  const profile::Measurement* best = nullptr;
  if (power_limit_w_ > 0.0) {
    const profile::Measurement* lowest_power = candidates.front();
    for (const auto* row : candidates) {
      if (average_power(*row) <= power_limit_w_ &&
          (best == nullptr || row->frequency_mhz > best->frequency_mhz)) {
        best = row;
      }
      if (average_power(*row) < average_power(*lowest_power)) lowest_power = row;
    }
    if (best == nullptr) best = lowest_power;
  } else {
    for (const auto* row : candidates) {
      if (best == nullptr || row->frequency_mhz > best->frequency_mhz) best = row;
    }
  }
  return *best;
}

int SimGpu::current_clock(const std::string& instruction) const {
  return row_for(instruction).frequency_mhz;
}

double SimGpu::now_s() {
  if (!options_.real_time) return now_s_;
  return (wall_s() - wall_origin_s_) / options_.time_scale;
}

double SimGpu::total_energy_j() {
  if (!options_.real_time) return energy_j_;
  double now = now_s();
  double busy = busy_s_ + (running_.empty() ? 0.0 : std::max(0.0, now - begin_s_));
  return energy_j_ + options_.blocking_power_w * std::max(0.0, now - busy);
}

void SimGpu::instruction_begin(const std::string& name) {
  if (!running_.empty()) {
    throw Error(where() + ": instruction_begin('" + name + "') while '" + running_ +
                "' is still running");
  }
  running_mhz_ = row_for(name).frequency_mhz;
  running_ = name;
  begin_s_ = now_s();
}

void SimGpu::instruction_end(const std::string& name) {
  if (running_ != name) {
    throw Error(where() + ": instruction_end('" + name + "') without instruction_begin('" + name +
                "')" + (running_.empty() ? "" : " ('" + running_ + "' is running)"));
  }
  const profile::Measurement& m = profile_.at(options_.stage, name, running_mhz_);
  if (options_.real_time) {
    sleep_until_sim(begin_s_ + m.time_s);
    // Sleeping longer than asked is time spent blocked, not running.
    busy_s_ += m.time_s;
  } else {
    now_s_ += m.time_s;
    busy_s_ += m.time_s;
  }
  energy_j_ += m.energy_j;
  running_.clear();
}

void SimGpu::wait_until(double t_s) {
  if (options_.real_time) {
    if (t_s > now_s()) sleep_until_sim(t_s);
    return;
  }
  if (t_s <= now_s_) return;
  energy_j_ += options_.blocking_power_w * (t_s - now_s_);
  now_s_ = t_s;
}

}  // namespace perseus::client
