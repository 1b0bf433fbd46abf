// `perseus search`: the parallelization search (architecture section 8) from per-operator profiles
// to the fastest legal configuration, per stage count; `search grid`: the Megatron-LM-style grid
// baseline; `search evaluate`: the performance model's per-stage prediction of a configuration in
// the reference's info_*.csv format, and its iteration time.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/search_output.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/search/config.hpp"
#include "perseus/search/database.hpp"
#include "perseus/search/energy.hpp"
#include "perseus/search/model.hpp"
#include "perseus/search/perf_model.hpp"
#include "perseus/search/search.hpp"
#include "perseus/search/synthetic_database.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace {

struct EvaluateArgs {
  std::string config, database, model_file, out, out_config;
  double memory_limit = -1.0;
  int gpus_per_node = 0;
  bool auto_recompute = false;
};

// The model of a configuration: its own fields, or --model-file, which must describe the same
// model.
search::ModelDesc model_for(const search::Config& c, const std::string& model_file,
                            const std::string& config_path) {
  if (model_file.empty()) return c.model;
  search::ModelDesc d = search::read_model_file(model_file);
  if (d.name != c.model.name || d.size != c.model.size || d.num_layers != c.model.num_layers) {
    throw Error(located(model_file, 0, "",
                        "describes " + d.name + " " + d.size + " with " +
                            std::to_string(d.num_layers) + " layers but " + config_path +
                            " is for " + c.model.name + " " + c.model.size + " with " +
                            std::to_string(c.model.num_layers) + " layers"));
  }
  return d;
}

void run_evaluate(const EvaluateArgs& a) {
  if (a.memory_limit != -1.0 && !(a.memory_limit > 0.0 && std::isfinite(a.memory_limit))) {
    throw Error("--memory-limit must be a positive number of MB");
  }
  if (a.auto_recompute && a.memory_limit < 0.0) {
    throw Error("--auto-recompute needs --memory-limit");
  }
  if (a.gpus_per_node < 0) throw Error("--gpus-per-node must be positive");
  search::Config cfg = search::read_config(a.config);
  search::ModelDesc desc = model_for(cfg, a.model_file, a.config);
  search::Database db = search::Database::load(a.database, desc.prefix());
  search::Model model = search::Model::build(desc, db);
  search::PerfOptions opt;
  if (a.memory_limit > 0.0) opt.memory_limit_mb = a.memory_limit;
  opt.gpus_per_node = a.gpus_per_node;
  search::PerfModel pm(model, db, opt);
  if (cfg.num_ops() != model.num_ops()) {
    throw Error(located(a.config, 0, "num_ops_in_each_stage",
                        "stages hold " + std::to_string(cfg.num_ops()) + " operators but " +
                            desc.name + " " + desc.size + " with " +
                            std::to_string(desc.num_layers) + " layers has " +
                            std::to_string(model.num_ops())));
  }
  if (a.auto_recompute) {
    auto views = pm.views(cfg);
    for (std::size_t i = 0; i < views.size(); ++i) {
      pm.choose_recompute(views[i], cfg.micro_batch_size, a.memory_limit,
                          cfg.stages[i].recompute.data());
    }
  }
  search::PipelineCost cost = pm.evaluate(cfg);
  for (std::size_t i = 0; i < cost.stages.size(); ++i) {
    if (!cost.stages[i].legal()) throw Error(a.config + ": illegal configuration: " + cost.reason);
  }
  std::fputs(search::stage_table_csv(cost, "\n").c_str(), stdout);
  std::printf("iteration time: %.2f ms (%d microbatches, bottleneck stage %d)\n", cost.iteration_ms,
              cost.num_microbatches, cost.bottleneck);
  if (!a.out.empty()) write_file_atomic(a.out, search::stage_table_csv(cost));
  if (!a.out_config.empty()) write_file_atomic(a.out_config, search::config_to_string(cfg));
  if (!cost.legal) throw Error(a.config + ": " + cost.reason);
}

struct SearchArgs {
  std::string database, model_file, model = "gpt", model_size, out;
  int num_layers = 0;
  std::string micro_batch_sizes;  // comma separated
  std::string sort_metric = "max_stage_time";
  std::string objective = "time", gpu = "a100", max_slowdown_text = "5%";
  double max_slowdown = 0.05;
  search::SearchOptions options;
  bool quiet = false;
  SearchArgs() { options.gpus_per_node = 0; }
};

std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v <= 0) {
      throw Error(option + ": expected positive integers separated by commas, got '" + text + "'");
    }
    out.push_back(v);
  }
  return out;
}

struct Inputs {
  search::Database db;
  search::Model model;
};

