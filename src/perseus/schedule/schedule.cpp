#include "perseus/schedule/schedule.hpp"

#include <algorithm>
#include <climits>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

const std::string kEnvelope = "envelope";
const std::string kTypeNames[kNumInstructionTypes] = {"forward", "backward", "backward_input",
                                                      "backward_weight"};
const char kTypeLetters[kNumInstructionTypes] = {'F', 'B', 'I', 'W'};

// A classic schedule: stage s on rank s.
Schedule one_stage_per_rank_schedule(const std::string& name, int num_stages,
                                     int num_microbatches) {
  check_sizes(num_stages, num_microbatches);
  return looped_schedule(name, num_stages, 1, num_microbatches);
}

// 1F1B order of one stage: `warmup` forwards, then B/F alternating, then the remaining backwards.
void fill_1f1b(std::vector<Instruction>& list, int stage, int warmup, int num_microbatches) {
  warmup = std::min(warmup, num_microbatches);
  int next_f = 0;
  int next_b = 0;
  for (; next_f < warmup; ++next_f) list.push_back({InstructionType::kForward, next_f, stage});
  while (next_b < num_microbatches) {
    list.push_back({InstructionType::kBackward, next_b++, stage});
    if (next_f < num_microbatches) list.push_back({InstructionType::kForward, next_f++, stage});
  }
}

// Whether every stage of `s` runs the instruction types of `types` in the same order; else the
// first stage that differs (or -1 when all agree).
int first_differing_stage(const Schedule& s,
                          const std::vector<std::vector<InstructionType>>& types) {
  for (std::size_t st = 0; st < types.size(); ++st) {
    const auto& got = types[st];
    const auto& want = s.ranks[st];
    bool same = got.size() == want.size() &&
                std::equal(got.begin(), got.end(), want.begin(),
                           [](InstructionType t, const Instruction& i) { return t == i.type; });
    if (!same) return static_cast<int>(st);
  }
  return -1;
}

// The extra warm-up forwards of each stage beyond 1F1B's (negative when a stage runs fewer).
std::vector<int> extra_warmups(const std::vector<std::vector<InstructionType>>& types, int m) {
  int num_stages = static_cast<int>(types.size());
  std::vector<int> extra;
  for (int s = 0; s < num_stages; ++s) {
    auto first_backward = std::find(types[s].begin(), types[s].end(), InstructionType::kBackward);
    int warmup = static_cast<int>(first_backward - types[s].begin());
    extra.push_back(warmup - std::min(num_stages - s, m));
  }
  return extra;
}

}  // namespace

void check_schedule_size(int num_stages, int stages_per_rank, int num_microbatches) {
  const long long per_rank = static_cast<long long>(stages_per_rank) * num_microbatches;
  const long long all = static_cast<long long>(num_stages) * num_microbatches;
  if (per_rank > kMaxPairsPerRank) {
    throw Error(std::to_string(num_microbatches) + " microbatches on " +
                std::to_string(stages_per_rank) + " stage(s) per rank are " +
                std::to_string(per_rank) + " (stage, microbatch) pairs per rank, above the " +
                std::to_string(kMaxPairsPerRank) +
                " a schedule may hold (its served form must fit the 4 MiB a client reads); use "
                "fewer microbatches");
  }
  if (all > kMaxPairs) {
    throw Error(std::to_string(num_microbatches) + " microbatches on " +
                std::to_string(num_stages) + " stages are " + std::to_string(all) +
                " (stage, microbatch) pairs, above the " + std::to_string(kMaxPairs) +
                " a schedule may hold; use fewer microbatches or stages");
  }
}

void check_sizes(int num_stages, int num_microbatches) {
  if (num_stages <= 0)
    throw Error("number of stages must be positive, got " + std::to_string(num_stages));
  if (num_microbatches <= 0) {
    throw Error("number of microbatches must be positive, got " + std::to_string(num_microbatches));
  }
}

