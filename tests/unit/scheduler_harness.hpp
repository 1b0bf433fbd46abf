// Shared by the scheduler tests (schedulers_test.cpp and scheduler_*_test.cpp): a job on
// synthetic A100 GPUs, instruction costs from a profile, the results clients would report for a
// round, and helpers to look at the plans a scheduler serves.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/util/files.hpp"
#include "perseus/wire/protocol.hpp"
#include "test_support.hpp"

namespace perseus::server::harness {

namespace fs = std::filesystem;
using nlohmann::json;

inline const profile::GpuModel& a100() {
  return profile::gpu_model("a100");
}

inline const profile::Profile& a100_profile() {
  static const profile::Profile p = profile::synthesize_profile(a100(), profile::default_model(4));
  return p;
}

inline JobSpec job_with(json args, int pp = 4, int dp = 1) {
  JobSpec job;
  job.job_id = "job";
  job.pp_degree = pp;
  job.dp_degree = dp;
  job.available_frequencies = a100().frequencies();
  job.args = std::move(args);
  return job;
}

// Time and energy of one occurrence of an instruction run under a stage plan at `mhz`.
using CostFn = std::function<std::pair<double, double>(int stage, const std::string& instruction,
                                                       int mhz, std::optional<double> limit)>;

// Costs from a profile; an instruction labelled with its stage ("forward@5", a GPU that runs
// several stages) costs that stage's row, a bare one the row of the GPU's own stage.
inline CostFn from_profile(const profile::Profile& prof) {
  return [&prof](int gpu, const std::string& instruction, int mhz, std::optional<double>) {
    auto [kind, stage] = wire::parse_instruction_label(instruction);
    const auto& m = prof.at(stage < 0 ? gpu : stage, kind, mhz);
    return std::make_pair(m.time_s, m.energy_j);
  };
}

struct SynthOptions {
  int iterations = 3;
  double idle_s = 0.02;        // every stage waits this long after the slowest stage's work
  double blocking_w = 83.64;   // ... drawing this power, as does every stage that finishes early
  double warmup_factor = 1.0;  // iteration 0's measurements are scaled by this (a warm-up)
};

// What the clients would report for `round`: every stage runs its plan; the iteration lasts as
// long as the busiest stage plus idle_s, and every stage blocks for the rest at blocking_w.
inline std::vector<StageResult> results_of(const Round& round, const CostFn& cost,
                                           const SynthOptions& o = {}) {
  std::vector<StageResult> out(round.stages.size());
  std::vector<double> busy(round.stages.size(), 0.0), busy_energy(round.stages.size(), 0.0);
  for (std::size_t s = 0; s < round.stages.size(); ++s) {
    const StagePlan& plan = round.stages[s];
    for (int k = 0; k < o.iterations; ++k) {
      double scale = k == 0 ? o.warmup_factor : 1.0;
      for (const auto& [name, mhz] : plan.frequencies) {
        auto [t, e] = cost(static_cast<int>(s), name, mhz, plan.power_limit_w);
        out[s].time_breakdown[name].resize(static_cast<std::size_t>(o.iterations));
        out[s].energy_breakdown[name].resize(static_cast<std::size_t>(o.iterations));
        out[s].time_breakdown[name][k].push_back(t * scale);
        out[s].energy_breakdown[name][k].push_back(e * scale);
        if (k == 0) {
          busy[s] += t;
          busy_energy[s] += e;
        }
      }
    }
  }
  double iteration = *std::max_element(busy.begin(), busy.end()) + o.idle_s;
  for (std::size_t s = 0; s < out.size(); ++s) {
    for (int k = 0; k < o.iterations; ++k) {
      double scale = k == 0 ? o.warmup_factor : 1.0;
      out[s].iter_time.push_back(iteration * scale);
      out[s].iter_energy.push_back((busy_energy[s] + o.blocking_w * (iteration - busy[s])) * scale);
    }
  }
  return out;
}

// Per stage, the clocks of a round's plans.
inline plan::FrequencyPlan clocks_of(const std::vector<StagePlan>& stages) {
  plan::FrequencyPlan out;
  for (const auto& st : stages) {
    out.emplace_back();
    for (const auto& [name, mhz] : st.frequencies) out.back().push_back(mhz);
  }
  return out;
}

// Per GPU, the instruction labels of the schedule, in order: the kind, with the stage when a GPU
// runs several.
inline std::vector<std::vector<std::string>> names_of(const schedule::Schedule& sched) {
  std::vector<std::vector<std::string>> out;
  for (const auto& rank : sched.ranks) {
    out.emplace_back();
    for (const auto& inst : rank) {
      out.back().push_back(wire::instruction_label(schedule::type_name(inst.type),
                                                   sched.one_stage_per_rank() ? -1 : inst.stage));
    }
  }
  return out;
}

inline std::vector<std::vector<std::string>> names_of(const std::vector<StagePlan>& stages) {
  std::vector<std::vector<std::string>> out;
  for (const auto& st : stages) {
    out.emplace_back();
    for (const auto& [name, mhz] : st.frequencies) out.back().push_back(name);
  }
  return out;
}

inline bool all_at(const std::vector<StagePlan>& stages, int mhz) {
  for (const auto& st : stages) {
    for (const auto& [name, f] : st.frequencies) {
      if (f != mhz) return false;
    }
  }
  return true;
}

// A plan on a 4-stage 1F1B schedule with clocks taken from the available list.
inline plan::FrequencyPlan mixed_plan(const schedule::Schedule& sched, int offset) {
  const auto clocks = a100().frequencies();
  plan::FrequencyPlan p(sched.ranks.size());
  for (std::size_t s = 0; s < sched.ranks.size(); ++s) {
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      p[s].push_back(clocks[(s + i + static_cast<std::size_t>(offset)) % 10]);
    }
  }
  return p;
}

inline void write_json_plan(const fs::path& path, const schedule::Schedule& sched,
                            const plan::FrequencyPlan& clocks) {
  plan::Plan p;
  p.schedule = sched.name;
  p.num_stages = sched.num_stages;
  p.num_microbatches = sched.num_microbatches;
  p.frequencies = clocks;
  write_file_atomic(path, plan::plan_to_json(p, sched));
}

inline void write_py_plan(const fs::path& path, const plan::FrequencyPlan& clocks) {
  write_file_atomic(path, plan::plan_to_python_list(clocks, "test plan"));
}

// Runs a scheduler to its final round, feeding it results; returns the rounds it served.
inline std::vector<Round> run_to_end(Scheduler& s, const CostFn& cost, const SynthOptions& o = {}) {
  std::vector<Round> rounds;
  for (int guard = 0; guard < 1000; ++guard) {
    rounds.push_back(s.next());
    if (rounds.back().done) return rounds;
    s.observe(results_of(rounds.back(), cost, o));
  }
  ADD_FAILURE() << "no final round after 1000 rounds";
  return rounds;
}

}  // namespace perseus::server::harness
