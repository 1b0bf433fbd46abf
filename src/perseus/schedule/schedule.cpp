#include "perseus/schedule/schedule.hpp"

#include <algorithm>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

const std::string kForward = "forward";
const std::string kBackward = "backward";
const std::string kEnvelope = "envelope";

void check_sizes(int num_stages, int num_microbatches) {
  if (num_stages <= 0)
    throw Error("number of stages must be positive, got " + std::to_string(num_stages));
  if (num_microbatches <= 0) {
    throw Error("number of microbatches must be positive, got " + std::to_string(num_microbatches));
  }
}

Schedule empty_schedule(const std::string& name, int num_stages, int num_microbatches) {
  check_sizes(num_stages, num_microbatches);
  Schedule s{name, num_stages, num_microbatches, {}};
  s.stages.resize(num_stages);
  for (auto& stage : s.stages) stage.reserve(2 * num_microbatches);
  return s;
}

// 1F1B order of one stage: `warmup` forwards, then B/F alternating, then the remaining backwards.
void fill_1f1b(std::vector<Instruction>& list, int warmup, int num_microbatches) {
  warmup = std::min(warmup, num_microbatches);
  int next_f = 0;
  int next_b = 0;
  for (; next_f < warmup; ++next_f) list.push_back({InstructionType::kForward, next_f});
  while (next_b < num_microbatches) {
    list.push_back({InstructionType::kBackward, next_b++});
    if (next_f < num_microbatches) list.push_back({InstructionType::kForward, next_f++});
  }
}

// The counts of "envelope:e0,...,eS-1": S comma-separated non-negative integers.
std::vector<int> parse_envelope_counts(const std::string& name, int num_stages) {
  std::vector<int> counts;
  std::size_t begin = kEnvelope.size() + 1;
  while (true) {
    std::size_t end = std::min(name.find(',', begin), name.size());
    std::string token = name.substr(begin, end - begin);
    bool digits =
        !token.empty() && token.size() <= 9 &&
        std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      throw Error("schedule '" + name + "': warm-up count '" + token +
                  "' is not a non-negative integer");
    }
    counts.push_back(std::stoi(token));
    if (end == name.size()) break;
    begin = end + 1;
  }
  if (counts.size() != static_cast<std::size_t>(num_stages)) {
    throw Error("schedule '" + name + "' has " + std::to_string(counts.size()) +
                " warm-up counts but the pipeline has " + std::to_string(num_stages) + " stages");
  }
  return counts;
}

// Whether every stage of `s` runs the instruction types of `types` in the same order; else the
// first stage that differs (or -1 when all agree).
int first_differing_stage(const Schedule& s,
                          const std::vector<std::vector<InstructionType>>& types) {
  for (std::size_t st = 0; st < types.size(); ++st) {
    const auto& got = types[st];
    const auto& want = s.stages[st];
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

const std::string& type_name(InstructionType type) {
  return type == InstructionType::kForward ? kForward : kBackward;
}

InstructionType parse_type(const std::string& name) {
  if (name == kForward) return InstructionType::kForward;
  if (name == kBackward) return InstructionType::kBackward;
  throw Error("unknown instruction type '" + name + "' (expected forward or backward)");
}

std::size_t Schedule::num_instructions() const {
  std::size_t n = 0;
  for (const auto& stage : stages) n += stage.size();
  return n;
}

Schedule make_1f1b(int num_stages, int num_microbatches) {
  Schedule s = empty_schedule("1f1b", num_stages, num_microbatches);
  for (int stage = 0; stage < num_stages; ++stage) {
    fill_1f1b(s.stages[stage], num_stages - stage, num_microbatches);
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
  Schedule sched = empty_schedule(name, num_stages, num_microbatches);
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
    fill_1f1b(sched.stages[s], warmup, num_microbatches);
    previous = warmup;
  }
  return sched;
}

Schedule make_gpipe(int num_stages, int num_microbatches) {
  Schedule s = empty_schedule("gpipe", num_stages, num_microbatches);
  for (auto& list : s.stages) {
    for (int j = 0; j < num_microbatches; ++j) list.push_back({InstructionType::kForward, j});
    for (int j = num_microbatches - 1; j >= 0; --j) list.push_back({InstructionType::kBackward, j});
  }
  return s;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"1f1b", "gpipe", kEnvelope};
  return names;
}

Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches) {
  if (name == "1f1b") return make_1f1b(num_stages, num_microbatches);
  if (name == "gpipe") return make_gpipe(num_stages, num_microbatches);
  if (name == kEnvelope) {
    throw Error(
        "the envelope schedule needs a profile to compute its warm-up counts (use "
        "`perseus plan --schedule envelope`, which resolves it, or name the counts: "
        "envelope:e0,...,eS-1)");
  }
  if (name.rfind(kEnvelope + ":", 0) == 0) {
    check_sizes(num_stages, num_microbatches);
    return make_1f1b_warmup(num_stages, num_microbatches, parse_envelope_counts(name, num_stages));
  }
  throw Error("unknown schedule '" + name +
              "' (expected 1f1b, gpipe, envelope or envelope:e0,...,eS-1)");
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
