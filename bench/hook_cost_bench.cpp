// What the client's hooks cost the training thread (DESIGN section 9), on the NVML backend over
// the fake libnvidia-ml.so.1 at its H100-like defaults (counter refreshed every 100 ms, one read
// blocking for 4 ms). The hooks record timestamps only; the counter is read by the sampler
// thread. Beside it: what the old design did on the training thread at each hook (one now_s()
// and one counter read).
//
// At a reporting boundary on_step_end also closes the window: the energy of the window and its
// history is attributed there, on the training thread (then the server exchange, bounded by
// stall_bound_s). That attribution is timed too, on a window of the client's whole history.
//
// Usage: hook_cost_bench [path/to/fake/libnvidia-ml.so.1] [hook iterations=2000]
// (default: the fake built with the tests, else libnvidia-ml.so.1 next to this program).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/measure/attribution.hpp"
#include "perseus/measure/energy_counter.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using perseus::client::NvmlGpu;
using perseus::client::OptimizerOptions;
using perseus::client::PipelineFrequencyOptimizer;
using perseus::measure::AttributionInput;
using perseus::measure::AttributionMethod;

std::string fake_library(int argc, char** argv) {
  if (argc > 1) return argv[1];
#ifdef PERSEUS_FAKE_NVML
  if (std::filesystem::exists(PERSEUS_FAKE_NVML)) return PERSEUS_FAKE_NVML;
#endif
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "libnvidia-ml.so.1").string();
}

// Microseconds of one call of `f`.
template <typename F>
double time_us(F&& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Stats {
  double median, p99;
};

Stats stats(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * (us.size() - 1) + 0.5))];
  };
  return {at(0.50), at(0.99)};
}

// The hooks' times, one figure per call, over `iterations` iterations of a forward and a
// backward.
struct HookTimes {
  std::vector<double> step_begin, instruction_begin, instruction_end, step_end, all;
};

HookTimes time_hooks(const std::string& library, int iterations) {
  HookTimes h;
  OptimizerOptions o;
  o.report_every = 1 << 30;  // no window closes while timing
  PipelineFrequencyOptimizer opt(o, std::make_unique<NvmlGpu>(0, library));
  auto record = [&](std::vector<double>& into, double us) {
    into.push_back(us);
    h.all.push_back(us);
  };
  for (int i = 0; i < iterations; ++i) {
    record(h.step_begin, time_us([&] { opt.on_step_begin(); }));
    for (const char* name : {"forward", "backward"}) {
      record(h.instruction_begin, time_us([&] { opt.on_instruction_begin(name); }));
      record(h.instruction_end, time_us([&] { opt.on_instruction_end(name); }));
    }
    record(h.step_end, time_us([&] { opt.on_step_end(); }));
  }
  return h;
}

// The old design: every hook read the time and the counter on the training thread.
std::vector<double> time_old_hooks(const std::string& library, int iterations) {
  std::vector<double> old;
  NvmlGpu gpu(0, library);
  const int reads = std::max(50, std::min(iterations, 250));
  double sink = 0.0;
  for (int i = 0; i < reads; ++i) {
    old.push_back(time_us([&] { sink += gpu.now_s() + gpu.total_energy_j(); }));
  }
  if (sink < 0.0) std::printf("?\n");
  return old;
}