Inputs load_inputs(SearchArgs& a) {
  if (a.database.empty()) throw Error("--database is required");
  if (a.options.gpus_per_node == 0) throw Error("--gpus-per-node is required");
  if (a.options.global_batch_size == 0) throw Error("--global-batch-size is required");
  if (a.options.memory_limit_mb == 0.0) throw Error("--memory-limit is required");
  search::ModelDesc desc;
  if (!a.model_file.empty()) {
    desc = search::read_model_file(a.model_file);
  } else {
    if (a.model_size.empty()) throw Error("--model-size (or --model-file) is required");
    if (a.num_layers <= 0) throw Error("--num-layers (or --model-file) is required");
    desc = search::make_model_desc(a.model, a.model_size, a.num_layers);
  }
  if (a.objective != "time" && a.objective != "energy") {
    throw Error("--objective must be time or energy, got '" + a.objective + "'");
  }
  a.max_slowdown =
      naming("--max-slowdown", [&] { return plan::parse_slowdown(a.max_slowdown_text); });
  if (a.objective == "energy") naming("--gpu", [&] { return &profile::gpu_model(a.gpu); });
  if (a.sort_metric == "total_gpu_time") {
    a.options.sort_metric = search::SortMetric::total_gpu_time;
  } else if (a.sort_metric != "max_stage_time") {
    throw Error("--sort-metric must be max_stage_time or total_gpu_time, got '" + a.sort_metric +
                "'");
  }
  if (!a.micro_batch_sizes.empty()) {
    a.options.micro_batch_sizes = parse_int_list(a.micro_batch_sizes, "--micro-batch-sizes");
  }
  search::Database db = search::Database::load(a.database, desc.prefix());
  search::Model model = search::Model::build(desc, db);
  return {std::move(db), std::move(model)};
}

// Where and how the search's results go.
SearchOutput output_of(const SearchArgs& a) {
  return {a.out, a.quiet, a.options.global_batch_size, a.options.memory_limit_mb};
}

// The energy objective: the candidates of every stage count planned on the GPU model.
search::EnergyChoice energy_choice(const SearchArgs& a, const search::SearchResult& r,
                                   const Inputs& in) {
  std::vector<search::Config> candidates;
  for (const auto& s : r.per_stage_count) {
    candidates.insert(candidates.end(), s.candidates.begin(), s.candidates.end());
  }
  search::PerfModel pm(in.model, in.db, search::perf_options(a.options));
  return search::choose_for_energy(pm, candidates, search::EnergyOptions{a.gpu, a.max_slowdown});
}

void run_search(SearchArgs& a) {
  Inputs in = load_inputs(a);
  const search::SearchResult r = search::run_search(in.model, in.db, a.options);
  report_search(output_of(a), r, "search");
  if (a.objective == "energy") {
    report_energy(output_of(a), energy_choice(a, r, in), a.gpu, a.max_slowdown);
  }
}

void run_grid(SearchArgs& a) {
  Inputs in = load_inputs(a);
  report_search(output_of(a), search::run_grid(in.model, in.db, a.options), "grid");
}

void add_search_options(CLI::App* c, const std::shared_ptr<SearchArgs>& a, bool walk) {
  c->add_option("--database", a->database,
                "Directory of per-operator profiles, collective and p2p tables (required)");
  c->add_option("--model-file", a->model_file, "Model description JSON");
  c->add_option("--model", a->model, "Model family: gpt, t5 or resnet")->capture_default_str();
  c->add_option("--model-size", a->model_size, "Model size as in the profile names, e.g. 1_3B");
  c->add_option("--num-layers", a->num_layers, "Number of layers");
  c->add_option("--nodes", a->options.num_nodes, "Number of nodes")->capture_default_str();
  c->add_option("--gpus-per-node", a->options.gpus_per_node, "GPUs per node (required)");
  c->add_option("--global-batch-size", a->options.global_batch_size,
                "Samples per iteration (required)");
  c->add_option("--micro-batch-sizes", a->micro_batch_sizes,
                "Candidate microbatch sizes, e.g. 1,2,4,8 (default: every profiled one)");
  c->add_option("--memory-limit", a->options.memory_limit_mb,
                "Per-GPU memory limit in MB (required)");
  c->add_option("--min-stages", a->options.min_stages, "Fewest pipeline stages")
      ->capture_default_str();
  c->add_option("--max-stages", a->options.max_stages,
                "Most pipeline stages (default: min(GPUs, 16))");
  c->add_option("--max-tp", a->options.max_tp,
                "Largest tensor-parallel degree (default: GPUs "
                "per node)");
  if (walk) {
    c->add_option("--max-hops", a->options.max_hops, "Search depth without improvement")
        ->capture_default_str();
    c->add_option("--max-evaluations", a->options.max_evaluations,
                  "Stage evaluations per stage count (default: 2000000)");
    c->add_option("--threads", a->options.threads,
                  "Stage counts searched in parallel (default: hardware threads)");
    c->add_option("--finetune-after-trial", a->options.finetune_rounds,
                  "Rounds of per-operator fine-tuning (tp/dp/algo per operator inside a stage) "
                  "of each stage count's best configurations; 0 keeps one setting per stage")
        ->capture_default_str();
    c->add_option("--sort-metric", a->sort_metric,
                  "How the walk ranks neighbours when none is faster: max_stage_time or "
                  "total_gpu_time (stage time x GPUs, summed)")
        ->capture_default_str();
    c->add_option("--objective", a->objective,
                  "time (fastest configuration) or energy (least energy per iteration within "
                  "--max-slowdown of the fastest, planned with the frontier planner)")
        ->capture_default_str();
    c->add_option("--max-slowdown", a->max_slowdown_text,
                  "With --objective energy: how much slower than the fastest configuration "
                  "the energy-optimal one may be, e.g. 5%")
        ->capture_default_str();
    c->add_option("--gpu", a->gpu,
                  "With --objective energy: GPU model for stage power (a100, h100, a40)")
        ->capture_default_str();
    c->add_option("--peak-mem-in-backward", a->options.peak_mem_in_backward_mb,
                  "MB of headroom recomputation keeps below --memory-limit for the backward "
                  "pass's peak")
        ->capture_default_str();
  }
  c->add_option("--out-dir,--out", a->out,
                "Directory for the configuration JSON and per-stage table of each stage count")
      ->check(output_directory());
  c->add_flag("--quiet", a->quiet, "Print nothing on success");
}

}  // namespace

