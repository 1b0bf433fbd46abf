// The cases of the frontier solver's brute-force optimality test (optimality_test.cpp): thirteen
// seeded, realistic synthetic profiles on tiny 1F1B pipelines, each with every plan enumerated
// and scored by a fast re-implementation of the evaluation formula (DESIGN section 5), giving
// the exact frontier exact(T).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/options.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::test::optimality {

using perseus::plan::FrequencyPlan;
namespace profile = perseus::profile;
namespace schedule = perseus::schedule;
namespace plan = perseus::plan;

inline constexpr double kUnitTimeS = 0.001;
inline constexpr double kInfinityEnergy = std::numeric_limits<double>::infinity();

struct CaseSpec {
  unsigned seed;
  int stages, microbatches, clocks;
  int clock_step;  // 0: a random subset of a coarse clock list; > 0: 1410, 1410 - step, ...
  const char* schedule = "1f1b";
  int stages_per_rank = 1;

  // Whether the schedule splits backwards (its profile needs input and weight rows).
  bool split() const {
    return std::string(schedule).find("zero-bubble") != std::string::npos ||
           std::string(schedule) == "zbv";
  }
  int actions_per_microbatch() const { return split() ? 3 : 2; }
};

// Enumeration sizes: clocks ^ (2 * stages * microbatches) plans per case.
inline const std::vector<CaseSpec>& case_specs() {
  static const std::vector<CaseSpec> specs = {
      {11, 2, 2, 4, 0},   // 4^8 = 65536
      {12, 3, 2, 3, 0},   // 3^12 = 531441
      {13, 2, 3, 3, 0},   // 3^12
      {14, 2, 2, 4, 0},   //
      {15, 3, 2, 3, 0},   //
      {16, 2, 2, 3, 0},   // 3^8 = 6561
      {17, 2, 2, 4, 0},   //
      {18, 2, 3, 3, 0},   //
      {21, 2, 2, 6, 90},  // 6^8 = 1679616, clocks 1410 .. 960
      {22, 2, 2, 5, 60},  // 5^8 = 390625, clocks 1410 .. 1170
      // 2^18 = 262144. Seeds whose frontier slows instructions down in some steps (a cut that
      // crosses a critical path twice); tiny 1F1B pipelines rarely need that.
      {190, 3, 3, 2, 0},
      {194, 3, 3, 2, 0},
      {236, 3, 3, 2, 0},
      // Multi-stage and split-backward schedules (issue 15): 2^16, 3^12, 2^18 and 3^12 plans.
      {301, 4, 2, 2, 0, "interleaved-1f1b", 2},
      {302, 2, 2, 3, 0, "interleaved-zero-bubble", 1},
      {303, 2, 3, 2, 0, "interleaved-zero-bubble", 1},
      {304, 2, 2, 3, 0, "zbv", 2},
  };
  return specs;
}

// A synthetic GPU: time(f) = w * m * base * (0.2 + 0.8 * fmax / f), power(f) = P_static +
// P_dyn * (f / fmax) * V(f)^2 with V rising linearly in f, energy = power * time; 1% noise on
// both. Stages share the clock set (one GPU type) and differ in weight and power.
inline profile::Profile make_profile(std::mt19937& rng, const CaseSpec& spec, double* p_block) {
  constexpr int kMaxClock = 1410;
  std::vector<int> clocks;
  if (spec.clock_step > 0) {
    for (int i = 0; i < spec.clocks; ++i) clocks.push_back(kMaxClock - i * spec.clock_step);
  } else {
    std::vector<int> pool = {1305, 1200, 1095, 1000, 930, 850};
    std::shuffle(pool.begin(), pool.end(), rng);
    clocks.assign(pool.begin(), pool.begin() + (spec.clocks - 1));
    clocks.push_back(kMaxClock);
    std::sort(clocks.rbegin(), clocks.rend());
  }
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  profile::Profile prof("synthetic optimality profile");
  const double base = uniform(0.045, 0.055);
  for (int s = 0; s < spec.stages; ++s) {
    const double weight = uniform(0.8, 1.3);
    const double p_static = uniform(70.0, 100.0);
    const double p_dyn = uniform(200.0, 280.0);
    std::vector<std::string> types = {"forward", "backward"};
    if (spec.split()) types.insert(types.end(), {"backward_input", "backward_weight"});
    double backward = 0.0, input = 0.0;  // multipliers, drawn in type order
    for (const std::string& type : types) {
      double mult = 1.0;
      if (type == "backward") mult = backward = uniform(1.8, 2.2);
      if (type == "backward_input") mult = input = backward * uniform(0.4, 0.6);
      if (type == "backward_weight") mult = backward - input;
      for (int f : clocks) {
        const double r = static_cast<double>(f) / kMaxClock;
        const double volt = 0.65 + 0.35 * r;
        const double time = weight * mult * base * (0.2 + 0.8 / r) * (1.0 + uniform(-0.01, 0.01));
        const double power = p_static + p_dyn * r * volt * volt;
        const double energy = power * time * (1.0 + uniform(-0.01, 0.01));
        prof.add(s, type, profile::Measurement{f, time, energy, 0});
      }
    }
  }
  *p_block = uniform(75.0, 85.0);
  return prof;
}

// Per DAG node, the profiled (clock, time, energy) of each option, in profile row order.
struct NodeOption {
  int mhz;
  double time, energy;
};

