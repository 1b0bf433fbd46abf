#include "perseus/schedule/generators.hpp"

#include <algorithm>
#include <deque>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

using T = InstructionType;

// A V-shaped schedule: 2R stages, stages r and 2R-1-r on rank r.
Schedule v_schedule(const std::string& name, int num_ranks, int num_microbatches) {
  check_rank_sizes(num_ranks, 2, num_microbatches);
  std::vector<int> stage_rank(static_cast<std::size_t>(2 * num_ranks));
  for (int r = 0; r < num_ranks; ++r) {
    stage_rank[r] = r;
    stage_rank[2 * num_ranks - 1 - r] = r;
  }
  return empty_schedule(name, num_microbatches, std::move(stage_rank), num_ranks);
}

// Appends one rank's actions, numbering microbatches per stage and kind in issue order the way
// torch's generators count them: a stage's forwards, its backwards (full or input: one count, as
// DualPipeV mixes them) and its weight backwards each go 0, 1, 2, ... Actions numbered at or past
// `limit` are counted but not appended (ZBV plans for extra microbatches and drops them).
class RankBuilder {
 public:
  RankBuilder(std::vector<Instruction>& list, int num_stages, int limit)
      : list_(list), next_(static_cast<std::size_t>(num_stages) * 3, 0), limit_(limit) {}

  // Appends the next microbatch of `type` on `stage`. A weight backward added here takes the
  // stage's own next number (ZBV); add_oldest_weight() follows the order of the input backwards
  // instead (interleaved zero bubble, DualPipeV). A schedule uses one of the two, not both.
  void add(int stage, InstructionType type) {
    int microbatch = next_[slot(stage, type)]++;
    if (type == T::kBackwardInput)
      pending_weights_.push_back({T::kBackwardWeight, microbatch, stage});
    if (microbatch < limit_) list_.push_back({type, microbatch, stage});
  }
  // Appends torch's overlapped pair (OVERLAP_F_B) of the next forward of `forward_stage` and the
  // next `type` backward of `backward_stage`, as one item (as single actions where one of them
  // is past the limit).
  void add_overlapped(int forward_stage, int backward_stage, InstructionType type) {
    const std::size_t before = list_.size();
    add(forward_stage, T::kForward);
    add(backward_stage, type);
    if (list_.size() != before + 2) return;
    const Instruction second = list_.back();
    list_.pop_back();
    list_.back() = overlapped_pair(list_.back(), second);
  }
  // Appends the weight backward of the oldest input backward that has none yet (if any).
  void add_oldest_weight() {
    if (pending_weights_.empty()) return;
    Instruction w = pending_weights_.front();
    pending_weights_.pop_front();
    ++next_[slot(w.stage, w.type)];
    if (w.microbatch < limit_) list_.push_back(w);
  }
  bool has_pending_weights() const { return !pending_weights_.empty(); }
  // How many microbatches of `type` `stage` has issued so far.
  int count(int stage, InstructionType type) const { return next_[slot(stage, type)]; }

 private:
  static std::size_t slot(int stage, InstructionType type) {
    int kind = type == T::kForward ? 0 : type == T::kBackwardWeight ? 2 : 1;
    return static_cast<std::size_t>(stage) * 3 + static_cast<std::size_t>(kind);
  }

  std::vector<Instruction>& list_;
  std::vector<int> next_;
  int limit_;
  std::deque<Instruction> pending_weights_;
};

// Repeats `body` `times` times (no-op for times <= 0).
template <typename F>
void repeat(int times, F body) {
  for (int i = 0; i < times; ++i) body();
}

// Torch's interleaved schedules split the microbatches into max(1, M / R) rounds of equal size
// and refuse an M the rounds do not divide (so M need not be a multiple of R: M = 6 or 3 on 4
// ranks is one round). Returns the microbatches per round.
int microbatches_per_round(const std::string& name, int num_ranks, int num_microbatches) {
  int rounds = std::max(1, num_microbatches / num_ranks);
  if (num_microbatches % rounds != 0) {
    throw Error(name + ": " + std::to_string(num_microbatches) + " microbatches on " +
                std::to_string(num_ranks) + " ranks do not split into max(1, M / R) = " +
                std::to_string(rounds) + " equal rounds, which torch requires");
  }
  return num_microbatches / rounds;
}