void check_rank_sizes(int num_ranks, int stages_per_rank, int num_microbatches) {
  if (num_ranks <= 0)
    throw Error("number of ranks must be positive, got " + std::to_string(num_ranks));
  if (stages_per_rank <= 0) {
    throw Error("number of stages per rank must be positive, got " +
                std::to_string(stages_per_rank));
  }
  if (static_cast<long long>(num_ranks) * stages_per_rank > INT_MAX) {
    throw Error(std::to_string(num_ranks) + " ranks with " + std::to_string(stages_per_rank) +
                " stages each are too many stages");
  }
  check_sizes(num_ranks * stages_per_rank, num_microbatches);
}

Schedule empty_schedule(const std::string& name, int num_microbatches, std::vector<int> stage_rank,
                        int num_ranks) {
  Schedule s;
  s.name = name;
  s.num_stages = static_cast<int>(stage_rank.size());
  s.num_microbatches = num_microbatches;
  s.stage_rank = std::move(stage_rank);
  s.ranks.resize(static_cast<std::size_t>(num_ranks));
  std::size_t per_rank = 2 * static_cast<std::size_t>(num_microbatches) *
                         static_cast<std::size_t>(s.num_stages / std::max(num_ranks, 1));
  for (auto& list : s.ranks) list.reserve(per_rank);
  return s;
}

Schedule looped_schedule(const std::string& name, int num_ranks, int stages_per_rank,
                         int num_microbatches) {
  check_rank_sizes(num_ranks, stages_per_rank, num_microbatches);
  std::vector<int> stage_rank(static_cast<std::size_t>(num_ranks * stages_per_rank));
  for (std::size_t s = 0; s < stage_rank.size(); ++s)
    stage_rank[s] = static_cast<int>(s) % num_ranks;
  return empty_schedule(name, num_microbatches, std::move(stage_rank), num_ranks);
}

const std::string& type_name(InstructionType type) {
  return kTypeNames[static_cast<int>(type)];
}

char type_letter(InstructionType type) {
  return kTypeLetters[static_cast<int>(type)];
}

std::optional<InstructionType> type_of_letter(char letter) {
  for (int t = 0; t < kNumInstructionTypes; ++t) {
    if (letter == kTypeLetters[t]) return static_cast<InstructionType>(t);
  }
  return std::nullopt;
}

InstructionType parse_type(const std::string& name) {
  for (int t = 0; t < kNumInstructionTypes; ++t) {
    if (name == kTypeNames[t]) return static_cast<InstructionType>(t);
  }
  throw Error("unknown instruction type '" + name +
              "' (expected forward, backward, backward_input or backward_weight)");
}

std::vector<Instruction> actions_of(const Instruction& item) {
  Instruction first{item.type, item.microbatch, item.stage};
  if (!item.overlapped()) return {first};
  return {first, {item.overlapped_type, item.overlapped_microbatch, item.overlapped_stage}};
}

Instruction overlapped_pair(const Instruction& first, const Instruction& second) {
  Instruction pair{first.type, first.microbatch, first.stage};
  pair.overlapped_stage = second.stage;
  pair.overlapped_type = second.type;
  pair.overlapped_microbatch = second.microbatch;
  return pair;
}

std::string action_name(const Instruction& action) {
  auto one = [](const Instruction& a) {
    return std::to_string(a.stage) + type_letter(a.type) + std::to_string(a.microbatch);
  };
  if (!action.overlapped()) return one(action);
  const std::vector<Instruction> parts = actions_of(action);
  return "(" + one(parts[0]) + ";" + one(parts[1]) + ")OVERLAP_F_B";
}

std::size_t Schedule::num_instructions() const {
  std::size_t n = 0;
  for (const auto& list : ranks) {
    for (const Instruction& item : list) n += item.overlapped() ? 2 : 1;
  }
  return n;
}

bool Schedule::one_stage_per_rank() const {
  if (num_ranks() != num_stages) return false;
  for (int s = 0; s < num_stages; ++s) {
    if (stage_rank[s] != s) return false;
  }
  return true;
}

