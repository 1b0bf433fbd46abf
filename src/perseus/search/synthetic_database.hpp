// A synthetic operator database for the parallelization search, in the layout Database::load reads
// (database.hpp), for a GPT-style model on one of the built-in GPU models (profile::GpuModel):
// what the search's examples and tests run on where no measured database is at hand. It is a
// model, not a measurement:
//   - each operator of the 13-operator decoder layer (and the embedding, final layernorm and
//     post-process) at microbatch b and tensor-parallel degree t runs for
//     max(FLOPs / (kGemmEfficiency x peak), bytes / (kMemoryEfficiency x memory bandwidth))
//     + kLaunchOverheadUs, its backward kBackwardFactor times that; FLOPs and bytes from the
//     tensor shapes (fp16; hidden h, sequence s, heads a, vocabulary kVocabulary; the linear
//     layers split by t as Megatron's column and row parallel layers);
//   - sizes (input, output, weights, saved activations, workspace) from the same shapes, in MB
//     of 2^20 bytes;
//   - collectives on N GPUs by the ring model over the GPU's link bandwidth (all-reduce moves
//     2 (N-1)/N of the message, the others (N-1)/N), kCollectiveLatencyUs per ring step, one row
//     per whole MB up to max_collective_mb (the search looks rows up by whole MB);
//   - point-to-point bandwidth rising with the message size to kP2pEfficiency of the link.
// Only algorithm variant 0 is written. Deterministic: the same spec writes the same bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace perseus::search {

inline constexpr double kGemmEfficiency = 0.6;
inline constexpr double kMemoryEfficiency = 0.7;
inline constexpr double kLaunchOverheadUs = 10.0;
inline constexpr double kBackwardFactor = 2.0;
inline constexpr double kCollectiveLatencyUs = 10.0;
inline constexpr double kP2pEfficiency = 0.8;
inline constexpr int kVocabulary = 51200;

struct SyntheticDatabaseSpec {
  std::string gpu = "a100";   // profile::gpu_model name
  std::string size = "1_3B";  // a GPT size the search knows (its hidden, sequence and heads)
  std::vector<int> micro_batch_sizes = {1, 2, 4, 8};
  std::vector<int> tensor_parallel = {1, 2, 4};
  std::vector<int> collective_gpus = {2, 4};
  int max_collective_mb = 4096;
};

// Writes gpt_<size>_mbs<b>_tp<t>_algo0.csv for every (b, t), prim_gpt_<size>_<collective>_<N>gpus
// .csv for every N, and p2p_intra_node.csv into `dir` (created if needed); returns the files
// written. Throws perseus::Error for an unknown GPU or size, or a size or count out of range.
std::vector<std::filesystem::path> write_synthetic_database(const SyntheticDatabaseSpec& spec,
                                                            const std::filesystem::path& dir);

}  // namespace perseus::search
