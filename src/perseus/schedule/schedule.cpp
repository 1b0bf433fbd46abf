#include "perseus/schedule/schedule.hpp"

#include <algorithm>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

const std::string kForward = "forward";
const std::string kBackward = "backward";

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
    auto& list = s.stages[stage];
    int warmup = std::min(num_stages - stage, num_microbatches);
    int next_f = 0;
    int next_b = 0;
    for (; next_f < warmup; ++next_f) list.push_back({InstructionType::kForward, next_f});
    while (next_b < num_microbatches) {
      list.push_back({InstructionType::kBackward, next_b++});
      if (next_f < num_microbatches) list.push_back({InstructionType::kForward, next_f++});
    }
  }
  return s;
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
  static const std::vector<std::string> names = {"1f1b", "gpipe"};
  return names;
}

Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches) {
  if (name == "1f1b") return make_1f1b(num_stages, num_microbatches);
  if (name == "gpipe") return make_gpipe(num_stages, num_microbatches);
  throw Error("unknown schedule '" + name + "' (expected 1f1b or gpipe)");
}

}  // namespace perseus::schedule
