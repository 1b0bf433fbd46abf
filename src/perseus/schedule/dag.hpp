// The instruction DAG of a schedule (activity on node): node 0 is the source, node N-1 the sink,
// nodes 1..N-2 are the ranks' items (an overlapped pair is one node: its actions' dependencies
// meet there). Edges: consecutive actions of a rank; the data dependencies
// F(s,j) -> F(s+1,j) and G(s+1,j) -> G(s,j), where G is a stage's input-gradient action (its
// backward, or its backward-input when the backward is split); source -> nodes without
// predecessors, nodes without successors -> sink. A stage's forward before its backward (or
// backward-input) and the backward-input before the backward-weight are checked on the rank's
// order, which orders them (a stage lives on one rank). Built in linear time; adjacency is stored
// compactly (CSR) in both directions. Construction throws perseus::Error naming the rank and
// action when an action is out of range, repeated, on the wrong rank, missing, out of order, or
// when the ranks' orders deadlock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "perseus/schedule/schedule.hpp"

namespace perseus::schedule {

struct DagNode {
  int rank = -1;      // -1 for source and sink
  int position = -1;  // index in the rank's action list
  Instruction instruction{InstructionType::kForward, -1, -1};

  int stage() const { return instruction.stage; }
};

class Dag {
 public:
  explicit Dag(const Schedule& schedule);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  std::size_t num_edges() const { return succ_.size(); }
  int source() const { return 0; }
  int sink() const { return num_nodes() - 1; }
  bool is_instruction(int node) const { return node != source() && node != sink(); }

  const DagNode& node(int id) const { return nodes_[id]; }
  // Node id of action `position` of `rank`.
  int node_id(int rank, int position) const { return rank_offset_[rank] + position; }

  struct Range {
    const int* b;
    const int* e;
    const int* begin() const { return b; }
    const int* end() const { return e; }
    std::size_t size() const { return static_cast<std::size_t>(e - b); }
  };
  Range successors(int id) const { return range(succ_offset_, succ_, id); }
  Range predecessors(int id) const { return range(pred_offset_, pred_, id); }
  // Index in 0..num_edges()-1 of the edge from `id` to its k-th successor.
  std::size_t edge_id(int id, std::size_t k) const {
    return static_cast<std::size_t>(succ_offset_[id]) + k;
  }
  // Nodes in a topological order (source first, sink last).
  const std::vector<int>& topological_order() const { return topo_; }

 private:
  static Range range(const std::vector<int>& offset, const std::vector<int>& adj, int id) {
    const int* base = adj.data();
    return {base + offset[id], base + offset[id + 1]};
  }

  // Fills topo_ (Kahn's algorithm); a cycle throws through throw_deadlock.
  void sort_topologically(const Schedule& schedule);
  // Throws perseus::Error naming each rank's first action that never becomes ready.
  [[noreturn]] void throw_deadlock(const Schedule& schedule, const std::vector<int>& unmet) const;

  std::vector<DagNode> nodes_;
  std::vector<int> rank_offset_;
  std::vector<int> succ_offset_, succ_, pred_offset_, pred_;
  std::vector<int> topo_;
};

// Earliest start time of every node (into `start`, resized) when node v takes duration[v] (any
// arithmetic type: seconds or time units) and starts as soon as all its predecessors have
// finished; returns the sink's, the longest source-to-sink path.
template <typename T>
T earliest_starts(const Dag& dag, const std::vector<T>& duration, std::vector<T>& start) {
  start.assign(duration.size(), T{});
  for (int v : dag.topological_order()) {
    for (int u : dag.predecessors(v)) start[v] = std::max(start[v], start[u] + duration[u]);
  }
  return start[dag.sink()];
}

// Earliest finish time of every node (its earliest start plus its own duration).
template <typename T>
std::vector<T> finish_times(const Dag& dag, const std::vector<T>& duration) {
  std::vector<T> finish;
  earliest_starts(dag, duration, finish);
  for (std::size_t v = 0; v < finish.size(); ++v) finish[v] += duration[v];
  return finish;
}

// Longest source-to-sink path length.
template <typename T>
T longest_path(const Dag& dag, const std::vector<T>& duration) {
  std::vector<T> start;
  return earliest_starts(dag, duration, start) + duration[dag.sink()];
}

// Earliest start and latest finish of every node within the critical path (durations as in
// earliest_starts; `start` and `latest_finish` are resized); returns the critical path's length.
// A node is critical when start + duration == latest_finish.
template <typename T>
T critical_windows(const Dag& dag, const std::vector<T>& duration, std::vector<T>& start,
                   std::vector<T>& latest_finish) {
  const T total = earliest_starts(dag, duration, start);
  latest_finish.assign(duration.size(), total);
  const auto& topo = dag.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    for (int w : dag.successors(*it)) {
      latest_finish[*it] = std::min(latest_finish[*it], latest_finish[w] - duration[w]);
    }
  }
  return total;
}

// One longest source-to-sink path, as instruction node ids in execution order (source and sink
// left out). Walks back from the sink through a predecessor that finishes last; ties go to the
// predecessor on the same rank (the GPU was busy, not waiting), then to the first listed.
template <typename T>
std::vector<int> critical_path(const Dag& dag, const std::vector<T>& duration) {
  const std::vector<T> finish = finish_times(dag, duration);
  std::vector<int> path;
  int v = dag.sink();
  while (true) {
    int best = -1;
    for (int u : dag.predecessors(v)) {
      bool better = best < 0 || finish[u] > finish[best] ||
                    (finish[u] == finish[best] && dag.node(u).rank == dag.node(v).rank &&
                     dag.node(best).rank != dag.node(v).rank);
      if (better) best = u;
    }
    if (best < 0 || best == dag.source()) break;
    path.push_back(best);
    v = best;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace perseus::schedule
