// The simulated GPU: instruction time and energy from the stage profile at the clock in force
// (locked clock, power limit, or the default highest clock), blocking power for waiting, exact
// determinism in virtual time, and the real-time mode's sleeping.
#include "perseus/client/sim_gpu.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;
using perseus::measure::CounterOptions;
using perseus::profile::Profile;
using perseus::test::error_of;

using perseus::test::small_profile;

SimGpu make(int stage = 0, double blocking = 50.0) {
  return SimGpu(
      small_profile(),
      SimGpuOptions{
          {stage}, blocking, false, 1.0, perseus::measure::CounterOptions::named("ideal")});
}

void run(SimGpu& gpu, const std::string& name) {
  gpu.instruction_begin(name);
  gpu.instruction_end(name);
}

TEST(SimGpu, ListsTheStagesProfiledClocksHighestFirst) {
  Profile p = small_profile();
  p.add(1, "forward", {700, 0.02, 2.0});
  SimGpu gpu(p,
             SimGpuOptions{{1}, 0.0, false, 1.0, perseus::measure::CounterOptions::named("ideal")});
  EXPECT_EQ(gpu.supported_clocks(), (std::vector<int>{1000, 800, 700, 600}));
  EXPECT_EQ(make(0).supported_clocks(), (std::vector<int>{1000, 800, 600}));
}

TEST(SimGpu, InstructionsTakeTheProfiledTimeAndEnergyAtTheClockInForce) {
  SimGpu gpu = make(1);
  EXPECT_EQ(gpu.current_clock("forward"), 1000);  // default: the highest clock
  run(gpu, "forward");
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.015);
  EXPECT_DOUBLE_EQ(gpu.total_energy_j(), 3.0);
  gpu.lock_clock(800);
  EXPECT_EQ(gpu.current_clock("backward"), 800);
  run(gpu, "backward");
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.015 + 0.036);
  EXPECT_DOUBLE_EQ(gpu.total_energy_j(), 3.0 + 3.84 * 1.5);
  gpu.reset_clock();
  EXPECT_EQ(gpu.current_clock("backward"), 1000);
}

TEST(SimGpu, RejectsUnsupportedClocksAndUnknownInstructions) {
  SimGpu gpu = make();
  EXPECT_CONTAINS(error_of([&] { gpu.lock_clock(900); }),
                  "simulated GPU (stage 0): clock 900 MHz is not supported (profiled clocks "
                  "600..1000 MHz)");
  EXPECT_CONTAINS(error_of([&] { gpu.instruction_begin("recompute"); }),
                  "no 'recompute' rows for stage 0");
  EXPECT_CONTAINS(error_of([&] { gpu.instruction_end("forward"); }),
                  "instruction_end('forward') without instruction_begin('forward')");
  gpu.instruction_begin("forward");
  EXPECT_CONTAINS(error_of([&] { gpu.instruction_begin("backward"); }), "'forward' is still");
  EXPECT_CONTAINS(error_of([&] { gpu.set_power_limit(0.0); }),
                  "power limit must be a positive number");
}

TEST(SimGpu, ValidatesItsOptions) {
  EXPECT_CONTAINS(error_of([] { make(2); }), "stage 2 is not in profile small (2 stages)");
  EXPECT_CONTAINS(error_of([] { make(0, -1.0); }), "blocking power must be");
  EXPECT_CONTAINS(error_of([] {
                    SimGpu(small_profile(), SimGpuOptions{{0}, 1.0, true, 0.0, {}});
                  }),
                  "time scale must be a positive number");
}

TEST(SimGpu, PowerLimitPicksTheFastestClockThatFitsElseTheLowestPower) {
  SimGpu gpu = make();
  gpu.set_power_limit(170.0);
  EXPECT_EQ(gpu.current_clock("forward"), 800);   // 150 W fits, 200 W does not
  EXPECT_EQ(gpu.current_clock("backward"), 800);  // 160 W
  gpu.set_power_limit(155.0);
  EXPECT_EQ(gpu.current_clock("forward"), 800);
  EXPECT_EQ(gpu.current_clock("backward"), 600);  // 110 W
  gpu.set_power_limit(50.0);
  EXPECT_EQ(gpu.current_clock("forward"), 600);  // nothing fits: lowest power
  gpu.set_power_limit(1000.0);
  EXPECT_EQ(gpu.current_clock("forward"), 1000);
  gpu.lock_clock(800);  // a locked clock caps what the limit may pick
  EXPECT_EQ(gpu.current_clock("forward"), 800);
  gpu.reset_power_limit();
  gpu.reset_clock();
  EXPECT_EQ(gpu.current_clock("backward"), 1000);
  gpu.set_power_limit(155.0);
  run(gpu, "backward");
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.032);
  EXPECT_DOUBLE_EQ(gpu.total_energy_j(), 3.52);
}

TEST(SimGpu, WaitingCostsBlockingPower) {
  SimGpu gpu = make(0, 50.0);
  gpu.wait_until(0.5);
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.5);
  EXPECT_DOUBLE_EQ(gpu.total_energy_j(), 25.0);
  gpu.wait_until(0.25);  // the past: nothing happens
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.5);
  run(gpu, "forward");
  gpu.wait_until(1.0);
  EXPECT_DOUBLE_EQ(gpu.now_s(), 1.0);
  EXPECT_DOUBLE_EQ(gpu.total_energy_j(), 25.0 + 2.0 + 50.0 * (1.0 - 0.51));
}

TEST(SimGpu, VirtualTimeIsExactlyDeterministic) {
  auto trace = [] {
    SimGpu gpu = make(1, 83.64);
    std::vector<double> out;
    const int clocks[] = {1000, 600, 800};
    for (int i = 0; i < 300; ++i) {
      gpu.lock_clock(clocks[i % 3]);
      run(gpu, i % 2 == 0 ? "forward" : "backward");
      gpu.wait_until(gpu.now_s() + 0.001 * (i % 7));
      out.push_back(gpu.now_s());
      out.push_back(gpu.total_energy_j());
    }
    return out;
  };
  std::vector<double> a = trace(), b = trace();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "at " << i;
}

TEST(SimGpu, RealTimeModeSleepsForTheScaledDuration) {
  SimGpu gpu(small_profile(),
             SimGpuOptions{{0}, 50.0, true, 0.5, perseus::measure::CounterOptions::named("ideal")});
  auto start = std::chrono::steady_clock::now();
  double t0 = gpu.now_s();
  run(gpu, "backward");  // 0.020 simulated s = 0.010 wall s
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(wall, 0.010);
  EXPECT_GE(gpu.now_s() - t0, 0.020);
  EXPECT_GE(gpu.total_energy_j(), 4.4);
  gpu.wait_until(gpu.now_s() + 0.02);
  EXPECT_GT(gpu.total_energy_j(), 4.4 + 50.0 * 0.02 * 0.9);
}

}  // namespace
