// What the client's hooks cost the training thread (DESIGN section 9), on the NVML backend over
// the fake libnvidia-ml.so.1 at its H100-like defaults (counter refreshed every 100 ms, one read
// blocking for 4 ms). The hooks record timestamps only; the counter is read by the sampler
// thread. Beside it: what the old design did on the training thread at each hook (one now_s()
// and one counter read).
//
// Usage: hook_cost_bench [path/to/fake/libnvidia-ml.so.1] [hook iterations=2000]
// (default: the fake built with the tests, else libnvidia-ml.so.1 next to this program).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/optimizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using perseus::client::NvmlGpu;
using perseus::client::OptimizerOptions;
using perseus::client::PipelineFrequencyOptimizer;

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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hook_cost_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
