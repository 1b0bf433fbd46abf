// Parallelization search, phase 1: the operator database loader, model expansion, configuration
// JSON and the performance model. Parity: every golden per-stage prediction under
// ../shared/data/aceso/golden/ is reproduced to 0.01 ms / 0.01 MB (each cell asserted), and the
// automatic recomputation reproduces the golden configurations' recompute flags. Bad input has
// its own file (search_inputs_test.cpp).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/database.hpp"
#include "perseus/search/model.hpp"
#include "perseus/search/perf_model.hpp"
#include "perseus/util/error.hpp"
#include "search_support.hpp"
#include "test_support.hpp"

namespace perseus::search {
namespace {

namespace fs = std::filesystem;
using perseus::search::test::aceso;
using perseus::search::test::load;
using perseus::search::test::Loaded;
using perseus::test::TempDir;
using perseus::test::write_text;

std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> row;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

// ---- golden parity ----

struct Golden {
  std::string name, config, info, database;
};

std::ostream& operator<<(std::ostream& os, const Golden& g) {
  return os << g.name;
}

std::vector<Golden> goldens() {
  std::vector<Golden> out;
  for (int s = 1; s <= 4; ++s) {
    const std::string n = std::to_string(s);
    out.push_back({"gpt_1_3B_" + n + "stages", "golden/run_gpt_small/gpt_1_3B_" + n + "stages.json",
                   "golden/run_gpt_small/info_gpt_1_3B_" + n + "stages.csv", "miniset"});
    out.push_back({"t5_770M_" + n + "stages", "golden/run_t5_small/t5_770M_" + n + "stages.json",
                   "golden/run_t5_small/info_t5_770M_" + n + "stages.csv", "miniset"});
  }
  out.push_back({"gpt_350M_1gpu", "single_gpu_configs/gpt_350M_mbs8_recomp.json",
                 "golden/cost_model_1gpu/info_gpt350M.csv", "eurosys-gpt350M"});
  return out;
}

class SearchGoldenParity : public ::testing::TestWithParam<Golden> {};

TEST_P(SearchGoldenParity, EveryCellMatches) {
  REQUIRE_MINISET();
  const Golden& g = GetParam();
  Loaded l = load(aceso() / g.config, aceso() / g.database);
  PerfModel pm(l.model, l.db);
  PipelineCost cost = pm.evaluate(l.config);
  ASSERT_TRUE(cost.legal) << cost.reason;
  auto rows = read_csv(aceso() / g.info);
  ASSERT_EQ(rows.size(), cost.stages.size() + 1);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"stage-index", "time", "memory(total)",
                                               "memory(normal)", "memory(reserved)"}));
  double max_time = 0.0;
  for (std::size_t i = 0; i < cost.stages.size(); ++i) {
    const auto& r = rows[i + 1];
    ASSERT_EQ(r.size(), 5u);
    EXPECT_EQ(r[0], "stage-" + std::to_string(i));
    const StageCost& s = cost.stages[i];
    EXPECT_NEAR(cost.stage_time_ms[i], std::stod(r[1]), 0.01) << "stage " << i << " time";
    EXPECT_NEAR(s.memory_mb, std::stod(r[2]), 0.01) << "stage " << i << " memory(total)";
    EXPECT_NEAR(s.normal_mb(), std::stod(r[3]), 0.01) << "stage " << i << " memory(normal)";
    EXPECT_NEAR(s.reserved_mb, std::stod(r[4]), 0.01) << "stage " << i << " memory(reserved)";
    max_time = std::max(max_time, std::stod(r[1]));
  }
  EXPECT_NEAR(cost.iteration_ms, max_time, 0.01);
  // The table text is the reference's, byte for byte.
  std::ifstream in(aceso() / g.info, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(stage_table_csv(cost), text.str());
}

INSTANTIATE_TEST_SUITE_P(SearchGolden, SearchGoldenParity, ::testing::ValuesIn(goldens()),
                         [](const auto& info) { return info.param.name; });

TEST(SearchMegatronGrid, GoldenIterationTime) {
  REQUIRE_MINISET();
  Loaded l =
      load(aceso() / "golden/megatron_grid_gpt_small/gpt_1_3B_24layers_megatron_est_73654.json",
           aceso() / "miniset");
  PerfOptions opt;
  opt.memory_limit_mb = 12000;
  PerfModel pm(l.model, l.db, opt);
  PipelineCost cost = pm.evaluate(l.config);
  ASSERT_TRUE(cost.legal) << cost.reason;
  EXPECT_NEAR(cost.iteration_ms, 73654.74, 0.01);
  EXPECT_EQ(cost.bottleneck, 3);
  const double expected[4][4] = {{63770.28, 11472.13, 8912.13, 2560.00},
                                 {63575.45, 9616.06, 7056.06, 2560.00},
                                 {63575.45, 9456.06, 6896.06, 2560.00},
                                 {73654.74, 11704.14, 9144.14, 2560.00}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(cost.stage_time_ms[i], expected[i][0], 0.01);
    EXPECT_NEAR(cost.stages[i].memory_mb, expected[i][1], 0.01);
    EXPECT_NEAR(cost.stages[i].normal_mb(), expected[i][2], 0.01);
    EXPECT_NEAR(cost.stages[i].reserved_mb, expected[i][3], 0.01);
  }
}

// The searched configurations' recompute flags are the automatic choice at 12000 MB.
class SearchAutoRecompute : public ::testing::TestWithParam<Golden> {};

