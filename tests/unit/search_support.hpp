// Shared by the parallelization-search tests: the Aceso reference data's location (tests skip
// when the shared data is absent), one configuration loaded with its database and model, and the
// cluster the reference searched on.
#pragma once

#include <filesystem>
#include <utility>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/database.hpp"
#include "perseus/search/model.hpp"
#include "perseus/search/search.hpp"
#include "test_support.hpp"

namespace perseus::search::test {

inline std::filesystem::path aceso() {
  return perseus::test::shared_data() / "aceso";
}

inline std::filesystem::path miniset() {
  return aceso() / "miniset";
}

#define REQUIRE_MINISET()                                                                \
  do {                                                                                   \
    if (!std::filesystem::exists(perseus::search::test::miniset())) {                    \
      GTEST_SKIP() << "aceso miniset not found at " << perseus::search::test::miniset(); \
    }                                                                                    \
  } while (0)

// Everything needed to evaluate one configuration.
struct Loaded {
  Config config;
  Database db;
  Model model;
};

inline Loaded load(const std::filesystem::path& config_path, const std::filesystem::path& db_dir) {
  Config c = read_config(config_path);
  Database db = Database::load(db_dir, c.model.prefix());
  Model m = Model::build(c.model, db);
  return {std::move(c), std::move(db), std::move(m)};
}

// One node of 4 GPUs, 12000 MB each, as the reference's small runs.
inline SearchOptions four_gpus(int global_batch, std::vector<int> micro_batch_sizes) {
  SearchOptions o;
  o.num_nodes = 1;
  o.gpus_per_node = 4;
  o.global_batch_size = global_batch;
  o.micro_batch_sizes = std::move(micro_batch_sizes);
  o.memory_limit_mb = 12000;
  return o;
}

}  // namespace perseus::search::test
