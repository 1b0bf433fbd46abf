// What the optimizer's tests (client_test.cpp, client_failure_test.cpp, nvml_client_test.cpp)
// drive it with: a simulated GPU running the small profile with an ideal counter, and a training
// loop that calls the hooks.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "perseus/client/optimizer.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "small_profile.hpp"

namespace perseus::test {

// A GPU that runs stage `stage` of small_profile(); its counter is exact and free.
inline std::unique_ptr<client::SimGpu> sim(int stage = 0) {
  return std::make_unique<client::SimGpu>(
      small_profile(),
      client::SimGpuOptions{{stage}, 0.0, false, 1.0, measure::CounterOptions::named("ideal")});
}

// `n` iterations, each running the instructions `names` in order, each for `span` of wall time
// (a real-time backend's instructions take as long as the loop makes them).
inline void iterate(client::PipelineFrequencyOptimizer& opt, int n,
                    const std::vector<std::string>& names = {"forward", "backward"},
                    std::chrono::milliseconds span = std::chrono::milliseconds(0)) {
  for (int i = 0; i < n; ++i) {
    opt.on_step_begin();
    for (const auto& name : names) {
      opt.on_instruction_begin(name);
      if (span.count() > 0) std::this_thread::sleep_for(span);
      opt.on_instruction_end(name);
    }
    opt.on_step_end();
  }
}

}  // namespace perseus::test
