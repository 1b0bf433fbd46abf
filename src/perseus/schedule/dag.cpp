#include "perseus/schedule/dag.hpp"

#include <string>
#include <utility>

#include "perseus/util/error.hpp"

namespace perseus::schedule {

namespace {

using Edge = std::pair<int, int>;

// Lookup (stage, kind, microbatch) -> node id, filled in one pass over the schedule.
class ActionIndex {
 public:
  ActionIndex(int stages, int microbatches)
      : microbatches_(microbatches),
        ids_(static_cast<std::size_t>(stages) * kNumInstructionTypes * microbatches, -1) {}

  int& at(int stage, InstructionType type, int microbatch) {
    std::size_t t = static_cast<std::size_t>(type);
    return ids_[(static_cast<std::size_t>(stage) * kNumInstructionTypes + t) * microbatches_ +
                static_cast<std::size_t>(microbatch)];
  }
  int& at(const Instruction& a) { return at(a.stage, a.type, a.microbatch); }

  // The action whose result stage `stage - 1` waits for in the backward pass: the backward, or
  // the backward-input when the backward is split (-1 when neither exists).
  int input_gradient(int stage, int microbatch) {
    int b = at(stage, InstructionType::kBackward, microbatch);
    return b != -1 ? b : at(stage, InstructionType::kBackwardInput, microbatch);
  }

