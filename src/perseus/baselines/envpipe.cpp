#include "perseus/baselines/envpipe.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "perseus/baselines/common.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/util/error.hpp"

namespace perseus::baselines {

namespace {

using profile::Measurement;
using schedule::InstructionType;

// Profiled rows of each (stage, type), sorted by increasing clock (the steps a clock moves by).
class Ladders {
 public:
  explicit Ladders(const profile::Profile& profile) : profile_(profile) {}

  const std::vector<Measurement>& of(int stage, InstructionType type) {
    auto [it, fresh] = ladders_.try_emplace({stage, type});
    if (fresh) {
      it->second = rows_of(profile_, stage, type);
      std::sort(it->second.begin(), it->second.end(),
                [](const Measurement& a, const Measurement& b) {
                  return a.frequency_mhz < b.frequency_mhz;
                });
    }
    return it->second;
  }

 private:
  const profile::Profile& profile_;
  std::map<std::pair<int, InstructionType>, std::vector<Measurement>> ladders_;
};

// One instruction's current step on its ladder.
struct Rung {
  const std::vector<Measurement>* ladder = nullptr;
  int level = 0;
  bool envelope = false;

  int top() const { return static_cast<int>(ladder->size()) - 1; }
  bool at_max() const { return level == top(); }
  const Measurement& row() const { return (*ladder)[static_cast<std::size_t>(level)]; }
};

bool in_envelope(const schedule::DagNode& node, int num_stages, int num_microbatches) {
  const auto& inst = node.instruction;
  return node.stage() == num_stages - 1 ||
         (inst.type == InstructionType::kForward && inst.microbatch == 0) ||
         (inst.type == InstructionType::kBackward && inst.microbatch == num_microbatches - 1);
}

// The clocks of every instruction and the raising steps of both policies.
class EnvPipeSearch {
 public:
  EnvPipeSearch(const profile::Profile& profile, const schedule::Schedule& schedule)
      : ladders_(profile), schedule_(schedule), dag_(schedule) {
    rungs_.resize(static_cast<std::size_t>(dag_.num_nodes()));
    for (int v = 1; v < dag_.sink(); ++v) {
      const auto& node = dag_.node(v);
      Rung& r = rungs_[v];
      r.ladder = &ladders_.of(node.stage(), node.instruction.type);
      r.envelope = in_envelope(node, schedule.num_stages, schedule.num_microbatches);
      r.level =
          r.envelope ? r.top() : static_cast<int>(&energy_optimal(*r.ladder) - r.ladder->data());
    }
  }

  const schedule::Dag& dag() const { return dag_; }
  const Rung& rung(int node) const { return rungs_[node]; }

  // Every instruction can be raised at most (clocks - 1) times, and each iteration raises one.
  long iteration_cap() const {
    long cap = 1;
    for (int v = 1; v < dag_.sink(); ++v) cap += rungs_[v].top();
    return cap;
  }

  std::vector<int> critical_path() const {
    std::vector<double> duration(rungs_.size(), 0.0);
    for (int v = 1; v < dag_.sink(); ++v) duration[v] = rungs_[v].row().time_s;
    return schedule::critical_path(dag_, duration);
  }

  // Walking back from the end of the path, the first instruction below max goes up 3 steps.
  bool raise_greedy(const std::vector<int>& path) {
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      Rung& r = rungs_[*it];
      if (r.at_max()) continue;
      r.level = std::min(r.level + 3, r.top());
      return true;
    }
    return false;
  }

  // Every path instruction at the path's lowest clock (among those below max) goes up one step.
  bool raise_balanced(const std::vector<int>& path) {
    int lowest = INT_MAX;
    for (int v : path) {
      if (!rungs_[v].at_max()) lowest = std::min(lowest, rungs_[v].row().frequency_mhz);
    }
    if (lowest == INT_MAX) return false;
    for (int v : path) {
      Rung& r = rungs_[v];
      if (!r.at_max() && r.row().frequency_mhz == lowest) ++r.level;
    }
    return true;
  }

  plan::FrequencyPlan plan() const {
    plan::FrequencyPlan plan(schedule_.ranks.size());
    for (std::size_t r = 0; r < plan.size(); ++r) plan[r].resize(schedule_.ranks[r].size());
    for (int v = 1; v < dag_.sink(); ++v) {
      const auto& node = dag_.node(v);
      plan[node.rank][node.position] = rungs_[v].row().frequency_mhz;
    }
    return plan;
  }

  // Compute time of one microbatch (forward + backward) on `stage` at max clock.
  double max_clock_compute_time(int stage) {
    return ladders_.of(stage, InstructionType::kForward).back().time_s +
           ladders_.of(stage, InstructionType::kBackward).back().time_s;
  }

