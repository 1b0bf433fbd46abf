// Parallelization search, phase 1: the operator database loader, model expansion, configuration
// JSON and the performance model. Parity: every golden per-stage prediction under
// ../shared/data/aceso/golden/ is reproduced to 0.01 ms / 0.01 MB (each cell asserted), and the
// automatic recomputation reproduces the golden configurations' recompute flags. Bad input: each
// error names its file, line and field; missing entries make a configuration illegal with a reason.
#include <algorithm>
#include <cmath>
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
#include "test_support.hpp"

namespace perseus::search {
namespace {

namespace fs = std::filesystem;
using perseus::test::error_of;
using perseus::test::shared_data;
using perseus::test::TempDir;
using perseus::test::write_text;

fs::path aceso() {
  return shared_data() / "aceso";
}

#define REQUIRE_ACESO_DATA()                                        \
  do {                                                              \
    if (!fs::exists(aceso() / "miniset")) {                         \
      GTEST_SKIP() << "aceso shared data not found at " << aceso(); \
    }                                                               \
  } while (0)

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

// Everything needed to evaluate one configuration.
struct Loaded {
  Config config;
  Database db;
  Model model;
};

Loaded load(const fs::path& config_path, const fs::path& db_dir) {
  Config c = read_config(config_path);
  Database db = Database::load(db_dir, c.model.prefix());
  Model m = Model::build(c.model, db);
  return {std::move(c), std::move(db), std::move(m)};
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
  REQUIRE_ACESO_DATA();
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
  REQUIRE_ACESO_DATA();
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
  REQUIRE_ACESO_DATA();
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
  REQUIRE_ACESO_DATA();
  for (const auto& g : goldens()) {
    const fs::path p = aceso() / g.config;
    std::ifstream in(p, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(config_to_string(read_config(p)), text.str()) << p;
  }
}

TEST(SearchModel, ExpandsLayers) {
  REQUIRE_ACESO_DATA();
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
  REQUIRE_ACESO_DATA();
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

// ---- bad input ----

const char* kHeader =
    "op_name,forward-compute,backward-compute,input_size,output_size,weights,activations,"
    "fwd_reserved,bwd_reserved\n";

// A two-operator database "toy_1" in `dir`.
void write_toy(const fs::path& dir) {
  write_text(dir / "toy_1_mbs1_tp1_algo0.csv",
             std::string(kHeader) + "a,1,2,1,1,0,1,0,0\nb,1,2,1,1,0,1,0,0\n");
  write_text(dir / "p2p_intra_node.csv", "1,2\n5,10\n");
}

TEST(SearchDatabase, MissingFiles) {
  TempDir tmp;
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path() / "nope", "toy_1"); }),
                  "database directory not found");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  "no operator profiles toy_1_mbs<M>_tp<T>_algo<A>.csv");
  write_toy(tmp.path());
  fs::remove(tmp.path() / "p2p_intra_node.csv");
  std::string e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, "p2p_intra_node.csv");
  EXPECT_CONTAINS(e, "not found");
  write_toy(tmp.path());
  fs::rename(tmp.path() / "toy_1_mbs1_tp1_algo0.csv", tmp.path() / "toy_1_mbs1_tp2_algo0.csv");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  "no toy_1_mbs<M>_tp1_algo0.csv found");
}

TEST(SearchDatabase, CorruptCsvNamesFileLineAndColumn) {
  TempDir tmp;
  write_toy(tmp.path());
  const fs::path f = tmp.path() / "toy_1_mbs2_tp1_algo0.csv";
  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,1,0,0\nb,abc,2,1,1,0,1,0,0\n");
  std::string e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, f.string() + ":3");
  EXPECT_CONTAINS(e, "forward-compute");
  EXPECT_CONTAINS(e, "bad number 'abc'");

  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,1,0\n");
  e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, f.string() + ":2");
  EXPECT_CONTAINS(e, "expected 9 columns");
  EXPECT_CONTAINS(e, "found 8");

  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,-1,0,0\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }), "negative value");

  write_text(f, std::string(kHeader) + "zz,1,2,1,1,0,1,0,0\n");
  e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, f.string() + ":2");
  EXPECT_CONTAINS(e, "unknown operator 'zz'");

  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,1,0,0\na,1,2,1,1,0,1,0,0\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }), "duplicate operator 'a'");
  fs::remove(f);

  const fs::path prim = tmp.path() / "prim_toy_1_all_reduce_2gpus.csv";
  write_text(prim, "data_size(MB),time(ms)\n4,0.5\n8.5,1\n");
  e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, prim.string() + ":3");
  EXPECT_CONTAINS(e, "whole number of MB");
  write_text(prim, "data_size(MB),time(ms)\n4,0.5,9\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }), prim.string() + ":2");
  fs::remove(prim);

  write_text(tmp.path() / "p2p_intra_node.csv", "1,2\n5\n");
  e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, "p2p_intra_node.csv:2");
  write_text(tmp.path() / "p2p_intra_node.csv", "1,2\n5,0\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  "bandwidth must be positive");
}

