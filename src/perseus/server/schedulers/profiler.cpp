// "profiler" (Zeus's InstructionProfiler): sweeps the available clocks from high to low, with
// every GPU at one clock per round, and averages each instruction's measured time and energy:
// one profile row per (stage, kind, clock), so a schedule with several stages per GPU or a split
// backward profiles every stage's forward, backward or backward_input and backward_weight.
// A clock's round is repeated (at most `max_windows` rounds) until every (stage, instruction)
// energy estimate's standard error, as the clients report it, is at most `target_stderr` of the
// estimate; Perseus clients fit the repeated windows together, so the last window's estimate is
// kept. Clients that report no standard error (Zeus's) get one round per clock. Stops once every
// GPU's energy has been more than `rise_margin` (2 %) above its lowest for `patience` clocks in a
// row (past the minimum of the U-shaped energy curve; clocks the GPU did not reach count for
// nothing) or the clocks run out. The margin is for real GPUs, whose energy is no smooth curve of
// the clock: in the published BLOOM profile of an A40 a GPU's energy wanders up to 1.4 % above its
// lowest at one clock and 0.6 % at three in a row from 1740 to 1020 MHz, where it is lowest (21 %
// below 1740's); without a margin the sweep stopped at 1590 MHz. The published profiler (Zeus's
// InstructionProfiler) never stops early: it sweeps every clock down to 850 MHz. Where a client
// pooled a GPU's instructions beyond 5 % at a clock (the counter saw only their sum), the sweep
// is followed by split-clock rounds (split_rounds.hpp; `split_pooled`, default true) that measure
// each one's energy there as a difference from the GPU's best-measured clock. The profiler
// then writes the profile CSV (with an `energy_stderr` column, relative, and where clients
// report it `energy_pooling_error`, relative: how far a row may be from its own energy where the
// attribution pooled its power with other instructions', apart from the standard error, which
// more windows shrink and this does not, and `energy_pooling_reference_mhz` where that error is
// one offset shared with the row at that clock; from clients that read clocks, `measured_clock_mhz`
// and `clock_held_down`: the SM clock each row really ran at and how often the driver held it
// down), the blocking power measured over every window at the highest clock
// (`<csv>.blocking_power`) and a summary (`<csv>.json`: rounds, split-clock rounds, measured
// seconds, worst error, why it stopped and each GPU's lowest-energy clock, and the rows whose clock
// the GPU did not reach, e.g. held down by its power limit, which the server also logs as a
// warning). The instructions still pooled beyond 5 %, whose own energies the counter could not tell
// apart, get a warning in the log too.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/measurement_error.hpp"
#include "perseus/profile/plausibility.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/server/schedulers/row_clocks.hpp"
#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/server/schedulers/split_rounds.hpp"
#include "perseus/server/schedulers/sweep_stop.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/log.hpp"
#include "perseus/util/text.hpp"

namespace perseus::server::schedulers {

namespace {

namespace fs = std::filesystem;

// How far above its lowest a GPU's energy must be for a clock to count as a rise (relative): three
// times the published A40 profile's wander at three clocks in a row (0.6 %, above), leaving room
// for the measurement's own error (target_stderr, 1 %, per row). Both published profiles then
// stop at 900 MHz, 8 clocks past the A40's minimum (1020 MHz) and 12 past the A100's (1080),
// where the energy is 2.3-3.3 % above it; without a margin the A100 sweep stopped at 1035.
constexpr double kRiseMargin = 0.02;

// Available clocks within the bounds, highest first.
std::vector<int> sweep_clocks(const ArgReader& args, const JobSpec& job) {
  const std::string min_name = args.alias("min_frequency", "minimum_power_state");
  int lo = args.integer(min_name, 1, 1);
  int hi = args.integer("max_frequency", 1, max_clock(args.context(), job));
  if (lo > hi) args.fail(min_name, "must be <= max_frequency");
  std::vector<int> clocks;
  for (int f : job.available_frequencies) {
    if (f >= lo && f <= hi) clocks.push_back(f);
  }
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  if (clocks.empty()) {
    args.fail(min_name, "leaves no available frequency up to max_frequency (" + std::to_string(lo) +
                            ".." + std::to_string(hi) + " MHz)");
  }
  return clocks;
}

// What each GPU drew while blocked, summed over windows: (iteration energy - instruction energy)
// over (iteration time - busy time).
struct Blocked {
  std::vector<double> energy_j, time_s;  // per GPU

