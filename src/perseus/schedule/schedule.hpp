// Pipeline schedules: for each stage, the ordered list of instructions it runs in one training
// iteration (DESIGN section 4). Synchronous 1F1B (DeepSpeed ordering) and GPipe.
#pragma once

#include <string>
#include <vector>

namespace perseus::schedule {

enum class InstructionType { kForward, kBackward };

// Profile/plan name of an instruction type ("forward", "backward").
const std::string& type_name(InstructionType type);
// Parses a type name; throws perseus::Error naming the unknown name.
InstructionType parse_type(const std::string& name);

struct Instruction {
  InstructionType type;
  int microbatch;
};

struct Schedule {
  std::string name;  // "1f1b" or "gpipe"
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<std::vector<Instruction>> stages;  // per stage, in execution order

  std::size_t num_instructions() const;
};

// Synchronous 1F1B: stage s runs min(S - s, M) warm-up forwards, alternates B/F, then drains.
Schedule make_1f1b(int num_stages, int num_microbatches);
// GPipe: all forwards, then all backwards in reverse microbatch order.
Schedule make_gpipe(int num_stages, int num_microbatches);
// By name ("1f1b", "gpipe"); throws perseus::Error for unknown names or non-positive sizes.
Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches);
const std::vector<std::string>& schedule_names();

}  // namespace perseus::schedule