// One rank of torch's interleaved 1F1B (_get_1f1b_rank_ops): warm-up forwards, then a forward
// and a backward per step, then the remaining backwards. Local stages take turns in blocks of
// one round's microbatches: forwards front to back, backwards back to front. With zero_bubble,
// backwards are input backwards, and from the rank-th one on each is followed by the oldest
// pending weight backward; the rest drain at the end.
void fill_interleaved(Schedule& s, int rank, int per_round, bool zero_bubble) {
  int num_ranks = s.num_ranks();
  int local = s.num_stages / num_ranks;
  int total = local * s.num_microbatches;
  int warmup =
      std::min((local - 1) * per_round + (zero_bubble ? 1 : 2) * (num_ranks - 1 - rank), total);
  auto forward_stage = [&](int k) { return (k / per_round) % local * num_ranks + rank; };
  auto backward_stage = [&](int k) {
    return (local - 1 - (k / per_round) % local) * num_ranks + rank;
  };
  RankBuilder b(s.ranks[rank], s.num_stages, s.num_microbatches);
  for (int k = 0; k < warmup; ++k) b.add(forward_stage(k), T::kForward);
  for (int k = 0; k < total; ++k) {
    if (warmup + k < total) b.add(forward_stage(warmup + k), T::kForward);
    b.add(backward_stage(k), zero_bubble ? T::kBackwardInput : T::kBackward);
    if (zero_bubble && k >= rank) b.add_oldest_weight();
  }
  while (b.has_pending_weights()) b.add_oldest_weight();
}

// The interleaved schedules (plain and zero bubble) over all ranks.
Schedule interleaved(const std::string& name, int num_ranks, int stages_per_rank,
                     int num_microbatches, bool zero_bubble) {
  Schedule s = looped_schedule(name, num_ranks, stages_per_rank, num_microbatches);
  int per_round = microbatches_per_round(name, num_ranks, num_microbatches);
  for (int rank = 0; rank < num_ranks; ++rank) fill_interleaved(s, rank, per_round, zero_bubble);
  return s;
}

// One rank of ZBV (torch's ScheduleZBVZeroBubble): planned for max(2R - 1, M) microbatches, the
// ones past M dropped. c0 = rank is the rank's first stage, c1 = 2R-1-rank its second.
void fill_zbv(Schedule& s, int rank) {
  int num_ranks = s.num_ranks();
  int planned = std::max(2 * num_ranks - 1, s.num_microbatches);
  int c0 = rank;
  int c1 = s.num_stages - 1 - rank;
  RankBuilder b(s.ranks[rank], s.num_stages, s.num_microbatches);
  auto backward = [&](int stage) {  // input then weight backward of the same microbatch
    b.add(stage, T::kBackwardInput);
    b.add(stage, T::kBackwardWeight);
  };
  // Warm-up: c0 forwards, then alternating c1/c0 forwards, then c1 forward-backward pairs.
  repeat(2 * (num_ranks - rank) - 1, [&] { b.add(c0, T::kForward); });
  repeat(rank, [&] {
    b.add(c1, T::kForward);
    b.add(c0, T::kForward);
  });
  repeat(num_ranks - rank, [&] {
    b.add(c1, T::kForward);
    backward(c1);
  });
  // Steady state: F c0 (while any remain), B c0, F c1, B c1.
  while (b.count(c1, T::kForward) < b.count(c0, T::kForward) ||
         b.count(c0, T::kForward) < planned) {
    if (b.count(c0, T::kForward) < planned) b.add(c0, T::kForward);
    backward(c0);
    b.add(c1, T::kForward);
    backward(c1);
  }
  // Cool-down: input backwards first, weight backwards after (c1's before c0's).
  repeat(rank, [&] {
    b.add(c0, T::kBackwardInput);
    b.add(c1, T::kBackwardInput);
  });
  repeat(num_ranks - rank, [&] {
    b.add(c0, T::kBackwardInput);
    b.add(c0, T::kBackwardWeight);
  });
  for (int stage : {c1, c0}) {
    while (b.count(stage, T::kBackwardWeight) < b.count(stage, T::kBackwardInput)) {
      b.add(stage, T::kBackwardWeight);
    }
  }
}

