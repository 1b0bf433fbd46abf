// The instruction profiler's split-clock rounds, run after its sweep. Where the attribution
// pooled a rank's instructions at a clock (forwards and backwards alternating faster than the
// energy counter refreshes: their sum is measured, not each energy), each pooled instruction but
// one runs once more at that clock while the rank's other instructions run at its reference clock.
// What the rank's instructions spent per iteration in that round, less what the others take at
// the reference clock, is the instruction's energy at the clock; the last one's is the pooled sum
// less the others'. A sum is what pooling leaves exact (a pooled power only moves energy between
// the instructions of its group), so a split energy is as good as the reference row it rests on.
//
// The reference clock of a rank is the one its rows were measured best at: where the counter told
// its instructions apart (no pooling error; on a simulated H100 last stage whose forward draws
// 23 % more than its backward, the clocks below 1275 MHz in one run at 12 microbatches, one clock
// at 8), else its least pooled one. Split energies resting on an unpooled reference carry no
// pooling error. A per-instruction fit can be wrong, though (docs/measuring-energy.md: 6-9 % off
// in 10 % of windows with long histories), and a wrong reference would move every split row: so
// up to kAnchors clocks told apart are split too, and the split rows rest on the medoid of what
// each says (each one's rows less their split energies, the reference's 0): one wrong among three
// is outvoted, and a disagreement beyond kAnchorAgreement standard errors is logged. Resting on a
// pooled reference, each split energy errs by exactly what the instruction's reference row errs
// by, the same joules at every clock (Measurement::energy_pooling_reference_mhz); a plan runs each
// of a rank's instructions once per microbatch, so those errors, which sum to 0 over the
// reference group, cancel in every plan's energy that runs only such rows (plan::saving_error).
//
// Cost: K - 1 rounds per pooled clock of a rank with K pooled instructions, and per clock told
// apart beyond the reference (at most kAnchors - 1), every rank split in the same rounds (a rank
// with fewer runs at its reference clock meanwhile): on the simulated H100 stage above, 57 rounds
// after a sweep of 61-67, about twice the profiling time (bench/saving_error_bench.sh).
// Computing the rows: O(ranks x clocks x K^2). Assumes that an instruction's energy at a clock does
// not depend on the clock of the instruction before it (a plan switches clocks between
// instructions the same way; not measured: the simulated GPU switches at once) and that the GPU
// draws what it drew during the sweep (no drift in between).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/server/schedulers/schedulers.hpp"

namespace perseus::server::schedulers {

// One rank's profile rows at one clock, by instruction label (instruction_label).
using LabelRows = std::map<std::string, profile::Measurement>;
// Per rank, its rows at each measured clock.
using RankRows = std::vector<std::map<int, LabelRows>>;

class SplitRounds {
 public:
  static constexpr std::size_t kAnchors = 3;
  static constexpr double kAnchorAgreement = 3.0;  // standard errors

  // The rounds that split the pooled rows of `rows` (the sweep's). A rank's clock is split where
  // some row there is pooled beyond profile::kUnsplitPoolingError and every row at the rank's
  // reference clock carries a pooling error; its pooled instructions are those whose pooling
  // error is above 0 there. `split` false: no rounds, the rows stay as they are.
  SplitRounds(const schedule::Schedule& sched, RankRows rows, bool split = true);

  std::size_t rounds() const { return rounds_; }
  bool done() const { return round_ >= rounds_; }
  // The plans of the next round.
  std::vector<StagePlan> plans() const;
  // The next round's windows, one per rank.
  void observe(const std::vector<StageWindow>& windows);

  // Rounds observed so far.
  std::size_t observed() const;

  // The sweep's rows with the pooled ones replaced by their split energies (time, standard error
  // and clocks as in the sweep), once done(). A clock whose split gives an energy at or below 0
  // (noise beyond the measurement's) keeps its pooled rows. The warnings are what the log should
  // say of them: such clocks, and clocks told apart that disagree.
  struct Result {
    RankRows rows;
    std::vector<std::string> warnings;
  };
  Result result() const;

 private:
  // One round of one rank: instruction `label` at `mhz`, the rank's others at its reference.
  struct Task {
    int mhz;
    std::string label;
    double busy_j = 0.0;  // what the rank's instructions spent per iteration
  };
  struct Rank {
    int reference_mhz = 0;
    std::map<std::string, double> count;             // occurrences per iteration, by label
    std::map<int, std::vector<std::string>> pooled;  // per split clock: its pooled labels
    std::vector<int> anchors;  // clocks told apart, split too (not the reference)
    std::vector<Task> tasks;   // in round order
  };
  // What the anchors say the split rows are off by (J per occurrence, by label), and what to log
  // of them.
  struct Correction {
    std::map<std::string, double> energy_j;
    std::string note;
  };
  Correction correction(std::size_t rank) const;
  // The split rows of one rank at one clock; nullopt where an energy came out at or below 0.
  std::optional<LabelRows> split(std::size_t rank, int mhz) const;
  // The standard error (J) of what the rank's instructions spent per iteration at the clock in the
  // sweep, the sum of theirs (a bound whatever their correlation; exact for a pooled group, whose
  // errors are one). A split round's sum is taken to be known as well: its windows are as long,
  // its instructions and bubbles the same; only which runs at which clock differs. (The split
  // round's own errors do not say: there the rank's instructions run at two clocks, two powers
  // the counter cannot tell apart, each known badly, their sum well.) Unknown where a row has none.
  std::optional<double> sum_error(std::size_t rank, int mhz) const;
  // A split label's energy at the task's clock, and its standard error (J).
  std::pair<double, std::optional<double>> difference(std::size_t rank, const Task& task) const;

  const schedule::Schedule& sched_;
  RankRows rows_;
  std::vector<Rank> ranks_;
  std::size_t rounds_ = 0, round_ = 0;
};

}  // namespace perseus::server::schedulers
