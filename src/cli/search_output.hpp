// What `perseus search` and `search grid` print and write: one line per stage count, the best
// configuration and every stage count's configuration and stage table under --out; with the
// energy objective, the time- and energy-optimal configurations side by side and energy.csv.
#pragma once

#include <string>

#include "perseus/search/energy.hpp"
#include "perseus/search/search.hpp"

namespace perseus::cli {

struct SearchOutput {
  std::string out;  // directory for the files; empty: print only
  bool quiet = false;
  int global_batch_size = 0;
  double memory_limit_mb = 0.0;
};

// Prints one line per stage count and writes the configurations and tables under `out`
// (`kind` "grid" names the grid's files apart). Throws when no configuration fits the memory.
void report_search(const SearchOutput& o, const search::SearchResult& r, const std::string& kind);

void report_energy(const SearchOutput& o, const search::EnergyChoice& choice,
                   const std::string& gpu, double max_slowdown);

}  // namespace perseus::cli