void add_search_command(CLI::App& app) {
  auto* search = app.add_subcommand(
      "search",
      "Parallelization search from per-operator profiles (docs/architecture.md, section 8)");
  search->require_subcommand(0, 1);
  auto sa = std::make_shared<SearchArgs>();
  add_search_options(search, sa, true);
  search->callback([search, sa] {
    if (search->get_subcommands().empty()) run_search(*sa);
  });

  auto* grid = search->add_subcommand(
      "grid", "Megatron-LM-style grid baseline (uniform stages, one tp/dp for all)");
  auto ga = std::make_shared<SearchArgs>();
  add_search_options(grid, ga, false);
  grid->callback([ga] { run_grid(*ga); });

  auto* ev = search->add_subcommand(
      "evaluate", "Per-stage time and memory of a configuration (reference info_*.csv format)");
  auto ea = std::make_shared<EvaluateArgs>();
  ev->add_option("--config", ea->config, "Configuration JSON (Aceso layout) (required)")
      ->required();
  ev->add_option("--database", ea->database,
                 "Directory of per-operator profiles, collective and p2p tables (required)")
      ->required();
  ev->add_option("--model-file", ea->model_file,
                 "Model description JSON (default: the configuration's model fields)");
  ev->add_option("--memory-limit", ea->memory_limit,
                 "Per-GPU memory limit in MB (exit 1 when a stage exceeds it)");
  ev->add_option("--gpus-per-node", ea->gpus_per_node,
                 "GPUs per node, for cross-node transfers (default: all in one node)");
  ev->add_flag("--auto-recompute", ea->auto_recompute,
               "Replace the recompute flags by the automatic choice for --memory-limit");
  ev->add_option("--out", ea->out, "Write the per-stage table to this CSV file");
  ev->add_option("--out-config", ea->out_config, "Write the evaluated configuration JSON");
  ev->callback([ea] { run_evaluate(*ea); });

  auto* db = search->add_subcommand(
      "synth-db",
      "Write a synthetic operator database (a GPT on a GPU model; docs/search.md) for --database");
  auto da = std::make_shared<search::SyntheticDatabaseSpec>();
  auto db_out = std::make_shared<std::string>();
  db->add_option("--gpu", da->gpu, "GPU model: " + join(profile::gpu_model_names(), ", "))
      ->capture_default_str();
  db->add_option("--model-size", da->size, "GPT size (350M, 1_3B, 2_6B, 6_7B, 13B)")
      ->capture_default_str();
  db->add_option("--micro-batch-sizes", da->micro_batch_sizes, "Microbatch sizes to profile")
      ->delimiter(',');
  db->add_option("--tensor-parallel", da->tensor_parallel, "Tensor-parallel degrees to profile")
      ->delimiter(',');
  db->add_option("--collective-gpus", da->collective_gpus, "GPU counts of the collective tables")
      ->delimiter(',');
  db->add_option("--out-dir,--out", *db_out, "Output directory (required)")
      ->required()
      ->check(output_directory());
  db->callback([da, db_out] {
    const auto files = search::write_synthetic_database(*da, *db_out);
    std::printf("wrote %zu files of a synthetic gpt_%s database on %s to %s\n", files.size(),
                da->size.c_str(), da->gpu.c_str(), db_out->c_str());
  });
}

}  // namespace perseus::cli
