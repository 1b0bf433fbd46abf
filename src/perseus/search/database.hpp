// Per-operator profile database of the parallelization search (architecture section 8), in the
// layout of Aceso's profiler output: per-op forward/backward time and memory for every profiled
// (microbatch size, tensor-parallel degree, algorithm variant) in
// `<prefix>_mbs<M>_tp<T>_algo<A>.csv`, collective tables `prim_<prefix>_<collective>_<N>gpus.csv`
// (message MB -> ms) and point-to-point bandwidth tables `p2p_intra_node.csv` /
// `p2p_inter_node.csv` (GB/s by message size). Loading validates every file (bad input ->
// perseus::Error naming file, line and column). Lookups of entries that were not profiled report
// "missing" (never a default cost), so the performance model can declare a configuration that needs
// one illegal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace perseus::search {

// One operator at one (microbatch size, tp, algo): times in microseconds, sizes in MB.
struct OpProfile {
  double fwd_us = 0.0, bwd_us = 0.0;
  double input_mb = 0.0, output_mb = 0.0;
  double weights_mb = 0.0, activations_mb = 0.0;
  double fwd_reserved_mb = 0.0, bwd_reserved_mb = 0.0;
};

enum class Collective : std::uint8_t { all_gather = 0, all_reduce, reduce_scatter, all_to_all };
inline constexpr int kNumCollectives = 4;
const char* collective_name(Collective c);

class Database {
 public:
  // Loads every `<prefix>_mbs<M>_tp<T>_algo<A>.csv` and `prim_<prefix>_<coll>_<N>gpus.csv` in
  // `dir`, `p2p_intra_node.csv` (required) and `p2p_inter_node.csv` (optional: the intra-node
  // table is used for cross-node transfers when it is absent, as the reference does). `prefix` is
  // usually "<model_name>_<model_size>", e.g. "gpt_1_3B". The operator list (one layer template)
  // is the order of the smallest-microbatch tp1 algo0 file; other files may omit operators
  // (those entries are missing) but must not add unknown ones.
  static Database load(const std::filesystem::path& dir, const std::string& prefix);

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& prefix() const { return prefix_; }

  const std::vector<std::string>& op_names() const { return op_names_; }
  int num_ops() const { return static_cast<int>(op_names_.size()); }
  int op_index(std::string_view name) const;  // -1 when unknown

  const std::vector<int>& micro_batch_sizes() const { return mbs_; }  // ascending
  const std::vector<int>& tp_sizes() const { return tps_; }           // ascending
  int num_algos() const { return num_algos_; }
  // Index of a profiled microbatch size / tp degree; -1 when not profiled.
  int mbs_index(int mbs) const {
    return mbs > 0 && mbs < static_cast<int>(mbs_lookup_.size()) ? mbs_lookup_[mbs] : -1;
  }
  int tp_index(int tp) const {
    return tp > 0 && tp < static_cast<int>(tp_lookup_.size()) ? tp_lookup_[tp] : -1;
  }

  // The profile of `op` (op_index) at (mbs_index, tp_index, algo); nullptr when not profiled.
  const OpProfile* find(int op, int mbs_index, int tp_index, int algo) const {
    if (mbs_index < 0 || tp_index < 0 || algo < 0 || algo >= num_algos_) return nullptr;
    std::size_t k = slot(op, mbs_index, tp_index, algo);
    return present_[k] != 0 ? &profiles_[k] : nullptr;
  }

  // The reference's table lookup: the row for the size rounded to whole MB (half to even), else
  // the row for size - 1 rounded; nullopt when the table or both rows are missing.
  std::optional<double> collective_ms(Collective c, int num_gpus, double size_mb) const;
  bool has_collective(Collective c, int num_gpus) const;

  // Microseconds to send `size_mb` MB to the neighbouring stage: size / bandwidth, where the
  // bandwidth column is int(log2(size)) - 1 (no -1 below 1; Python-style negative indexing below
  // 1 MB, clamped at the first column; the last column beyond the table); 0 MB costs nothing.
  double p2p_us(double size_mb, bool inter_node) const;
  bool has_inter_node_table() const { return has_inter_; }
  // Whether `<prefix>_mbs<mbs>_tp<tp>_algo<algo>.csv` was loaded.
  bool profiled(int mbs, int tp, int algo) const;

 private:
  struct ProfileFile {
    int mbs = 0, tp = 0, algo = 0;
    std::filesystem::path path;
  };
  struct CollectiveFile {
    Collective collective = Collective::all_gather;
    int num_gpus = 0;
    std::filesystem::path path;
  };
  // Sorts the directory's files into operator profiles and collective tables.
  void scan(std::vector<ProfileFile>& profiles, std::vector<CollectiveFile>& collectives) const;
  // The profiled microbatch sizes, tp degrees and algorithm variants, and their lookups.
  void index_sizes(const std::vector<ProfileFile>& files);
  // The operator list (one layer template): the names of `base`, in order.
  void read_operator_list(const ProfileFile& base);
  void read_profiles(const ProfileFile& f, const ProfileFile& base);
  void read_collective(const CollectiveFile& f);
  // p2p_intra_node.csv (required) and p2p_inter_node.csv (optional).
  void read_bandwidths();

  std::size_t slot(int op, int m, int t, int a) const {
    return ((static_cast<std::size_t>(op) * mbs_.size() + static_cast<std::size_t>(m)) *
                tps_.size() +
            static_cast<std::size_t>(t)) *
               static_cast<std::size_t>(num_algos_) +
           static_cast<std::size_t>(a);
  }

  struct CollectiveTable {
    Collective collective;
    int num_gpus;
    std::unordered_map<long long, double> ms_by_mb;
  };

  std::filesystem::path dir_;
  std::string prefix_;
  std::vector<std::string> op_names_;
  std::unordered_map<std::string, int> op_lookup_;
  std::vector<int> mbs_, tps_, mbs_lookup_, tp_lookup_;
  int num_algos_ = 0;
  std::vector<OpProfile> profiles_;
  std::vector<std::uint8_t> present_;
  std::vector<std::uint8_t> loaded_;  // per (mbs, tp, algo) (slot of operator 0): file read
  std::vector<CollectiveTable> collectives_;
  std::vector<double> intra_gbps_, inter_gbps_;
  bool has_inter_ = false;
};

}  // namespace perseus::search
