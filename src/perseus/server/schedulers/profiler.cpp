// "profiler" (Zeus's InstructionProfiler): sweeps the available clocks from high to low, one
// round per clock with every stage at that clock, and averages each instruction's measured time
// and energy. Stops once every stage's energy has been above its lowest for `patience` clocks in
// a row (past the minimum of the U-shaped energy curve) or the clocks run out, then writes the
// profile CSV and the blocking power measured at the highest clock.
#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/files.hpp"

namespace perseus::server::schedulers {

namespace {

namespace fs = std::filesystem;

// Available clocks within the bounds, highest first.
std::vector<int> sweep_clocks(const ArgReader& args, const JobSpec& job) {
  int lo = args.integer("min_frequency", 1, 1);
  int hi = args.integer("max_frequency", 1, max_clock(args.context(), job));
  if (lo > hi) args.fail("min_frequency", "must be <= max_frequency");
  std::vector<int> clocks;
  for (int f : job.available_frequencies) {
    if (f >= lo && f <= hi) clocks.push_back(f);
  }
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  if (clocks.empty()) {
    args.fail("min_frequency", "and max_frequency leave no available frequency (" +
                                   std::to_string(lo) + ".." + std::to_string(hi) + " MHz)");
  }
  return clocks;
}

// Mean over stages of (iteration energy - instruction energy) / (iteration time - busy time),
// leaving out stages that never blocked; nullopt when none did.
std::optional<double> blocking_power(const std::vector<StageWindow>& windows) {
  double sum = 0.0;
  int count = 0;
  for (const auto& w : windows) {
    double idle = w.iter_time_s - w.busy_time_s;
    if (idle <= 0.0) continue;
    sum += (w.iter_energy_j - w.busy_energy_j) / idle;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

class Profiler : public Scheduler {
 public:
  explicit Profiler(const JobSpec& job) : context_(context_of("profiler")) {
    ArgReader args(context_, job.args,
                   with_schedule_args({"output", "patience", "min_frequency", "max_frequency",
                                       "skip_iterations"}));
    sched_ = schedule_arg(args, job.pp_degree);
    max_clock_ = max_clock(context_, job);
    clocks_ = sweep_clocks(args, job);
    patience_ = args.integer("patience", 1, 3);
    skip_ = static_cast<std::size_t>(args.integer("skip_iterations", 0, 1));
    output_ = output_path(job, args.text("output", "profile.csv"));
    args.naming("output", [&] {
      ensure_writable_dir(output_.parent_path().empty() ? fs::path(".") : output_.parent_path());
    });
    profile_ = profile::Profile(output_.string());
    lowest_.assign(static_cast<std::size_t>(job.pp_degree), 0.0);
    rises_.assign(lowest_.size(), 0);
  }

  Round next() override {
    Round r;
    r.done = done_;
    r.stages = uniform_plans(sched_, done_ ? max_clock_ : clocks_[measured_]);
    return r;
  }

  void observe(const std::vector<StageResult>& results) override {
    if (done_) throw Error(context_ + ": results after the final round");
    auto windows = summarize_all(context_, results, sched_, skip_);
    if (measured_ == 0) blocking_power_w_ = blocking_power(windows);
    try {
      record(windows, clocks_[measured_]);
    } catch (const Error& e) {
      throw Error(context_ + ": " + e.what());
    }
    ++measured_;
    if (past_minimum() || measured_ == clocks_.size()) finish();
  }

  nlohmann::json status() const override {
    return {{"frequency", done_ ? max_clock_ : clocks_[measured_]},
            {"measured", measured_},
            {"output", output_.string()},
            {"blocking_power_w",
             blocking_power_w_ ? nlohmann::json(*blocking_power_w_) : nlohmann::json(nullptr)},
            {"state", done_ ? "done" : "profiling"}};
  }

 private:
  // Adds the clock's rows to the profile and tracks each stage's energy against its lowest.
  void record(const std::vector<StageWindow>& windows, int mhz) {
    for (std::size_t s = 0; s < windows.size(); ++s) {
      double energy = 0.0;
      for (const auto& [name, mean] : windows[s].instructions) {
        profile_.add(static_cast<int>(s), name, {mhz, mean.time_s, mean.energy_j, 0});
        energy += mean.energy_j;
      }
      if (measured_ == 0 || energy < lowest_[s]) {
        lowest_[s] = energy;
        rises_[s] = 0;
      } else {
        ++rises_[s];
      }
    }
  }

  bool past_minimum() const {
    return std::all_of(rises_.begin(), rises_.end(), [&](int n) { return n >= patience_; });
  }

  void finish() {
    try {
      profile_.validate();
      std::ostringstream csv;
      profile::write_profile_csv(profile_, csv);
      write_file_atomic(output_, csv.str());
      if (blocking_power_w_) {
        std::ostringstream text;
        text.precision(17);
        text << *blocking_power_w_ << "\n";
        write_file_atomic(output_.string() + ".blocking_power", text.str());
      }
    } catch (const Error& e) {
      throw Error(context_ + ": " + e.what());
    }
    done_ = true;
  }

  std::string context_;
  schedule::Schedule sched_;
  int max_clock_ = 0;
  std::vector<int> clocks_;  // to sweep, highest first
  int patience_ = 3;
  std::size_t skip_ = 1;
  fs::path output_;
  profile::Profile profile_;
  std::vector<double> lowest_;  // per stage: lowest energy so far
  std::vector<int> rises_;      // per stage: clocks since that lowest
  std::size_t measured_ = 0;
  std::optional<double> blocking_power_w_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Scheduler> make_profiler(const JobSpec& job) {
  return std::make_unique<Profiler>(job);
}

}  // namespace perseus::server::schedulers