  void add(const std::vector<StageWindow>& windows) {
    energy_j.resize(windows.size(), 0.0);
    time_s.resize(windows.size(), 0.0);
    for (std::size_t s = 0; s < windows.size(); ++s) {
      const double idle = windows[s].iter_time_s - windows[s].busy_time_s;
      if (idle <= 0.0) continue;
      energy_j[s] += windows[s].iter_energy_j - windows[s].busy_energy_j;
      time_s[s] += idle;
    }
  }

  // Mean over GPUs of each one's blocked energy / blocked time, leaving out GPUs that never
  // blocked; nullopt when none did.
  std::optional<double> power_w() const {
    double sum = 0.0;
    int count = 0;
    for (std::size_t s = 0; s < time_s.size(); ++s) {
      if (time_s[s] <= 0.0) continue;
      sum += energy_j[s] / time_s[s];
      ++count;
    }
    if (count == 0) return std::nullopt;
    return sum / count;
  }
};

class Profiler : public Scheduler {
 public:
  explicit Profiler(const JobSpec& job) : context_(context_of("profiler")) {
    ArgReader args(
        context_, job.args,
        with_schedule_args({"output", "patience", "rise_margin", "min_frequency", "max_frequency",
                            "skip_iterations", "target_stderr", "max_windows", "min_window",
                            "split_pooled", "minimum_power_state", "warmup_step_ratio"}));
    sched_ = schedule_arg(args, job);
    max_clock_ = max_clock(context_, job);
    clocks_ = sweep_clocks(args, job);
    stop_ = SweepStop(static_cast<std::size_t>(job.pp_degree), args.integer("patience", 1, 3),
                      args.number("rise_margin", non_negative, "a number >= 0", kRiseMargin));
    skip_ = static_cast<std::size_t>(args.integer("skip_iterations", 0, 1));
    if (args.alias("skip_iterations", "warmup_step_ratio") == "warmup_step_ratio") {
      skip_ratio_ = args.number(
          "warmup_step_ratio", [](double v) { return v >= 0.0 && v < 1.0; }, "in [0, 1)");
    }
    target_stderr_ = args.number("target_stderr", positive, "a number > 0", 0.01);
    max_windows_ = args.integer("max_windows", 1, 10);
    windows_ = WindowLength(args);
    split_pooled_ = args.boolean("split_pooled", true);
    output_ = output_path(args, "output", job, args.text("output", "profile.csv"));
    args.naming("output", [&] {
      ensure_writable_dir(output_.parent_path().empty() ? fs::path(".") : output_.parent_path());
    });
    rows_.resize(static_cast<std::size_t>(job.pp_degree));
  }

  Round next() override {
    Round r;
    r.done = done_;
    r.stages = split_ && !done_ ? split_->plans()
                                : uniform_plans(sched_, done_ ? max_clock_ : clocks_[measured_]);
    r.report_every = windows_.report_every();
    return r;
  }

  void observe(const std::vector<StageResult>& results) override {
    if (done_) throw Error(context_ + ": results after the final round");
    auto windows = summarize_all(context_, results, sched_, skipped(results));
    for (const auto& w : windows)
      measured_s_ += w.iter_time_s / static_cast<double>(results.size());
    ++rounds_;
    if (windows_.measure_again(results)) return;  // measure this round again
    if (split_) {
      split_->observe(windows);
      if (split_->done()) finish();
      return;
    }
    if (measured_ == 0) blocked_.add(windows);  // every window at the highest clock
    const double error = worst_relative_stderr(results, windows);
    if (error > target_stderr_ && ++repeats_ < max_windows_) return;  // measure this clock again
    repeats_ = 0;
    const int mhz = clocks_[measured_];
    std::vector<LabelRows> rows;
    try {
      rows = rows_of(windows, results, mhz);
    } catch (const Error& e) {
      throw Error(context_ + ": " + e.what());
    }
    track_descent(rows, mhz);
    for (std::size_t s = 0; s < rows.size(); ++s) rows_[s][mhz] = std::move(rows[s]);
    ++measured_;
    if (!stop_.past_minimum() && measured_ < clocks_.size()) return;
    split_.emplace(sched_, rows_, split_pooled_);
    if (split_->rounds() == 0) finish();  // else split the pooled rows first
  }

  nlohmann::json status() const override {
    const std::optional<double> blocking_w = blocking_power_w();
    return {
        // The clock the sweep measures; none while splitting; the highest once done.
        {"frequency", done_    ? nlohmann::json(max_clock_)
                      : split_ ? nlohmann::json(nullptr)
                               : nlohmann::json(clocks_[measured_])},
        {"measured", measured_},
        {"rounds", rounds_},
        {"split_rounds", split_rounds()},
        {"measured_s", measured_s_},
        {"output", output_.string()},
        {"blocking_power_w", blocking_w ? nlohmann::json(*blocking_w) : nlohmann::json(nullptr)},
        {"clocks_not_reached", row_clocks_.not_reached().size()},
        {"report_every", windows_.status()},
        {"state", done_    ? "done"
                  : split_ ? "splitting"
                           : "profiling"}};
  }

