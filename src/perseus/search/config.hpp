// Parallelization configurations of the search (architecture section 8) in the reference's
// (Aceso's) JSON field layout (as in Aceso's own gpt_1_3B_4stages.json): the model fields, global
// and micro batch size, and per stage its GPU count and per-operator tensor-parallel degree,
// data-parallel degree, recompute flag and algorithm variant. Reading validates shapes and values
// (perseus::Error naming file and field); writing reproduces the reference's layout and derived
// fields (checkpoint_activations, resharding_stages).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perseus/search/model.hpp"

namespace perseus::search {

struct StageConfig {
  int num_gpus = 1;                     // tp x dp of every operator
  std::vector<int> tp, dp, algo;        // per operator of the stage
  std::vector<std::uint8_t> recompute;  // per operator: 1 = recompute its forward in backward
  int num_ops() const { return static_cast<int>(tp.size()); }
  // A stage of `num_ops` operators with the same tp, dp and algo and no recomputation.
  static StageConfig uniform(int num_ops, int tp, int dp, int algo = 0);
};

struct Config {
  ModelDesc model;
  int global_batch_size = 0;
  int micro_batch_size = 0;  // per pipeline (data-parallel replicas split it)
  std::vector<StageConfig> stages;

  int num_stages() const { return static_cast<int>(stages.size()); }
  int num_gpus() const;
  int num_ops() const;
  int num_microbatches() const { return global_batch_size / micro_batch_size; }
};

Config config_from_json(const nlohmann::ordered_json& j, const std::string& source);
Config read_config(const std::filesystem::path& path);
nlohmann::ordered_json config_to_json(const Config& c);
// The reference's json.dump(indent=4) text.
std::string config_to_string(const Config& c);

}  // namespace perseus::search