// One rank of DualPipeV (torch's ScheduleDualPipeV), its overlapped forward/backward pairs
// flattened forward first. s0 = rank is the rank's first stage, s1 = 2R-1-rank its second.
void fill_dualpipev(Schedule& s, int rank) {
  int n = s.num_ranks();
  int s0 = rank;
  int s1 = s.num_stages - 1 - rank;
  RankBuilder b(s.ranks[rank], s.num_stages, s.num_microbatches);
  repeat(2 * (n - rank - 1), [&] { b.add(s0, T::kForward); });
  repeat(rank + 1, [&] {
    b.add(s0, T::kForward);
    b.add(s1, T::kForward);
  });
  repeat(n - rank - 1, [&] {  // zero bubble on s1
    b.add(s1, T::kBackwardInput);
    b.add_oldest_weight();
    b.add(s1, T::kForward);
  });
  // Main step: F s0 + B s1, F s1 + B s0, each an overlapped pair (torch's OVERLAP_F_B), but for
  // the last rank's first F s0 + B s1.
  for (int i = 0; i < s.num_microbatches - 2 * n + rank + 1; ++i) {
    if (i == 0 && rank == n - 1) {
      b.add(s0, T::kForward);
      b.add(s1, T::kBackward);
    } else {
      b.add_overlapped(s0, s1, T::kBackward);
    }
    b.add_overlapped(s1, s0, T::kBackward);
  }
  repeat(n - rank - 1, [&] {
    b.add(s1, T::kBackward);
    b.add_overlapped(s1, s0, T::kBackward);
  });
  // Backward pairs s1, s0; the second half of them split into input and weight backwards (for
  // odd ranks the switch comes one action earlier, before s1's backward).
  int half = (rank + 1) / 2;
  for (int i = 0; i <= rank; ++i) {
    bool split_s1 = i > half || (i == half && rank % 2 == 1);
    b.add(s1, split_s1 ? T::kBackwardInput : T::kBackward);
    b.add(s0, i >= half ? T::kBackwardInput : T::kBackward);
  }
  repeat(n - rank - 1, [&] {
    b.add_oldest_weight();
    b.add(s0, T::kBackwardInput);
  });
  repeat(rank + 1, [&] { b.add_oldest_weight(); });
}

}  // namespace

Schedule make_interleaved_1f1b(int num_ranks, int stages_per_rank, int num_microbatches) {
  return interleaved("interleaved-1f1b", num_ranks, stages_per_rank, num_microbatches, false);
}

Schedule make_interleaved_zero_bubble(int num_ranks, int stages_per_rank, int num_microbatches) {
  return interleaved("interleaved-zero-bubble", num_ranks, stages_per_rank, num_microbatches, true);
}

// Torch's ScheduleLoopedBFS: each rank runs every microbatch's forward through its first local
// stage, then its next, ...; then the backwards from its last local stage back, each stage's
// microbatches in reverse order.
Schedule make_looped_bfs(int num_ranks, int stages_per_rank, int num_microbatches) {
  Schedule s = looped_schedule("looped-bfs", num_ranks, stages_per_rank, num_microbatches);
  for (int rank = 0; rank < num_ranks; ++rank) {
    auto& list = s.ranks[rank];
    for (int stage = rank; stage < s.num_stages; stage += num_ranks) {
      for (int m = 0; m < num_microbatches; ++m) list.push_back({T::kForward, m, stage});
    }
    for (int stage = s.num_stages - num_ranks + rank; stage >= 0; stage -= num_ranks) {
      for (int m = num_microbatches - 1; m >= 0; --m) list.push_back({T::kBackward, m, stage});
    }
  }
  return s;
}

Schedule make_zbv(int num_ranks, int num_microbatches) {
  Schedule s = v_schedule("zbv", num_ranks, num_microbatches);
  for (int rank = 0; rank < num_ranks; ++rank) fill_zbv(s, rank);
  return s;
}

Schedule make_dualpipev(int num_ranks, int num_microbatches) {
  Schedule s = v_schedule("dualpipev", num_ranks, num_microbatches);
  if (num_microbatches < s.num_stages) {
    throw Error("dualpipev needs at least as many microbatches as stages (M >= 2R), got " +
                std::to_string(num_microbatches) + " microbatches for " +
                std::to_string(s.num_stages) + " stages on " + std::to_string(num_ranks) +
                " ranks");
  }
  for (int rank = 0; rank < num_ranks; ++rank) fill_dualpipev(s, rank);
  return s;
}

}  // namespace perseus::schedule