std::vector<int> Schedule::stages_of(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s) {
    if (stage_rank[static_cast<std::size_t>(s)] == rank) out.push_back(s);
  }
  return out;
}

Schedule make_1f1b(int num_stages, int num_microbatches) {
  Schedule s = one_stage_per_rank_schedule("1f1b", num_stages, num_microbatches);
  for (int stage = 0; stage < num_stages; ++stage) {
    fill_1f1b(s.ranks[stage], stage, num_stages - stage, num_microbatches);
  }
  return s;
}

Schedule make_1f1b_warmup(int num_stages, int num_microbatches,
                          const std::vector<int>& extra_warmup) {
  check_sizes(num_stages, num_microbatches);
  std::string name = kEnvelope + ":";
  if (extra_warmup.size() != static_cast<std::size_t>(num_stages)) {
    throw Error("envelope schedule: " + std::to_string(extra_warmup.size()) +
                " extra warm-up counts for " + std::to_string(num_stages) + " stages");
  }
  for (int s = 0; s < num_stages; ++s) {
    if (extra_warmup[s] < 0) {
      throw Error("envelope schedule: stage " + std::to_string(s) + " extra warm-up count " +
                  std::to_string(extra_warmup[s]) + " is negative");
    }
    name += (s > 0 ? "," : "") + std::to_string(extra_warmup[s]);
  }
  Schedule sched = one_stage_per_rank_schedule(name, num_stages, num_microbatches);
  int previous = num_microbatches;
  for (int s = 0; s < num_stages; ++s) {
    // Compared in 64 bits: a count near INT_MAX must not overflow.
    int warmup = static_cast<int>(std::min<long long>(
        static_cast<long long>(num_stages - s) + extra_warmup[s], num_microbatches));
    if (warmup > previous) {
      throw Error("schedule '" + name + "': stage " + std::to_string(s) + " would run " +
                  std::to_string(warmup) + " warm-up forwards but stage " + std::to_string(s - 1) +
                  " only " + std::to_string(previous) +
                  ", which deadlocks (a count may exceed the previous stage's by at most 1)");
    }
    fill_1f1b(sched.ranks[s], s, warmup, num_microbatches);
    previous = warmup;
  }
  return sched;
}

Schedule make_gpipe(int num_stages, int num_microbatches) {
  Schedule s = one_stage_per_rank_schedule("gpipe", num_stages, num_microbatches);
  for (int stage = 0; stage < num_stages; ++stage) {
    for (auto type : {InstructionType::kForward, InstructionType::kBackward}) {
      for (int j = 0; j < num_microbatches; ++j) s.ranks[stage].push_back({type, j, stage});
    }
  }
  return s;
}

Schedule identify_schedule(const std::vector<std::vector<InstructionType>>& types) {
  if (types.empty()) throw Error("no stages");
  int num_stages = static_cast<int>(types.size());
  int m = static_cast<int>(std::count(types[0].begin(), types[0].end(), InstructionType::kForward));
  if (m == 0) throw Error("stage 0 runs no forward");
  int worst = 0;
  for (auto make : {make_1f1b, make_gpipe}) {
    Schedule s = make(num_stages, m);
    int differs = first_differing_stage(s, types);
    if (differs < 0) return s;
    worst = std::max(worst, differs);
  }
  auto extra = extra_warmups(types, m);
  if (std::all_of(extra.begin(), extra.end(), [](int e) { return e >= 0; })) {
    try {
      Schedule s = make_1f1b_warmup(num_stages, m, extra);
      int differs = first_differing_stage(s, types);
      if (differs < 0) return s;
      worst = std::max(worst, differs);
    } catch (const Error&) {
      // Warm-up counts that deadlock: no envelope schedule runs this order.
    }
  }
  throw Error("stage " + std::to_string(worst) + "'s instruction order is not that of 1f1b, " +
              "gpipe or an envelope schedule with " + std::to_string(m) +
              " microbatches (stage 0's forwards)");
}

}  // namespace perseus::schedule
