// Pipeline schedules as data (architecture sections 4 and 10): for each rank (GPU), the ordered
// list of actions (stage, kind, microbatch) it runs in one training iteration, and the rank that
// holds each stage. A rank may hold several stages (interleaved and V-shaped schedules). This
// header has the types, the notation and the classic one-stage-per-rank schedules: synchronous
// 1F1B (DeepSpeed ordering), 1F1B with extra warm-up forwards (EnvPipe's envelope) and GPipe;
// generators.hpp has the multi-stage ones and make_schedule() dispatches on a name.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace perseus::schedule {

// Action kinds. A stage's backward is either one kBackward or a kBackwardInput (gradient with
// respect to the stage's input, which the previous stage waits for) and a kBackwardWeight
// (gradient of its weights, which nothing else waits for) of the same microbatch.
enum class InstructionType { kForward, kBackward, kBackwardInput, kBackwardWeight };
inline constexpr int kNumInstructionTypes = 4;

// Profile/plan name of an instruction type ("forward", "backward", "backward_input",
// "backward_weight").
const std::string& type_name(InstructionType type);
// Parses a type name; throws perseus::Error naming the unknown name.
InstructionType parse_type(const std::string& name);
// PyTorch's one-letter code of a kind: F, B, I, W.
char type_letter(InstructionType type);
// The kind whose letter is `letter`, or none.
std::optional<InstructionType> type_of_letter(char letter);

// One item of a rank's order: an action, or torch's overlapped pair (OVERLAP_F_B: a forward and
// a backward or backward-input of the rank's stages, issued together, run one after the other).
// A pair is one instruction to plan: it runs under one clock, takes both actions' time and
// energy, and what either action sends leaves once both are done (torch sends after the pair).
struct Instruction {
  InstructionType type;
  int microbatch;
  int stage = 0;  // pipeline stage (a virtual stage is a stage)
  // A pair's second action: its stage (-1: no pair), kind and microbatch.
  int overlapped_stage = -1;
  InstructionType overlapped_type = InstructionType::kBackward;
  int overlapped_microbatch = -1;

  bool overlapped() const { return overlapped_stage >= 0; }
};

// The actions an item runs, in order: itself, or a pair's two.
std::vector<Instruction> actions_of(const Instruction& item);
// The pair of the actions `first` and `second`, run in that order.
Instruction overlapped_pair(const Instruction& first, const Instruction& second);

// PyTorch's notation of an item: stage, kind letter, microbatch ("0F0", "3I1", "2W0"); a pair as
// torch writes it, "(0F3;7B1)OVERLAP_F_B".
std::string action_name(const Instruction& action);

struct Schedule {
  std::string name;  // "1f1b", "interleaved-1f1b", "envelope:e0,...,eS-1", a file's name, ...
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<int> stage_rank;                  // rank that runs each stage
  std::vector<std::vector<Instruction>> ranks;  // per rank, its actions in execution order

  int num_ranks() const { return static_cast<int>(ranks.size()); }
  int stages_per_rank() const { return ranks.empty() ? 0 : num_stages / num_ranks(); }
  std::size_t num_instructions() const;  // actions: a pair counts two
  // Whether every rank holds exactly one stage, stage r on rank r (the classic schedules; the
  // ones Zeus's pair-list plan format and EnvPipe can describe).
  bool one_stage_per_rank() const;
  // The stages rank `rank` holds, ascending.
  std::vector<int> stages_of(int rank) const;
};

// Synchronous 1F1B: stage s runs min(S - s, M) warm-up forwards, alternates B/F, then drains.
Schedule make_1f1b(int num_stages, int num_microbatches);
// 1F1B where stage s runs min(S - s + extra_warmup[s], M) warm-up forwards, then alternates B/F,
// then drains; named "envelope:e0,e1,...". Throws perseus::Error when extra_warmup does not have
// one non-negative count per stage, or when a stage would run more warm-up forwards than the
// stage before it (the schedule would deadlock).
Schedule make_1f1b_warmup(int num_stages, int num_microbatches,
                          const std::vector<int>& extra_warmup);
// GPipe: all forwards, then all backwards, both in microbatch order (as PyTorch runs it).
Schedule make_gpipe(int num_stages, int num_microbatches);
// The schedule whose stages run exactly these instruction types in this order (a plan file that
// names instructions but not microbatches, such as Zeus's): the microbatch count is stage 0's
// number of forwards; 1f1b is tried first, then gpipe, then the envelope schedule whose warm-up
// counts the stages show. Types alone do not tell microbatch order, so an order that more than one
// schedule produces is taken as the first of these. Throws perseus::Error naming the first stage
// that none of them explains. Linear in the number of instructions.
Schedule identify_schedule(const std::vector<std::vector<InstructionType>>& types);

// Checks sizes shared by every generator; throws perseus::Error naming the bad one.
void check_sizes(int num_stages, int num_microbatches);
// The most (stage, microbatch) pairs a schedule may hold on one rank (up to 3 instructions
// each: F, I, W, about 30 bytes each as a served schedule, within the 4 MiB a client reads), and
// in all: a server holds a job's plans a few times over (about 160 bytes a pair while it runs,
// 500 while it makes and stores a round), so 2^18 pairs (64 stages of 4096 microbatches, far
// beyond any pipeline trained) cost a job about 40 MB, 130 MB at its peak.
inline constexpr long long kMaxPairsPerRank = 32768;
inline constexpr long long kMaxPairs = 1LL << 18;
// Refuses (perseus::Error, naming the microbatches) a schedule of `num_stages` stages,
// `stages_per_rank` on each rank, and `num_microbatches` beyond those bounds, before it is built.
void check_schedule_size(int num_stages, int stages_per_rank, int num_microbatches);
// The same for R ranks of V stages: all positive, and R * V fits in an int.
void check_rank_sizes(int num_ranks, int stages_per_rank, int num_microbatches);
// A schedule with `num_ranks` empty action lists and stage s on rank stage_rank[s].
Schedule empty_schedule(const std::string& name, int num_microbatches, std::vector<int> stage_rank,
                        int num_ranks);
// An empty looped schedule: R * V stages, stage s on rank s mod R (checked by check_rank_sizes).
Schedule looped_schedule(const std::string& name, int num_ranks, int stages_per_rank,
                         int num_microbatches);

}  // namespace perseus::schedule
