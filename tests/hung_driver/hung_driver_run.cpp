// A C++ training process whose GPU driver stops answering, ending the way a program ends: main
// returns, and exit() runs the static destructors while the client's threads are still blocked
// in the driver. Two iterations over the fake libnvidia-ml, then the file $FAKE_NVML_HANG_FILE
// names is made (every NVML device call blocks from then on); ten more iterations; then the
// client is destroyed, giving up on the driver after shutdown_bound_s. Prints "training S" and
// "close S" (their durations) and the client's warnings, and must exit 0 (the ctest
// client.hung_driver_exit, and bench/hung_driver_stress.sh 200 times under load).
// Usage: hung_driver_run <libnvidia-ml.so.1>   (with FAKE_NVML_HANG_FILE set)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/optimizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void train(perseus::client::PipelineFrequencyOptimizer& opt, int iterations) {
  for (int i = 0; i < iterations; ++i) {
    opt.on_step_begin();
    for (const char* name : {"forward", "backward"}) {
      opt.on_instruction_begin(name);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      opt.on_instruction_end(name);
    }
    opt.on_step_end();
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const char* hang = std::getenv("FAKE_NVML_HANG_FILE");
  if (argc != 2 || hang == nullptr || *hang == '\0') {
    std::fprintf(stderr, "usage: FAKE_NVML_HANG_FILE=<path> hung_driver_run <libnvidia-ml.so.1>\n");
    return 2;
  }
  perseus::client::OptimizerOptions options;
  options.report_every = 2;
  options.shutdown_bound_s = 0.5;
  options.log = [](const std::string& line) { std::printf("warning: %s\n", line.c_str()); };
  auto opt = std::make_unique<perseus::client::PipelineFrequencyOptimizer>(
      options, std::make_unique<perseus::client::NvmlGpu>(0, argv[1]));
  train(*opt, 2);
  std::ofstream(hang) << "hang";  // from now on every NVML device call blocks
  auto start = Clock::now();
  train(*opt, 10);
  std::printf("training %.3f\n", seconds_since(start));
  start = Clock::now();
  opt.reset();
  std::printf("close %.3f\n", seconds_since(start));
  return 0;
}