 private:
  std::size_t microbatches_;
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

std::string where(const Schedule& s, int rank, int position, const Instruction& a) {
  return "schedule '" + s.name + "' rank " + std::to_string(rank) + " position " +
         std::to_string(position) + " (" + action_name(a) + ")";
}

// Why an action cannot be placed (out of range, wrong rank), or an empty string.
std::string misplaced(const Schedule& s, int rank, const Instruction& a) {
  if (a.stage < 0 || a.stage >= s.num_stages) {
    return "stage " + std::to_string(a.stage) + " out of range (the pipeline has " +
           std::to_string(s.num_stages) + " stages)";
  }
  if (a.microbatch < 0 || a.microbatch >= s.num_microbatches) {
    return "microbatch " + std::to_string(a.microbatch) + " out of range (" +
           std::to_string(s.num_microbatches) + " microbatches)";
  }
  int owner = s.stage_rank[static_cast<std::size_t>(a.stage)];
  if (owner != rank) {
    return "stage " + std::to_string(a.stage) + " runs on rank " + std::to_string(owner);
  }
  return {};
}

std::string what(int stage, InstructionType type, int microbatch) {
  return type_name(type) + " of stage " + std::to_string(stage) + " microbatch " +
         std::to_string(microbatch);
}

// Every (stage, microbatch) has a forward and either a backward or a backward-input and a
// backward-weight, in that order on its rank (node ids of one rank grow with position).
void check_complete(const Schedule& s, ActionIndex& index) {
  using T = InstructionType;
  const std::string head = "schedule '" + s.name + "': ";
  for (int st = 0; st < s.num_stages; ++st) {
    for (int j = 0; j < s.num_microbatches; ++j) {
      int f = index.at(st, T::kForward, j);
      int b = index.at(st, T::kBackward, j);
      int in = index.at(st, T::kBackwardInput, j);
      int w = index.at(st, T::kBackwardWeight, j);
      if (f == -1) throw Error(head + "no " + what(st, T::kForward, j));
      if (b != -1 && (in != -1 || w != -1)) {
        throw Error(head + what(st, T::kBackward, j) +
                    " is also split into input and weight parts");
      }
      if (b == -1 && in == -1)
        throw Error(head + "no backward of stage " + std::to_string(st) + " microbatch " +
                    std::to_string(j) + " (B, or I and W)");
      if ((in == -1) != (w == -1)) {
        throw Error(head + "no " + what(st, in == -1 ? T::kBackwardInput : T::kBackwardWeight, j) +
                    " to pair with its " + (in == -1 ? "backward_weight" : "backward_input"));
      }
      if ((b != -1 ? b : in) < f) {
        throw Error(head + "the " + what(st, b != -1 ? T::kBackward : T::kBackwardInput, j) +
                    " comes before its forward on rank " + std::to_string(s.stage_rank[st]));
      }
      if (w != -1 && w < in) {
        throw Error(head + "the " + what(st, T::kBackwardWeight, j) +
                    " comes before its backward_input on rank " + std::to_string(s.stage_rank[st]));
      }
    }
  }
}

// The edges between actions: each rank's order, then the data dependencies F(s) -> F(s+1) and
// G(s+1) -> G(s) of every microbatch (G: the input-gradient action).
std::vector<Edge> dependency_edges(const Schedule& schedule, const Dag& dag, ActionIndex& index) {
  std::vector<Edge> edges;
  edges.reserve(static_cast<std::size_t>(dag.num_nodes()) * 2);
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    for (int p = 0; p + 1 < static_cast<int>(schedule.ranks[r].size()); ++p) {
      edges.emplace_back(dag.node_id(r, p), dag.node_id(r, p + 1));
    }
  }
  auto depend = [&](int u, int v) {
    if (u != v) edges.emplace_back(u, v);  // both in one pair: it runs them in order
  };
  for (int s = 0; s + 1 < schedule.num_stages; ++s) {
    for (int j = 0; j < schedule.num_microbatches; ++j) {
      depend(index.at(s, InstructionType::kForward, j),
             index.at(s + 1, InstructionType::kForward, j));
      depend(index.input_gradient(s + 1, j), index.input_gradient(s, j));
    }
  }
  return edges;
}

// Source (node 0) -> every action without a predecessor; every action without a successor ->
// sink (node n - 1).
void add_source_and_sink_edges(int n, std::vector<Edge>& edges) {
  std::vector<int> indeg(n, 0), outdeg(n, 0);
  for (const auto& [u, v] : edges) {
    ++outdeg[u];
    ++indeg[v];
  }
  for (int v = 1; v + 1 < n; ++v) {
    if (indeg[v] == 0) edges.emplace_back(0, v);
    if (outdeg[v] == 0) edges.emplace_back(v, n - 1);
  }
}

}  // namespace

void Dag::throw_deadlock(const Schedule& schedule, const std::vector<int>& unmet) const {
  std::string stuck;
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    for (int p = 0; p < static_cast<int>(schedule.ranks[r].size()); ++p) {
      if (unmet[node_id(r, p)] == 0) continue;
      stuck += (stuck.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " at " +
               action_name(schedule.ranks[r][p]);
      break;
    }
  }
  throw Error("schedule '" + schedule.name + "' deadlocks: waiting forever are " + stuck);
}

Dag::Dag(const Schedule& schedule) {
  if (schedule.stage_rank.size() != static_cast<std::size_t>(schedule.num_stages)) {
    throw Error("schedule '" + schedule.name + "' maps " +
                std::to_string(schedule.stage_rank.size()) + " stages to ranks but has " +
                std::to_string(schedule.num_stages));
  }
  nodes_.push_back({});  // source
  ActionIndex index(schedule.num_stages, schedule.num_microbatches);
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    rank_offset_.push_back(static_cast<int>(nodes_.size()));
    const auto& list = schedule.ranks[r];
    for (int p = 0; p < static_cast<int>(list.size()); ++p) {
      const Instruction& item = list[p];
      for (const Instruction& a : actions_of(item)) {  // a pair's actions share its node
        std::string why = misplaced(schedule, r, a);
        if (!why.empty()) throw Error(where(schedule, r, p, item) + ": " + why);
        int& slot = index.at(a);
        if (slot != -1) {
          throw Error(where(schedule, r, p, item) + ": " + action_name(a) + " appears twice");
        }
        slot = static_cast<int>(nodes_.size());
      }
      nodes_.push_back({r, p, item});
    }
  }
  check_complete(schedule, index);
  const int n = static_cast<int>(nodes_.size()) + 1;
  nodes_.push_back({});  // sink

  std::vector<Edge> edges = dependency_edges(schedule, *this, index);
  add_source_and_sink_edges(n, edges);
  fill_csr(n, edges, true, succ_offset_, succ_);
  fill_csr(n, edges, false, pred_offset_, pred_);
  sort_topologically(schedule);
}

// Kahn's algorithm; a cycle means the schedule deadlocks.
void Dag::sort_topologically(const Schedule& schedule) {
  const int n = num_nodes();
  std::vector<int> deg(n);
  for (int v = 0; v < n; ++v) deg[v] = static_cast<int>(predecessors(v).size());
  topo_.reserve(n);
  topo_.push_back(0);
  for (std::size_t i = 0; i < topo_.size(); ++i) {
    for (int w : successors(topo_[i])) {
      if (--deg[w] == 0) topo_.push_back(w);
    }
  }
  if (static_cast<int>(topo_.size()) != n) throw_deadlock(schedule, deg);
}

}  // namespace perseus::schedule
