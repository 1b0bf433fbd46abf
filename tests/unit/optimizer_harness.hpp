// What the optimizer's tests (client_test.cpp, client_failure_test.cpp) drive it with: a simulated
// GPU running the small profile with an ideal counter, and a training loop that calls the hooks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "perseus/client/optimizer.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "small_profile.hpp"

namespace perseus::test {

// A GPU that runs stage `stage` of small_profile(); its counter is exact and free.
inline std::unique_ptr<client::SimGpu> sim(int stage = 0) {
  return std::make_unique<client::SimGpu>(
      small_profile(),
      client::SimGpuOptions{{stage}, 0.0, false, 1.0, client::CounterOptions::named("ideal")});
}

// `n` iterations, each running the instructions `names` in order.
inline void iterate(client::PipelineFrequencyOptimizer& opt, int n,
                    const std::vector<std::string>& names = {"forward", "backward"}) {
  for (int i = 0; i < n; ++i) {
    opt.on_step_begin();
    for (const auto& name : names) {
      opt.on_instruction_begin(name);
      opt.on_instruction_end(name);
    }
    opt.on_step_end();
  }
}

}  // namespace perseus::test
