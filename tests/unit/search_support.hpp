// Shared by the parallelization-search tests: the Aceso miniset's location (tests skip when the
// shared data is absent) and the cluster the reference searched on.
#pragma once

#include <filesystem>
#include <vector>

#include "perseus/search/search.hpp"
#include "test_support.hpp"

namespace perseus::search::test {

inline std::filesystem::path miniset() {
  return perseus::test::shared_data() / "aceso" / "miniset";
}

#define REQUIRE_MINISET()                                                                \
  do {                                                                                   \
    if (!std::filesystem::exists(perseus::search::test::miniset())) {                    \
      GTEST_SKIP() << "aceso miniset not found at " << perseus::search::test::miniset(); \
    }                                                                                    \
  } while (0)

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
