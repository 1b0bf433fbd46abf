// Pipeline schedules: for each stage, the ordered list of instructions it runs in one training
// iteration (architecture section 4). Synchronous 1F1B (DeepSpeed ordering), 1F1B with extra
// warm-up forwards per stage (EnvPipe's envelope schedule) and GPipe.
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
  std::string name;  // "1f1b", "gpipe" or "envelope:e0,...,eS-1"
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<std::vector<Instruction>> stages;  // per stage, in execution order

  std::size_t num_instructions() const;
};

// Synchronous 1F1B: stage s runs min(S - s, M) warm-up forwards, alternates B/F, then drains.
Schedule make_1f1b(int num_stages, int num_microbatches);
// 1F1B where stage s runs min(S - s + extra_warmup[s], M) warm-up forwards, then alternates B/F,
// then drains; named "envelope:e0,e1,...". Throws perseus::Error when extra_warmup does not have
// one non-negative count per stage, or when a stage would run more warm-up forwards than the
// stage before it (the schedule would deadlock).
Schedule make_1f1b_warmup(int num_stages, int num_microbatches,
                          const std::vector<int>& extra_warmup);
// GPipe: all forwards, then all backwards in reverse microbatch order.
Schedule make_gpipe(int num_stages, int num_microbatches);
// By name: "1f1b", "gpipe", or "envelope:e0,...,eS-1" (make_1f1b_warmup with those counts).
// Throws perseus::Error for unknown or malformed names and non-positive sizes; the plain name
// "envelope" needs a profile to compute its counts (baselines::envelope_schedule).
Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches);
// The schedule whose stages run exactly these instruction types in this order (a plan file that
// names instructions but not microbatches, such as Zeus's): the microbatch count is stage 0's
// number of forwards; 1f1b is tried first, then gpipe, then the envelope schedule whose warm-up
// counts the stages show. Types alone do not tell microbatch order, so an order that more than one
// schedule produces is taken as the first of these. Throws perseus::Error naming the first stage
// that none of them explains. Linear in the number of instructions.
Schedule identify_schedule(const std::vector<std::vector<InstructionType>>& types);
// Names accepted by make_schedule and the CLI ("envelope" standing for "envelope:e0,...").
const std::vector<std::string>& schedule_names();

}  // namespace perseus::schedule
