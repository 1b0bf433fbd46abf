// A one-stage training loop with the Perseus client on a simulated GPU (profile stage 0): the
// hooks a real loop calls around its forward and backward passes, and what the client measured.
// With a server URL it registers a job and runs the server's plans; without one it runs at the
// default clock. For a real GPU, pass std::make_unique<perseus::client::NvmlGpu>(device).
#include <cstdio>
#include <exception>
#include <memory>

#include "perseus/client/optimizer.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "perseus/profile/csv.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROFILE.csv [SERVER_URL]\n", argv[0]);
    return 2;
  }
  try {
    perseus::client::OptimizerOptions options;
    options.server_url = argc > 2 ? argv[2] : "";
    options.report_every = 2;
    perseus::client::SimGpuOptions gpu;
    gpu.blocking_power_w = 80.0;
    perseus::client::PipelineFrequencyOptimizer opt(
        options, std::make_unique<perseus::client::SimGpu>(
                     perseus::profile::read_profile_csv(argv[1]), gpu));
    for (int iteration = 0; iteration < 4; ++iteration) {
      opt.on_step_begin();
      opt.on_instruction_begin("forward");  // the stage's forward pass runs here
      opt.on_instruction_end("forward");
      opt.on_instruction_begin("backward");  // and its backward pass here
      opt.on_instruction_end("backward");
      opt.on_step_end();
    }
    for (const auto& it : opt.iterations()) {
      std::printf("iteration %.4f s %.2f J\n", it.time_s, it.energy_j);
    }
    std::printf("job %s, degraded %s\n", opt.job_id().empty() ? "-" : opt.job_id().c_str(),
                opt.degraded() ? "yes" : "no");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_loop: %s\n", e.what());
    return 1;
  }
}
