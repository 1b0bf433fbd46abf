// The instruction DAG of a schedule (activity on node): node 0 is the source, node N-1 the sink,
// nodes 1..N-2 are instructions. Edges: consecutive instructions of a stage, F(s,j) -> F(s+1,j),
// B(s+1,j) -> B(s,j), source -> nodes without predecessors, nodes without successors -> sink.
// Built in linear time; adjacency is stored compactly (CSR) in both directions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "perseus/schedule/schedule.hpp"

namespace perseus::schedule {

struct DagNode {
  int stage = -1;     // -1 for source and sink
  int position = -1;  // index in the stage's instruction list
  Instruction instruction{InstructionType::kForward, -1};
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
  // Node id of instruction `position` of `stage`.
  int node_id(int stage, int position) const { return stage_offset_[stage] + position; }

  struct Range {
    const int* b;
    const int* e;
    const int* begin() const { return b; }
    const int* end() const { return e; }
    std::size_t size() const { return static_cast<std::size_t>(e - b); }
  };
  Range successors(int id) const { return range(succ_offset_, succ_, id); }
  Range predecessors(int id) const { return range(pred_offset_, pred_, id); }
  // Nodes in a topological order (source first, sink last).
  const std::vector<int>& topological_order() const { return topo_; }

 private:
  static Range range(const std::vector<int>& offset, const std::vector<int>& adj, int id) {
    const int* base = adj.data();
    return {base + offset[id], base + offset[id + 1]};
  }

  std::vector<DagNode> nodes_;
  std::vector<int> stage_offset_;
  std::vector<int> succ_offset_, succ_, pred_offset_, pred_;
  std::vector<int> topo_;
};

// Earliest finish time of every node when node v takes duration[v] (any arithmetic type:
// seconds or time units) and starts as soon as all its predecessors have finished.
template <typename T>
std::vector<T> finish_times(const Dag& dag, const std::vector<T>& duration) {
  std::vector<T> finish(duration.size(), T{});
  for (int v : dag.topological_order()) {
    T start{};
    for (int u : dag.predecessors(v)) start = std::max(start, finish[u]);
    finish[v] = start + duration[v];
  }
  return finish;
}

// Longest source-to-sink path length.
template <typename T>
T longest_path(const Dag& dag, const std::vector<T>& duration) {
  return finish_times(dag, duration)[dag.sink()];
}

// One longest source-to-sink path, as instruction node ids in execution order (source and sink
// left out). Walks back from the sink through a predecessor that finishes last; ties go to the
// predecessor on the same stage (the GPU was busy, not waiting), then to the first listed.
template <typename T>
std::vector<int> critical_path(const Dag& dag, const std::vector<T>& duration) {
  const std::vector<T> finish = finish_times(dag, duration);
  std::vector<int> path;
  int v = dag.sink();
  while (true) {
    int best = -1;
    for (int u : dag.predecessors(v)) {
      bool better = best < 0 || finish[u] > finish[best] ||
                    (finish[u] == finish[best] && dag.node(u).stage == dag.node(v).stage &&
                     dag.node(best).stage != dag.node(v).stage);
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
