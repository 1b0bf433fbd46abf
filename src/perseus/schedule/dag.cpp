#include "perseus/schedule/dag.hpp"

#include <string>
#include <utility>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

using Edge = std::pair<int, int>;

// Lookup (stage, type, microbatch) -> node id, filled in one pass over the schedule.
class InstructionIndex {
 public:
  InstructionIndex(int stages, int microbatches)
      : microbatches_(microbatches), ids_(stages * 2 * microbatches, -1) {}

  int& at(int stage, const Instruction& inst) {
    std::size_t t = inst.type == InstructionType::kForward ? 0 : 1;
    return ids_[(stage * 2 + t) * microbatches_ + static_cast<std::size_t>(inst.microbatch)];
  }

 private:
  int microbatches_;
  std::vector<int> ids_;
};

void fill_csr(int n, const std::vector<Edge>& edges, bool forward, std::vector<int>& offset,
              std::vector<int>& adj) {
  offset.assign(n + 1, 0);
  for (const auto& [u, v] : edges) ++offset[(forward ? u : v) + 1];
  for (int i = 0; i < n; ++i) offset[i + 1] += offset[i];
  adj.assign(edges.size(), 0);
  std::vector<int> cursor(offset.begin(), offset.end() - 1);
  for (const auto& [u, v] : edges) {
    adj[static_cast<std::size_t>(cursor[forward ? u : v]++)] = forward ? v : u;
  }
}

// Every backward must come after the forward of the same microbatch on its stage.
void check_forward_first(const Schedule& schedule, InstructionIndex& index) {
  for (int s = 0; s < schedule.num_stages; ++s) {
    for (const Instruction& inst : schedule.stages[s]) {
      if (inst.type != InstructionType::kBackward) continue;
      int f = index.at(s, {InstructionType::kForward, inst.microbatch});
      if (f == -1 || f > index.at(s, inst)) {
        throw Error("schedule '" + schedule.name + "' stage " + std::to_string(s) +
                    ": backward of microbatch " + std::to_string(inst.microbatch) +
                    " does not follow its forward");
      }
    }
  }
}

}  // namespace

Dag::Dag(const Schedule& schedule) {
  const int stages = schedule.num_stages;
  nodes_.push_back({});  // source
  InstructionIndex index(stages, schedule.num_microbatches);
  for (int s = 0; s < stages; ++s) {
    stage_offset_.push_back(static_cast<int>(nodes_.size()));
    const auto& list = schedule.stages[s];
    for (int p = 0; p < static_cast<int>(list.size()); ++p) {
      const Instruction& inst = list[p];
      if (inst.microbatch < 0 || inst.microbatch >= schedule.num_microbatches) {
        throw Error("schedule stage " + std::to_string(s) + " position " + std::to_string(p) +
                    ": microbatch " + std::to_string(inst.microbatch) + " out of range");
      }
      int& slot = index.at(s, inst);
      if (slot != -1) {
        throw Error("schedule stage " + std::to_string(s) + ": instruction " +
                    type_name(inst.type) + " of microbatch " + std::to_string(inst.microbatch) +
                    " appears twice");
      }
      slot = static_cast<int>(nodes_.size());
      nodes_.push_back({s, p, inst});
    }
  }
  check_forward_first(schedule, index);
  const int n = static_cast<int>(nodes_.size()) + 1;
  nodes_.push_back({});  // sink

  std::vector<Edge> edges;
  edges.reserve(n * 2);
  for (int s = 0; s < stages; ++s) {
    const auto& list = schedule.stages[s];
    for (int p = 0; p + 1 < static_cast<int>(list.size()); ++p) {
      edges.emplace_back(node_id(s, p), node_id(s, p + 1));
    }
    if (s + 1 == stages) continue;
    for (const Instruction& inst : list) {
      int here = index.at(s, inst);
      int next = index.at(s + 1, inst);
      if (next == -1) continue;
      if (inst.type == InstructionType::kForward)
        edges.emplace_back(here, next);
      else
        edges.emplace_back(next, here);
    }
  }
  std::vector<int> indeg(n, 0), outdeg(n, 0);
  for (const auto& [u, v] : edges) {
    ++outdeg[u];
    ++indeg[v];
  }
  for (int v = 1; v + 1 < n; ++v) {
    if (indeg[v] == 0) edges.emplace_back(0, v);
    if (outdeg[v] == 0) edges.emplace_back(v, n - 1);
  }
  fill_csr(n, edges, true, succ_offset_, succ_);
  fill_csr(n, edges, false, pred_offset_, pred_);

  // Kahn's algorithm; a cycle means the schedule deadlocks.
  std::vector<int> deg(n);
  for (int v = 0; v < n; ++v) deg[v] = static_cast<int>(predecessors(v).size());
  topo_.reserve(n);
  topo_.push_back(0);
  for (std::size_t i = 0; i < topo_.size(); ++i) {
    for (int w : successors(topo_[i])) {
      if (--deg[w] == 0) topo_.push_back(w);
    }
  }
  if (static_cast<int>(topo_.size()) != n) {
    throw Error("schedule '" + schedule.name + "' has a dependency cycle (it would deadlock)");
  }
}

}  // namespace perseus::schedule