// A reporting window with the client's whole history (MeasurementWindow keeps 120 s): a 1F1B
// stage of `microbatches` (forwards 160 ms / microbatches at 450 W, backwards twice as long at
// 400 W, 1 ms gaps, 60 ms bubbles at 80 W; 8 microbatches: 20 and 40 ms), its clock changing every
// 10 s as in the profiler's sweep; the counter
// refreshed every 100 ms, reporting the energy 10 ms before averaged over 20 ms, seen by reads
// 4 ms apart (an H100's, measured).
perseus::measure::AttributionInput history_window(double seconds, int microbatches) {
  AttributionInput in;
  perseus::measure::PowerTrace trace(80.0);
  double t = 0.0;
  auto busy = [&](double d, double watts, std::size_t key) {
    trace.add_busy(t, t + d, watts);
    in.spans.push_back({t, t + d, key});
    t += d + 0.001;
  };
  while (t < seconds) {
    const double begin = t;
    const std::size_t clock = 2 * (static_cast<std::size_t>(t / 10.0) % 4);
    const double forward_s = 0.160 / microbatches;
    for (int m = 0; m < microbatches; ++m) busy(forward_s, 450.0 - 10.0 * clock, clock);
    for (int m = 0; m < microbatches; ++m) busy(2 * forward_s, 400.0 - 10.0 * clock, clock + 1);
    in.iterations.emplace_back(begin, t);
    t += 0.060;
  }
  in.num_keys = 8;
  for (std::size_t k = 0; k < in.num_keys; ++k) in.busy_group.push_back(k / 2);
  for (double r = 0.1; r + 0.004 < t; r += 0.1) {
    const double seen = r + 0.002 + 0.004 * std::fmod(r * 7.3, 1.0);  // the read after r
    in.counter.push_back({seen - 0.002, trace.mean_energy(r - 0.020, r), 0.002});
  }
  in.counter_response = {0.010, 0.020};
  return in;
}

// Milliseconds of one attribution of `in` by `method` (median of `runs`).
double attribution_ms(const perseus::measure::AttributionInput& in,
                      perseus::measure::AttributionMethod method, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    ms.push_back(1e-3 * time_us([&] { perseus::measure::attribute(in, method); }));
  }
  return stats(ms).median;
}

void print(const char* label, const std::vector<double>& us) {
  const Stats s = stats(us);
  std::printf("  %-22s calls %-6zu median %8.3f us  p99 %8.3f us\n", label, us.size(), s.median,
              s.p99);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string library = fake_library(argc, argv);
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  if (iterations < 1) {
    std::fprintf(stderr, "hook_cost_bench: iterations must be >= 1\n");
    return 2;
  }
  // The fake's defaults (H100-like), and no call log (it would time file appends).
  setenv("FAKE_NVML_READ_MS", "4", 1);
  setenv("FAKE_NVML_REFRESH_MS", "100", 1);
  unsetenv("FAKE_NVML_LOG");
  try {
    const HookTimes h = time_hooks(library, iterations);
    const std::vector<double> old = time_old_hooks(library, iterations);
    std::printf("fake NVML %s (read 4 ms, refresh 100 ms)\n", library.c_str());
    print("on_step_begin", h.step_begin);
    print("on_instruction_begin", h.instruction_begin);
    print("on_instruction_end", h.instruction_end);
    print("on_step_end", h.step_end);
    print("old: now_s + counter", old);
    std::vector<double> empty;  // what the timing itself adds to each figure
    for (int i = 0; i < iterations; ++i) empty.push_back(time_us([] {}));
    print("(timer overhead)", empty);
    const Stats hook = stats(h.all), before = stats(old);
    std::printf(
        "hook median %.3f us p99 %.3f us | old design (counter read in the hook) median %.1f us\n",
        hook.median, hook.p99, before.median);
    for (int microbatches : {8, 64}) {
      const perseus::measure::AttributionInput window = history_window(120.0, microbatches);
      const auto used =
          perseus::measure::attribute(window, perseus::measure::AttributionMethod::kBusyOverlap);
      std::printf(
          "window close: attributing 120 s of history (%d microbatches: %zu instructions, %zu "
          "counter changes) takes %.1f ms with busy-overlap (%s, %s), %.1f ms with fit\n",
          microbatches, window.spans.size(), window.counter.size(),
          attribution_ms(window, perseus::measure::AttributionMethod::kBusyOverlap, 5),
          to_string(used.method).c_str(), used.per_key_powers ? "per-key powers" : "pooled",
          attribution_ms(window, perseus::measure::AttributionMethod::kFit, 5));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hook_cost_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
