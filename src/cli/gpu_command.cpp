// `perseus gpu probe`: what a GPU's NVML offers energy measurement (architecture section 9), found
// with read-only NVML calls: identity, supported SM clocks, the energy counter's refresh period and
// read cost, the power limits, and the power drawn, SM clock and clock event reasons while probing.
// Prints `key value` lines, or JSON with --json.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/client/gpu_probe.hpp"
#include "perseus/util/progress.hpp"

namespace perseus::cli {

namespace {

struct ProbeArgs {
  client::ProbeOptions options;
  bool json = false;
};

// The values separated by blanks (numbers or strings).
template <typename Range>
std::string joined(const Range& values) {
  std::string out;
  for (const auto& value : values) {
    if (!out.empty()) out += ' ';
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>) {
      out += std::to_string(value);
    } else {
      out += value;
    }
  }
  return out;
}

// The energy counter's lines: its changes, refresh period and read cost.
void print_counter(const client::GpuProbe& p) {
  std::printf("counter_changes %d (in %d reads over %.2f s)\n", p.counter_changes, p.counter_reads,
              p.duration_s);
  if (p.refresh) {
    std::printf("refresh_period_ms %.1f (min %.1f, max %.1f)\n", p.refresh->mean_s * 1e3,
                p.refresh->min_s * 1e3, p.refresh->max_s * 1e3);
  } else {
    std::printf(
        "refresh_period_ms unknown (fewer than 2 counter changes; try a longer "
        "--duration)\n");
  }
  std::printf("read_cost_ms %.3f (max %.3f)\n", p.read_mean_s * 1e3, p.read_max_s * 1e3);
}

void print_probe(const client::GpuProbe& p) {
  std::printf("name %s\n", p.name.c_str());
  std::printf("uuid %s\n", p.uuid.c_str());
  std::printf("driver %s\n", p.driver.c_str());
  std::printf("cuda_index %d\n", p.cuda_index);
  std::printf("nvml_index %d\n", p.nvml_index);
  std::printf("sm_clocks_mhz %s (%zu clocks)\n", joined(p.clocks_mhz).c_str(), p.clocks_mhz.size());
  if (!p.counter_error.empty()) {
    std::printf("energy_counter none (%s)\n", p.counter_error.c_str());
  } else {
    print_counter(p);
  }
  std::printf("power_w %.1f (mean of %d NVML power readings)\n", p.power_mean_w, p.power_readings);
  if (p.counter_power_w) {
    std::printf("counter_power_w %.1f (energy counter slope)\n", *p.counter_power_w);
  } else {
    std::printf("counter_power_w unknown\n");
  }
  if (p.power_limit_w && p.default_power_limit_w) {
    std::printf("power_limit_w %.1f (default %.1f)\n", *p.power_limit_w, *p.default_power_limit_w);
  } else {
    std::printf("power_limit_w unknown (%s)\n", p.power_limit_error.c_str());
  }
  if (p.sm_clock_mean_mhz) {
    std::printf("sm_clock_mhz %.0f (min %d, max %d)\n", *p.sm_clock_mean_mhz, p.sm_clock_min_mhz,
                p.sm_clock_max_mhz);
  } else {
    std::printf("sm_clock_mhz unknown (%s)\n", p.clock_error.c_str());
  }
  if (p.clock_event_reasons) {
    const std::string reasons = joined(*p.clock_event_reasons);
    std::printf("clock_event_reasons %s\n", reasons.empty() ? "none" : reasons.c_str());
  } else {
    std::printf("clock_event_reasons unknown (%s)\n", p.reasons_error.c_str());
  }
}

void run_probe(ProbeArgs a) {
  ProgressBar bar("gpu probe: polling the energy counter", 100);
  a.options.progress = [&bar](double done) { bar.update(std::lround(done * 100.0)); };
  client::GpuProbe probe = client::probe_gpu(a.options);
  bar.finish();
  if (a.json) {
    std::printf("%s\n", client::to_json(probe).dump(2).c_str());
  } else {
    print_probe(probe);
  }
}

void add_probe(CLI::App& parent) {
  auto a = std::make_shared<ProbeArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "probe",
      "Read-only: a GPU's identity, SM clocks, energy-counter refresh period and read cost, and "
      "power (changes no setting)");
  cmd->add_option("--device", a->options.device,
                  "CUDA device index (CUDA_VISIBLE_DEVICES applies: integer or GPU- UUID entries)")
      ->capture_default_str();
  cmd->add_option("--library", a->options.library, "NVML library to load")->capture_default_str();
  cmd->add_option("--duration", a->options.duration_s,
                  "Seconds to poll the energy counter (at most 600)")
      ->capture_default_str();
  cmd->add_option("--timeout", a->options.timeout_s,
                  "Give up (exit 1) when the driver has not answered this many seconds after "
                  "--duration")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON instead of `key value` lines");
  cmd->callback([a] { run_probe(*a); });
}

}  // namespace

void add_gpu_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("gpu", "Inspect the local GPUs through NVML (read-only)");
  cmd->require_subcommand(1);
  add_probe(*cmd);
}

}  // namespace perseus::cli
