#include "perseus/search/search.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "perseus/search/searcher.hpp"
#include "perseus/util/error.hpp"

namespace perseus::search {

using detail::pick_best;
using detail::power_of_two;
using detail::stage_count_limit;

namespace {

// "tp 2 algo 0,1; tp 4 algo 1": the (tp, algo) pairs the database profiles for some microbatch
// size but not for `mbs`.
std::string missing_shapes(const Database& db, int mbs) {
  std::string out;
  for (int tp : db.tp_sizes()) {
    std::string algos;
    for (int a = 0; a < db.num_algos(); ++a) {
      if (!db.profiled(mbs, tp, a)) algos += (algos.empty() ? "" : ",") + std::to_string(a);
    }
    if (algos.empty()) continue;
    out += (out.empty() ? "tp " : "; tp ") + std::to_string(tp) + " algo " + algos;
  }
  return out;
}

}  // namespace

PerfOptions perf_options(const SearchOptions& o) {
  PerfOptions p;
  p.memory_limit_mb = o.memory_limit_mb;
  p.gpus_per_node = o.gpus_per_node;
  return p;
}

std::vector<std::string> validate(const SearchOptions& o, const Model& model, const Database& db) {
  if (o.num_nodes <= 0) throw Error("--nodes must be positive");
  if (o.gpus_per_node <= 0) throw Error("--gpus-per-node must be positive");
  if (o.global_batch_size <= 0) throw Error("--global-batch-size must be positive");
  if (!(o.memory_limit_mb > 0.0) || !std::isfinite(o.memory_limit_mb)) {
    throw Error("--memory-limit must be a positive number of MB");
  }
  if (o.min_stages < 1) throw Error("--min-stages must be at least 1");
  if (o.max_stages < 0) throw Error("--max-stages must be positive");
  if (o.max_stages > 0 && o.max_stages < o.min_stages) {
    throw Error("--max-stages must not be below --min-stages");
  }
  if (o.min_stages > std::min(o.num_gpus(), model.num_ops())) {
    throw Error("--min-stages " + std::to_string(o.min_stages) + " exceeds the " +
                std::to_string(o.num_gpus()) + " GPUs");
  }
  if (o.max_tp < 0 || (o.max_tp > 0 && !power_of_two(o.max_tp))) {
    throw Error("--max-tp must be a power of two");
  }
  if (o.max_hops < 0) throw Error("--max-hops must be >= 0");
  if (o.max_evaluations < 0) throw Error("--max-evaluations must be >= 0");
  if (o.threads < 0) throw Error("--threads must be >= 0");
  if (o.finetune_rounds < 0) throw Error("--finetune-after-trial must be >= 0");
  if (!(o.peak_mem_in_backward_mb >= 0.0 && o.peak_mem_in_backward_mb < o.memory_limit_mb)) {
    throw Error("--peak-mem-in-backward must be at least 0 and below --memory-limit");
  }
  std::vector<std::string> notices;
  std::string listed;
  bool any = o.micro_batch_sizes.empty();
  for (int mbs : o.micro_batch_sizes) {
    listed += (listed.empty() ? "" : ",") + std::to_string(mbs);
    const std::string what = "--micro-batch-sizes: " + std::to_string(mbs);
    const std::string skipped = "; configurations that need it are skipped";
    if (db.mbs_index(mbs) < 0) {
      notices.push_back(what + " was not profiled in " + db.dir().string() + skipped);
      continue;
    }
    any = true;
    if (std::string gaps = missing_shapes(db, mbs); !gaps.empty()) {
      notices.push_back(what + " has no profile for " + gaps + " in " + db.dir().string() +
                        skipped);
    }
  }
  if (!any) {
    throw Error("--micro-batch-sizes: none of " + listed + " was profiled in " + db.dir().string());
  }
  return notices;
}

SearchResult run_search(const Model& model, const Database& db, const SearchOptions& o) {
  std::vector<std::string> notices = validate(o, model, db);
  const int lo = o.min_stages, hi = stage_count_limit(o, model);
  const int count = std::max(0, hi - lo + 1);
  std::vector<StageCountResult> results(static_cast<std::size_t>(count));
  int threads = o.threads > 0 ? o.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, count));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int k = next++; k < count; k = next++) {
      detail::Searcher s(model, db, o, lo + k);
      results[static_cast<std::size_t>(k)] = s.run();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  SearchResult out = pick_best(std::move(results));
  out.notices = std::move(notices);
  return out;
}

}  // namespace perseus::search