 private:
  // Rounds spent in the split-clock rounds so far.
  std::size_t split_rounds() const { return split_ ? split_->observed() : 0; }

  // Known once the highest clock is measured.
  std::optional<double> blocking_power_w() const {
    return measured_ > 0 ? blocked_.power_w() : std::nullopt;
  }

  // The largest relative standard error of an instruction's energy over the stages; 0 when the
  // clients report none (nothing to wait for).
  static double worst_relative_stderr(const std::vector<StageResult>& results,
                                      const std::vector<StageWindow>& windows) {
    double worst = 0.0;
    for (std::size_t s = 0; s < windows.size(); ++s) {
      for (const auto& [name, mean] : windows[s].instructions) {
        auto it = results[s].energy_stderr.find(name);
        if (it == results[s].energy_stderr.end()) continue;
        worst = std::max(worst, mean.energy_j > 0.0 ? it->second / mean.energy_j : 0.0);
      }
    }
    return worst;
  }

  // The clock's rows per rank, by instruction label; notes the clocks each row ran at.
  std::vector<LabelRows> rows_of(const std::vector<StageWindow>& windows,
                                 const std::vector<StageResult>& results, int mhz) {
    std::vector<LabelRows> rows(windows.size());
    for (std::size_t s = 0; s < windows.size(); ++s) {
      for (const auto& [label, mean] : windows[s].instructions) {
        profile::Measurement& row = rows[s][label];
        row.frequency_mhz = mhz;
        row.time_s = mean.time_s;
        row.energy_j = mean.energy_j;
        row.energy_stderr = relative(results[s].energy_stderr, label, mean.energy_j);
        row.energy_pooling_error = relative(results[s].energy_pooling_error, label, mean.energy_j);
        if (auto c = results[s].clocks.find(label); c != results[s].clocks.end()) {
          row_clocks_.note(row_key(s, label, mhz), c->second);
        }
      }
    }
    return rows;
  }

  // Each GPU's energy at the clock, for where the sweep stops.
  void track_descent(const std::vector<LabelRows>& rows, int mhz) {
    for (std::size_t s = 0; s < rows.size(); ++s) {
      double energy = 0.0;
      bool held_below = false;
      for (const auto& [label, row] : rows[s]) {
        energy += row.energy_j;
        held_below = held_below || row_clocks_.below(row_key(s, label, mhz));
      }
      stop_.add(s, mhz, energy, held_below);
    }
  }

  // The profile of the sweep's rows, split where the split-clock rounds could; what went wrong
  // there is logged.
  profile::Profile profile_of(const SplitRounds& split) const {
    const SplitRounds::Result split_rows = split.result();
    for (const std::string& warning : split_rows.warnings) log::warn(context_ + ": " + warning);
    profile::Profile profile(output_.string());
    const RankRows& rows = split_rows.rows;
    for (std::size_t s = 0; s < rows.size(); ++s) {
      for (const auto& [mhz, labels] : rows[s]) {
        for (const auto& [label, row] : labels) {
          const RowKey key = row_key(s, label, mhz);
          profile.add(std::get<0>(key), std::get<1>(key), row);
        }
      }
    }
    return profile;
  }

  // reported[label] / energy_j, where reported and the energy is positive.
  static std::optional<double> relative(const std::map<std::string, double>& reported,
                                        const std::string& label, double energy_j) {
    auto it = reported.find(label);
    if (it == reported.end() || !(energy_j > 0.0)) return std::nullopt;
    return it->second / energy_j;
  }

  // `<output>.blocking_power`: the measured power, or 0 W (with a warning) when it came out
  // negative, which no GPU draws: the attribution gave the instructions more energy than their
  // iterations drew (e.g. `fit` with idle gaps it cannot identify), and a planner refuses it.
  void write_blocking_power(double watts) const {
    const std::string path = output_.string() + ".blocking_power";
    if (watts < 0.0) {
      log::warn(context_ + ": the measured blocking power is " + number(watts) +
                " W (the instructions were attributed more energy than their iterations drew); " +
                path + " holds 0 W");
    }
    std::ostringstream text;
    text.precision(17);
    text << std::max(0.0, watts) << "\n";
    write_file_atomic(path, text.str());
  }