TEST_P(SearchAutoRecompute, ReproducesGoldenFlags) {
  REQUIRE_MINISET();
  const Golden& g = GetParam();
  Loaded l = load(aceso() / g.config, aceso() / g.database);
  PerfModel pm(l.model, l.db);
  auto views = pm.views(l.config);
  for (std::size_t i = 0; i < views.size(); ++i) {
    std::vector<std::uint8_t> rc(static_cast<std::size_t>(views[i].num_ops), 7);
    double mem = pm.choose_recompute(views[i], l.config.micro_batch_size, 12000.0, rc.data());
    EXPECT_EQ(rc, l.config.stages[i].recompute) << "stage " << i;
    EXPECT_LE(mem, 12000.0);
    EXPECT_NEAR(mem, pm.stage(views[i], l.config.micro_batch_size).memory_mb, 1e-6);
  }
}

std::vector<Golden> searched() {
  auto all = goldens();
  all.pop_back();  // the 1-GPU configuration recomputes everything by hand
  return all;
}

INSTANTIATE_TEST_SUITE_P(SearchGolden, SearchAutoRecompute, ::testing::ValuesIn(searched()),
                         [](const auto& info) { return info.param.name; });

TEST(SearchConfig, RoundTripIsByteIdentical) {
  REQUIRE_MINISET();
  for (const auto& g : goldens()) {
    const fs::path p = aceso() / g.config;
    std::ifstream in(p, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(config_to_string(read_config(p)), text.str()) << p;
  }
}

TEST(SearchModel, ExpandsLayers) {
  REQUIRE_MINISET();
  Database db = Database::load(aceso() / "miniset", "gpt_1_3B");
  EXPECT_EQ(db.num_ops(), 16);
  EXPECT_EQ(db.micro_batch_sizes(), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(db.tp_sizes(), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(db.num_algos(), 2);
  Model gpt = Model::build(make_model_desc("gpt", "1_3B", 24), db);
  EXPECT_EQ(gpt.num_ops(), 1 + 13 * 24 + 2);
  EXPECT_EQ(gpt.ops_per_layer(), 13);
  EXPECT_EQ(gpt.op_name(0), "encoder-embedding");
  EXPECT_EQ(gpt.op_name(1), "enc-1st-layernorm");
  EXPECT_EQ(gpt.op_name(14), "enc-1st-layernorm");
  EXPECT_EQ(gpt.op_name(gpt.num_ops() - 1), "gpt-post-process");
  Model big = Model::build(make_model_desc("gpt", "1_3B", 1024), db);
  EXPECT_EQ(big.num_ops(), 1 + 13 * 1024 + 2);

  Database t5db = Database::load(aceso() / "miniset", "t5_770M");
  EXPECT_EQ(t5db.num_algos(), 1);
  Model t5 = Model::build(make_model_desc("t5", "770M", 24), t5db);
  EXPECT_EQ(t5.num_ops(), 1 + 13 * 24 + 1 + 1 + 21 * 24 + 2);
  EXPECT_FALSE(t5.resharding());

  // A model file with its own layout.
  TempDir tmp;
  write_text(tmp.path() / "m.json",
             R"({"model_name": "gpt", "model_size": "1_3B", "num_layers": 2, "seq_length": 1024,
                 "segments": [{"ops": 1}, {"ops": 13, "repeat": "num_layers"}, {"ops": "rest"}]})");
  ModelDesc d = read_model_file(tmp.path() / "m.json");
  EXPECT_EQ(d.fields["seq_length"], 1024);
  EXPECT_EQ(Model::build(d, db).num_ops(), 1 + 13 * 2 + 2);
}

TEST(SearchDatabase, BandwidthAndCollectiveLookups) {
  REQUIRE_MINISET();
  Database db = Database::load(aceso() / "miniset", "gpt_1_3B");
  // 1,2,4,...: 7.41,8.20,10.18,10.57,10.81,10.93,...,11.05 GB/s
  EXPECT_DOUBLE_EQ(db.p2p_us(8.0, false), 8.0 / (10.18 * 0.001));            // log2 = 3 -> column 2
  EXPECT_DOUBLE_EQ(db.p2p_us(1.0, false), 1.0 / (7.41 * 0.001));             // column 0
  EXPECT_DOUBLE_EQ(db.p2p_us(0.008, false), 0.008 / (10.93 * 0.001));        // int(-6.97) = -6
  EXPECT_DOUBLE_EQ(db.p2p_us(1 << 20, false), (1 << 20) / (11.05 * 0.001));  // past the end
  EXPECT_EQ(db.p2p_us(0.0, true), 0.0);
  EXPECT_FALSE(db.has_inter_node_table());
  EXPECT_DOUBLE_EQ(*db.collective_ms(Collective::all_reduce, 2, 12.0), 1.770);
  EXPECT_DOUBLE_EQ(*db.collective_ms(Collective::all_reduce, 2, 12.4), 1.770);
  EXPECT_DOUBLE_EQ(*db.collective_ms(Collective::all_reduce, 2, 13.0), 1.770);  // size - 1
  EXPECT_FALSE(db.collective_ms(Collective::all_reduce, 2, 5000.0).has_value());
  EXPECT_FALSE(db.collective_ms(Collective::all_reduce, 8, 12.0).has_value());  // no table
  EXPECT_EQ(db.find(0, db.mbs_index(16), 0, 0), nullptr);
  EXPECT_EQ(db.tp_index(8), -1);
}

}  // namespace
}  // namespace perseus::search
