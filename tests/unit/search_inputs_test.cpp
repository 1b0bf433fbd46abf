// Parallelization search inputs that are wrong: a database with missing or corrupt files (each
// error names its file, line and column), a configuration with a bad field (named), and
// configurations the performance model cannot cost (illegal, with the reason).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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
using perseus::test::error_of;
using perseus::test::TempDir;
using perseus::test::write_text;

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
  // A size written as users write it (issue 51.6): the sizes present, and the one meant.
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1.0"); }),
                  "no operator profiles toy_1.0_mbs<M>_tp<T>_algo<A>.csv found; it holds profiles "
                  "of toy_1 (--model NAME --model-size SIZE name NAME_SIZE)");
  write_text(tmp.path() / "toy_1_5_mbs1_tp1_algo0.csv", "");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1.5"); }),
                  "it holds profiles of toy_1, toy_1_5 (profile names write the size with '_' "
                  "for '.': toy_1_5)");
  fs::remove(tmp.path() / "toy_1_5_mbs1_tp1_algo0.csv");
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
  EXPECT_CONTAINS(e, "field 'forward-compute': not a number 'abc'");

  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,1,0\n");
  e = error_of([&] { Database::load(tmp.path(), "toy_1"); });
  EXPECT_CONTAINS(e, f.string() + ":2");
  EXPECT_CONTAINS(e, "expected 9 columns");
  EXPECT_CONTAINS(e, "found 8");

  write_text(f, std::string(kHeader) + "a,1,2,1,1,0,-1,0,0\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  "field 'activations': must be >= 0, got '-1'");

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
  EXPECT_CONTAINS(e, prim.string() + ":3: field 'data_size(MB)': not an integer '8.5'");
  write_text(prim, "data_size(MB),time(ms)\n-4,0.5\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  prim.string() + ":2: field 'data_size(MB)': must be >= 0, got '-4'");
  write_text(prim, "data_size(MB),time(ms)\n4,0.5\n4.0,0.6\n");
  EXPECT_CONTAINS(error_of([&] { Database::load(tmp.path(), "toy_1"); }),
                  prim.string() + ":3: field 'data_size(MB)': duplicate size 4.0");
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
  REQUIRE_MINISET();
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
  REQUIRE_MINISET();
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
  REQUIRE_MINISET();
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
  REQUIRE_MINISET();
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