  // A profile that planners refuse as implausible (a client's unit mistake: a backend's counter
  // in millijoules) is kept as measured, and the server log says so now, naming the row of the
  // written `csv`, not when someone plans with it (also where finish() found it slower at its
  // highest clock: the rows are read back without that check).
  void warn_if_implausible(const std::string& csv) const {
    std::istringstream text(csv);
    try {
      profile::check_plausible(profile::parse_profile_rows(text, output_.string()));
    } catch (const profile::ImplausibleInput& e) {
      log::warn(context_ + ": " + e.what() +
                "; the profile is written as measured, and planners refuse it without "
                "--allow-implausible");
    }
  }

  void finish() {
    try {
      const profile::Profile profile = profile_of(*split_);
      try {
        profile.validate();
      } catch (const profile::SlowerAtHighestClock& e) {
        log::warn(context_ + ": " + e.what() +
                  "; the profile is written as measured and planners refuse it: the "
                  "measurement's noise exceeds the difference the clocks make there (sweep a "
                  "wider clock range, or lower target_stderr for more windows per clock)");
      }
      std::ostringstream csv;
      profile::write_profile_csv(profile, csv, row_clocks_.columns());
      write_file_atomic(output_, csv.str());
      warn_if_implausible(csv.str());
      const profile::MeasurementError error = profile::measurement_error(profile);
      nlohmann::json summary = {
          {"clocks", measured_},
          {"rounds", rounds_},
          {"split_rounds", split_rounds()},
          {"measured_s", measured_s_},
          {"target_stderr", target_stderr_},
          {"worst_stderr", error.standard_error ? error.standard_error->worst : 0.0},
          {"clocks_not_reached", row_clocks_.not_reached()},
          {"report_every", windows_.status()},
          {"stopped", stop_.past_minimum() ? "past the energy minimum" : "last clock"},
          {"lowest_energy_clock_mhz", stop_.lowest_energy_clocks()}};
      write_file_atomic(output_.string() + ".json", summary.dump(2) + "\n");
      if (const auto& below = summary["clocks_not_reached"]; !below.empty()) {
        log::warn(context_ + ": " + std::to_string(below.size()) +
                  " profile rows ran below their clock, the driver holding it down (power limit "
                  "or heat): their time and energy are those of the lower clock (" +
                  output_.string() + ".json, clocks_not_reached)");
      }
      // Instructions whose own energies the counter could not tell apart: said where the
      // operator looks first (perseus plan says it again).
      if (!error.unsplit.empty()) log::warn(context_ + ": " + *profile::describe_pooling(error));
      if (const auto blocking_w = blocking_power_w()) write_blocking_power(*blocking_w);
      log::info(context_ + ": wrote " + output_.string() + ": " + std::to_string(measured_) +
                " clocks in " + std::to_string(rounds_) + " rounds (" +
                std::to_string(split_rounds()) + " of them split-clock; " + num(measured_s_, 1) +
                " s of training), stopped " + stop_.reason());
    } catch (const Error& e) {
      throw Error(context_ + ": " + e.what());
    }
    done_ = true;
  }

  std::string context_;
  schedule::Schedule sched_;
  int max_clock_ = 0;
  std::vector<int> clocks_;  // to sweep, highest first
  std::size_t skip_ = 1;
  std::optional<double> skip_ratio_;  // Zeus's warmup_step_ratio: that share, at least one

  // Iterations of each window left out as warm-up.
  std::size_t skipped(const std::vector<StageResult>& results) const {
    if (!skip_ratio_ || results.empty()) return skip_;
    const auto n = static_cast<double>(results.front().iter_time.size());
    return std::max<std::size_t>(1, static_cast<std::size_t>(n * *skip_ratio_));
  }
  fs::path output_;
  SweepStop stop_;
  std::size_t measured_ = 0;
  Blocked blocked_;  // at the highest clock
  bool done_ = false;
  double target_stderr_ = 0.01;  // relative
  int max_windows_ = 10;         // rounds per clock at most
  WindowLength windows_;
  int repeats_ = 0;  // extra rounds of the current clock so far
  int rounds_ = 0;
  double measured_s_ = 0.0;  // seconds of measured iterations (one pipeline)
  RowClocks row_clocks_;
  RankRows rows_;                     // the sweep's, per rank and clock
  std::optional<SplitRounds> split_;  // after the sweep (split_rounds.hpp)
  bool split_pooled_ = true;          // run them
};

}  // namespace

std::unique_ptr<Scheduler> make_profiler(const JobSpec& job) {
  return std::make_unique<Profiler>(job);
}

}  // namespace perseus::server::schedulers
