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

// Longest source-to-sink path where node v takes duration[v] (any arithmetic type: seconds or
// time units).
template <typename T>
T longest_path(const Dag& dag, const std::vector<T>& duration) {
  std::vector<T> finish(duration.size(), T{});
  for (int v : dag.topological_order()) {
    T start{};
    for (int u : dag.predecessors(v)) start = std::max(start, finish[u]);
    finish[v] = start + duration[v];
  }
  return finish[dag.sink()];
}

}  // namespace perseus::schedule
