#include "cli/search_output.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

// Prints one line per stage count and writes the configurations and tables under --out.
void report_search(const SearchOutput& a, const search::SearchResult& r, const std::string& kind) {
  namespace fs = std::filesystem;
  for (const auto& notice : r.notices)
    std::fprintf(stderr, "perseus: notice: %s\n", notice.c_str());
  if (!a.out.empty()) ensure_writable_dir(a.out);
  if (!a.quiet) {
    std::printf("%-7s %16s %14s %12s %12s %10s %9s\n", "stages", "iteration (ms)", "samples/s",
                "memory (MB)", "evaluations", "configs", "time (s)");
  }
  for (const auto& s : r.per_stage_count) {
    double mem = 0.0;
    for (const auto& st : s.cost.stages) mem = std::max(mem, st.memory_mb);
    if (!a.quiet) {
      if (s.found) {
        std::printf("%-7d %16.2f %14.2f %12.0f %12lld %10lld %9.2f\n", s.num_stages,
                    s.cost.iteration_ms, a.global_batch_size / (s.cost.iteration_ms / 1000.0), mem,
                    s.evaluations, s.configurations, s.seconds);
      } else {
        std::printf("%-7d %16s %14s %12s %12lld %10lld %9.2f\n", s.num_stages, "none", "-", "-",
                    s.evaluations, s.configurations, s.seconds);
      }
    }
    if (!a.out.empty() && s.found) {
      const auto& d = s.config.model;
      const std::string stem =
          d.name + "_" + d.size + "_" + std::to_string(s.num_stages) + "stages";
      write_file_atomic(fs::path(a.out) / (stem + (kind == "grid" ? "_grid" : "") + ".json"),
                        search::config_to_string(s.config));
      write_file_atomic(
          fs::path(a.out) / ("info_" + stem + (kind == "grid" ? "_grid" : "") + ".csv"),
          search::stage_table_csv(s.cost));
    }
  }
  const auto* best = r.best_result();
  if (best == nullptr) {
    char limit[64];
    std::snprintf(limit, sizeof limit, "%.0f", a.memory_limit_mb);
    throw Error(std::string("no configuration fits the memory limit of ") + limit + " MB");
  }
  if (!a.quiet) {
    std::printf("best: %d stages, %.2f ms per iteration (%s)\n", best->num_stages,
                best->cost.iteration_ms, kind.c_str());
  }
  if (!a.out.empty()) {
    write_file_atomic(fs::path(a.out) / (kind == "grid" ? "best_grid.json" : "best.json"),
                      search::config_to_string(best->config));
  }
}

namespace {

// "4 stages (1,1,1,1 GPUs), microbatch 1"; "1 stage (1 GPU), microbatch 4"
std::vector<std::string> stage_gpus(const search::Config& c) {
  std::vector<std::string> out;
  for (const auto& s : c.stages) out.push_back(std::to_string(s.num_gpus));
  return out;
}

std::string describe_config(const search::Config& c) {
  const std::string gpus = join(stage_gpus(c), ",");
  return std::to_string(c.num_stages()) + (c.num_stages() == 1 ? " stage (" : " stages (") + gpus +
         (gpus == "1" ? " GPU), microbatch " : " GPUs), microbatch ") +
         std::to_string(c.micro_batch_size);
}

// energy.csv: every candidate, planned or (slower than the bound) not.
std::string energy_csv(const search::EnergyChoice& choice) {
  std::string csv =
      "stages,micro_batch_size,gpus,model_time_ms,within_bound,all_max_time_s,all_max_energy_j,"
      "fastest_energy_j,planned_time_s,planned_energy_j\n";
  for (const auto& c : choice.candidates) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%d,%d,%s,%.2f,%d", c.config.num_stages(),
                  c.config.micro_batch_size, join(stage_gpus(c.config), " ").c_str(),
                  c.cost.iteration_ms, c.within_bound ? 1 : 0);
    csv += buf;
    if (c.within_bound) {  // planned; the others are slower than the bound and were not
      std::snprintf(buf, sizeof buf, ",%.6f,%.2f,%.2f,%.6f,%.2f", c.energy.all_max_time_s,
                    c.energy.all_max_energy_j, c.energy.fastest_energy_j, c.energy.planned_time_s,
                    c.energy.planned_energy_j);
      csv += buf;
    } else {
      csv += ",,,,,";
    }
    csv += "\n";
  }
  return csv;
}

void print_energy_line(const char* label, const search::EnergyCandidate& c, double time_s,
                       double energy_j) {
  std::printf("%-30s %14.2f %14.2f %12.2f %9.2f %%  %s\n", label, c.cost.iteration_ms,
              time_s * 1000.0, energy_j / 1000.0,
              100.0 * (1.0 - energy_j / c.energy.all_max_energy_j),
              describe_config(c.config).c_str());
}

}  // namespace

void report_energy(const SearchOutput& a, const search::EnergyChoice& choice,
                   const std::string& gpu, double max_slowdown) {
  const auto& fast = choice.candidates[static_cast<std::size_t>(choice.time_optimal)];
  const auto& lean = choice.candidates[static_cast<std::size_t>(choice.energy_optimal)];
  if (!a.quiet) {
    std::printf(
        "\nenergy objective: GPU model %s, iteration within +%.2f %% of the fastest "
        "(%.2f ms)\n",
        gpu.c_str(), 100.0 * max_slowdown, choice.bound_s * 1000.0);
    std::printf("%-30s %14s %14s %12s %11s  %s\n", "", "model (ms)", "planned (ms)", "energy (kJ)",
                "saving", "configuration");
    print_energy_line("time-optimal, all-max clocks", fast, fast.energy.all_max_time_s,
                      fast.energy.all_max_energy_j);
    print_energy_line("time-optimal, fastest plan", fast, fast.energy.all_max_time_s,
                      fast.energy.fastest_energy_j);
    print_energy_line("time-optimal, within bound", fast, fast.energy.planned_time_s,
                      fast.energy.planned_energy_j);
    print_energy_line("energy-optimal, within bound", lean, lean.energy.planned_time_s,
                      lean.energy.planned_energy_j);
    std::printf(
        "energy-optimal: %.2f %% less energy than the time-optimal configuration's "
        "fastest plan, %+.2f %% time\n",
        100.0 * (1.0 - lean.energy.planned_energy_j / fast.energy.fastest_energy_j),
        100.0 * (lean.energy.planned_time_s / fast.energy.all_max_time_s - 1.0));
  }
  if (a.out.empty()) return;
  namespace fs = std::filesystem;
  write_file_atomic(fs::path(a.out) / "best_energy.json", search::config_to_string(lean.config));
  write_file_atomic(fs::path(a.out) / "energy.csv", energy_csv(choice));
}

}  // namespace perseus::cli