TEST(SearchConfig, BadConfigNamesField) {
  REQUIRE_ACESO_DATA();
  TempDir tmp;
  const fs::path src = aceso() / "golden/run_gpt_small/gpt_1_3B_2stages.json";
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(src));
  auto bad = [&](auto edit) {
    nlohmann::ordered_json k = j;
    edit(k);
    write_text(tmp.path() / "c.json", k.dump());
    return error_of([&] { read_config(tmp.path() / "c.json"); });
  };
  EXPECT_CONTAINS(bad([](auto& k) { k.erase("micro_batch_size"); }),
                  "field 'micro_batch_size': missing");
  EXPECT_CONTAINS(bad([](auto& k) { k["num_ops_in_each_stage"][1] = 3; }),
                  "field 'model_parallel_size_of_each_op[1]'");
  EXPECT_CONTAINS(bad([](auto& k) { k["recompute_ops"][0][5] = 2; }), "recompute_ops[0][5]");
  EXPECT_CONTAINS(bad([](auto& k) { k["num_gpus"][0] = 4; }), "num_gpus[0]");
  EXPECT_CONTAINS(bad([](auto& k) { k["model_name"] = "bert"; }), "unknown model 'bert'");
  const std::string c = (tmp.path() / "c.json").string();
  EXPECT_CONTAINS(bad([](auto& k) { k["num_stages"] = 2.5; }),
                  c + ": field 'num_stages': must be an integer in [1, 65536], got 2.5");
  EXPECT_CONTAINS(bad([](auto& k) { k["model_parallel_size_of_each_op"][0][0] = 3; }),
                  "field 'model_parallel_size_of_each_op[0][0]': must be a power of two, got 3");
  EXPECT_CONTAINS(bad([](auto& k) { k["checkpoint_activations"][1] = 1; }),
                  "field 'checkpoint_activations[1]': must be true or false, got 1");
  EXPECT_CONTAINS(bad([](auto& k) { k["model_size"] = ""; }),
                  "field 'model_size': must be a non-empty string");
  EXPECT_CONTAINS(bad([](auto& k) {
                    k["segments"] = nlohmann::ordered_json::array({{{"x", 1}}});
                  }),
                  "field 'segments[0].ops': missing");
  EXPECT_CONTAINS(bad([](auto& k) { k["optimizer_ratio"] = -2; }),
                  "field 'optimizer_ratio': must be a finite number >= 0, got -2");
  write_text(tmp.path() / "c.json", "{ not json");
  EXPECT_CONTAINS(error_of([&] { read_config(tmp.path() / "c.json"); }),
                  c + ":1: invalid JSON at byte 4: syntax error while parsing object key");
}