 private:
  Ladders ladders_;
  const schedule::Schedule& schedule_;
  schedule::Dag dag_;
  std::vector<Rung> rungs_;
};

std::string describe(const schedule::DagNode& node) {
  return "stage " + std::to_string(node.stage()) + " (" +
         schedule::type_name(node.instruction.type) + " of microbatch " +
         std::to_string(node.instruction.microbatch) + ")";
}

// "; stage h is heavier than the last stage (...)" when some stage outweighs the last one.
std::string heavier_stage_note(EnvPipeSearch& search, int num_stages) {
  int last = num_stages - 1;
  int heaviest = last;
  for (int s = 0; s < num_stages; ++s) {
    if (search.max_clock_compute_time(s) > search.max_clock_compute_time(heaviest)) heaviest = s;
  }
  if (heaviest == last) return "";
  char note[200];
  std::snprintf(note, sizeof note,
                "; stage %d is heavier than the last stage (forward + backward %.4f s vs %.4f s "
                "at max clock)",
                heaviest, search.max_clock_compute_time(heaviest),
                search.max_clock_compute_time(last));
  return note;
}

}  // namespace

EnvPipePolicy parse_envpipe_policy(const std::string& name) {
  if (name == "greedy") return EnvPipePolicy::kGreedy;
  if (name == "balanced") return EnvPipePolicy::kBalanced;
  throw Error("unknown EnvPipe policy '" + name + "' (expected greedy or balanced)");
}

bool envpipe_applies(const schedule::Schedule& schedule) {
  return schedule.one_stage_per_rank();
}

EnvPipeResult envpipe(const profile::Profile& profile, const schedule::Schedule& schedule,
                      double blocking_power_w, EnvPipePolicy policy) {
  if (!envpipe_applies(schedule)) {
    throw Error("EnvPipe does not apply to the " + schedule.name +
                " schedule: its envelope is defined for one stage per GPU (1f1b, gpipe, "
                "envelope), not for interleaved or V-shaped schedules");
  }
  check_stages(profile, schedule.num_stages);
  EnvPipeSearch search(profile, schedule);
  const long cap = search.iteration_cap();
  EnvPipeResult result;
  while (true) {
    std::vector<int> path = search.critical_path();
    auto off =
        std::find_if(path.begin(), path.end(), [&](int v) { return !search.rung(v).envelope; });
    if (off == path.end()) {
      result.envelope_reached = true;
      result.stop_reason = "the critical path lies on the outer envelope after " +
                           std::to_string(result.iterations) + " clock raises";
      break;
    }
    const std::string where = describe(search.dag().node(*off));
    if (result.iterations >= cap) {
      result.stop_reason = "stopped at the iteration cap (" + std::to_string(cap) +
                           ") with the critical path still leaving the envelope at " + where;
      break;
    }
    bool raised =
        policy == EnvPipePolicy::kGreedy ? search.raise_greedy(path) : search.raise_balanced(path);
    if (!raised) {
      result.stop_reason = "envelope not reached: the critical path still leaves the envelope at " +
                           where + " with every instruction on it at max clock" +
                           heavier_stage_note(search, schedule.num_stages);
      break;
    }
    ++result.iterations;
  }
  result.plan = search.plan();
  result.evaluation = plan::evaluate(profile, schedule, result.plan, blocking_power_w);
  return result;
}

std::vector<int> envelope_warmup_counts(const profile::Profile& profile, int num_stages,
                                        int num_microbatches) {
  check_stages(profile, num_stages);
  const int stages = num_stages, mbs = num_microbatches;
  std::vector<int> counts(static_cast<std::size_t>(stages), 0);
  for (int s = 0; s + 1 < stages; ++s) {
    const auto& backward = rows_of(profile, s, InstructionType::kBackward);
    double t_b = std::max_element(backward.begin(), backward.end(),
                                  [](const Measurement& a, const Measurement& b) {
                                    return a.frequency_mhz < b.frequency_mhz;
                                  })
                     ->time_s;
    double t_f = energy_optimal(rows_of(profile, s, InstructionType::kForward)).time_s;
    double count = std::floor(t_b * (stages - s - 1) / t_f);
    double cap = mbs - (stages - s);  // at most M warm-up forwards in all
    counts[s] = static_cast<int>(std::max(0.0, std::min(count, cap)));
  }
  for (int s = 0; s + 1 < stages; ++s) {
    bool all_in_warmup = stages - s + counts[s] >= mbs;
    if (counts[s] < counts[s + 1] && !all_in_warmup) counts[s + 1] = counts[s];
  }
  return counts;
}

schedule::Schedule envelope_schedule(const profile::Profile& profile, int num_stages,
                                     int num_microbatches) {
  return schedule::make_1f1b_warmup(num_stages, num_microbatches,
                                    envelope_warmup_counts(profile, num_stages, num_microbatches));
}

schedule::Schedule profile_schedule(const std::string& name, const profile::Profile& profile,
                                    int num_stages, int num_microbatches, int stages_per_rank) {
  if (name != "envelope") {
    return schedule::make_schedule(name, num_stages, num_microbatches, stages_per_rank);
  }
  if (stages_per_rank > 1) throw Error("schedule envelope runs one stage per GPU");
  return envelope_schedule(profile, num_stages, num_microbatches);
}

}  // namespace perseus::baselines