// One case: its profile, schedule and the exact frontier from exhaustive enumeration.
struct Instance {
  CaseSpec spec{};
  profile::Profile prof;
  schedule::Schedule sched;
  double p_block = 0.0;
  std::unique_ptr<schedule::Dag> dag;
  std::vector<std::vector<NodeOption>> options;  // per DAG node (empty for source and sink)
  std::vector<std::vector<int>> preds;           // per DAG node
  std::vector<double> times;                     // evaluated time of every plan, ascending
  std::vector<double> best_energy;               // prefix minimum of energy over `times`
  double fastest_time = 0.0;
  long plans = 0;

  // Evaluation of the plan choosing options[v][choice[v]] at node v (DESIGN section 5).
  std::pair<double, double> score(const std::vector<int>& choice,
                                  std::vector<double>& finish) const {
    double busy = 0.0, energy = 0.0;
    for (int v : dag->topological_order()) {
      double start = 0.0;
      for (int u : preds[v]) start = std::max(start, finish[u]);
      double t = 0.0;
      if (!options[v].empty()) {
        const NodeOption& o = options[v][choice[v]];
        t = o.time;
        busy += t;
        energy += o.energy;
      }
      finish[v] = start + t;
    }
    double time = finish[dag->sink()];
    return {time, energy + p_block * (sched.num_ranks() * time - busy)};
  }

  FrequencyPlan to_plan(const std::vector<int>& choice) const {
    FrequencyPlan out(sched.ranks.size());
    for (std::size_t s = 0; s < out.size(); ++s) out[s].resize(sched.ranks[s].size());
    for (int v = 1; v < dag->sink(); ++v) {
      const auto& node = dag->node(v);
      out[node.rank][node.position] = options[v][choice[v]].mhz;
    }
    return out;
  }

  // Minimum energy over every plan whose evaluated time is <= t.
  double exact(double t) const {
    auto it = std::upper_bound(times.begin(), times.end(), t * (1.0 + 1e-12));
    EXPECT_NE(it, times.begin()) << "no plan is as fast as " << t;
    if (it == times.begin()) return std::nan("");
    return best_energy[static_cast<std::size_t>(it - times.begin()) - 1];
  }
};

inline std::unique_ptr<Instance> build_instance(const CaseSpec& spec) {
  auto in = std::make_unique<Instance>();
  in->spec = spec;
  std::mt19937 rng(spec.seed);
  in->prof = make_profile(rng, spec, &in->p_block);
  in->prof.validate();
  in->sched =
      schedule::make_schedule(spec.schedule, spec.stages, spec.microbatches, spec.stages_per_rank);
  in->dag = std::make_unique<schedule::Dag>(in->sched);
  const schedule::Dag& dag = *in->dag;
  const int n = dag.num_nodes();
  in->options.resize(static_cast<std::size_t>(n));
  in->preds.resize(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    for (int u : dag.predecessors(v)) in->preds[v].push_back(u);
    if (!dag.is_instruction(v)) continue;
    const auto& node = dag.node(v);
    for (const auto& m : in->prof.rows(node.stage(), schedule::type_name(node.instruction.type))) {
      in->options[v].push_back({m.frequency_mhz, m.time_s, m.energy_j});
    }
  }
  // Odometer over every instruction's clock.
  std::vector<std::pair<double, double>> all;
  std::vector<int> choice(static_cast<std::size_t>(n), 0);
  std::vector<double> finish(static_cast<std::size_t>(n), 0.0);
  while (true) {
    all.push_back(in->score(choice, finish));
    int v = 1;
    while (v < dag.sink() && ++choice[v] == static_cast<int>(in->options[v].size())) {
      choice[v++] = 0;
    }
    if (v == dag.sink()) break;
  }
  in->plans = static_cast<long>(all.size());
  std::sort(all.begin(), all.end());
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [t, e] : all) {
    best = std::min(best, e);
    in->times.push_back(t);
    in->best_energy.push_back(best);
  }
  in->fastest_time = in->times.front();
  return in;
}

// Built once per process and shared by the tests below.
inline const Instance& instance(std::size_t i) {
  static std::vector<std::unique_ptr<Instance>> cache(case_specs().size());
  if (!cache[i]) cache[i] = build_instance(case_specs()[i]);
  return *cache[i];
}

inline std::string case_name(const CaseSpec& spec) {
  return "seed " + std::to_string(spec.seed) + " (" + spec.schedule + ", " +
         std::to_string(spec.stages) + " stages, " + std::to_string(spec.microbatches) +
         " microbatches, " + std::to_string(spec.clocks) + " clocks)";
}

// The plan with every instruction at its slowest Pareto-optimal clock (no other clock is both
// faster and cheaper), found independently of the library's filtering.
inline std::vector<int> slowest_pareto_choice(const Instance& in) {
  std::vector<int> choice(in.options.size(), 0);
  for (std::size_t v = 0; v < in.options.size(); ++v) {
    const auto& opts = in.options[v];
    double slowest = -1.0;
    for (std::size_t i = 0; i < opts.size(); ++i) {
      bool dominated = std::any_of(opts.begin(), opts.end(), [&](const NodeOption& o) {
        return o.time < opts[i].time && o.energy < opts[i].energy;
      });
      if (!dominated && opts[i].time > slowest) {
        slowest = opts[i].time;
        choice[v] = static_cast<int>(i);
      }
    }
  }
  return choice;
}

}  // namespace perseus::test::optimality