TEST(SearchPerfModel, MissingProfileEntryIsIllegalWithReason) {
  REQUIRE_ACESO_DATA();
  Loaded l = load(aceso() / "golden/run_gpt_small/gpt_1_3B_4stages.json", aceso() / "miniset");
  PerfModel pm(l.model, l.db);
  // microbatch 16 was not profiled
  Config c = l.config;
  c.micro_batch_size = 16;
  PipelineCost cost = pm.evaluate(c);
  EXPECT_FALSE(cost.legal);
  EXPECT_CONTAINS(cost.reason, "stage 0 operator 0 (encoder-embedding)");
  EXPECT_CONTAINS(cost.reason, "no profile for mbs 16, tp 1, algo 0");
  // tp 8 was not profiled
  c = l.config;
  c.stages[2] = StageConfig::uniform(c.stages[2].num_ops(), 8, 1);
  cost = pm.evaluate(c);
  EXPECT_FALSE(cost.legal);
  EXPECT_CONTAINS(cost.reason, "stage 2");
  EXPECT_CONTAINS(cost.reason, "tp 8");
  // dp 2 leaves microbatch 1 undivisible
  c = l.config;
  c.stages[1] = StageConfig::uniform(c.stages[1].num_ops(), 1, 2);
  cost = pm.evaluate(c);
  EXPECT_FALSE(cost.legal);
  EXPECT_CONTAINS(cost.reason, "not divisible by dp 2");
  // A wrong operator count is bad input.
  c = l.config;
  c.stages[0] = StageConfig::uniform(5, 1, 1);
  EXPECT_CONTAINS(error_of([&] { pm.evaluate(c); }), "operators but model gpt 1_3B");
}

TEST(SearchPerfModel, ReshardingNeedsCollectiveTables) {
  REQUIRE_ACESO_DATA();
  // One stage of 2 GPUs: tp 2 for the embedding and the first layernorm, dp 2 afterwards.
  Database db = Database::load(aceso() / "miniset", "gpt_1_3B");
  Model m = Model::build(make_model_desc("gpt", "1_3B", 24), db);
  Config c;
  c.model = m.desc();
  c.global_batch_size = 512;
  c.micro_batch_size = 2;
  c.stages.push_back(StageConfig::uniform(m.num_ops(), 1, 2));
  c.stages[0].tp[0] = c.stages[0].tp[1] = 2;
  c.stages[0].dp[0] = c.stages[0].dp[1] = 1;
  PerfModel pm(m, db);
  PipelineCost cost = pm.evaluate(c);
  ASSERT_TRUE(cost.legal) << cost.reason;
  EXPECT_GT(cost.stages[0].reshard_bwd_ms, 0.0);  // split forward, all-gather backward
  EXPECT_EQ(cost.stages[0].reshard_fwd_ms, 0.0);

  // The same database without its collective tables: illegal, naming the table.
  TempDir tmp;
  for (const auto& e : fs::directory_iterator(aceso() / "miniset")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("prim_", 0) != 0) fs::create_symlink(e.path(), tmp.path() / name);
  }
  Database bare = Database::load(tmp.path(), "gpt_1_3B");
  Model m2 = Model::build(make_model_desc("gpt", "1_3B", 24), bare);
  PerfModel pm2(m2, bare);
  cost = pm2.evaluate(c);
  EXPECT_FALSE(cost.legal);
  EXPECT_CONTAINS(cost.reason, "stage 0 operator 2 (enc-attention-qkv)");
  EXPECT_CONTAINS(cost.reason, "prim_gpt_1_3B_all_gather_2gpus.csv");
}

TEST(SearchPerfModel, ImpossibleMemoryLimit) {
  REQUIRE_ACESO_DATA();
  Loaded l = load(aceso() / "golden/run_gpt_small/gpt_1_3B_1stages.json", aceso() / "miniset");
  PerfOptions opt;
  opt.memory_limit_mb = 1000;
  PerfModel pm(l.model, l.db, opt);
  auto views = pm.views(l.config);
  std::vector<std::uint8_t> rc(static_cast<std::size_t>(views[0].num_ops));
  double mem = pm.choose_recompute(views[0], l.config.micro_batch_size, 1000, rc.data());
  EXPECT_GT(mem, 1000.0);  // recomputing everything it may is not enough
  l.config.stages[0].recompute = rc;
  PipelineCost cost = pm.evaluate(l.config);
  EXPECT_FALSE(cost.legal);
  EXPECT_CONTAINS(cost.reason, "stage 0 needs");
  EXPECT_CONTAINS(cost.reason, "over the memory limit of 1000.00 MB");
  EXPECT_NEAR(cost.stages[0].memory_mb, mem, 1e-6);
  // A generous limit needs no recomputation.
  mem = pm.choose_recompute(views[0], l.config.micro_batch_size, 1e9, rc.data());
  EXPECT_EQ(std::count(rc.begin(), rc.end(), 1), 0);
  EXPECT_GT(mem, 12000.0);
}

}  // namespace
}  // namespace perseus::search
