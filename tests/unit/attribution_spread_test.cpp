// Counter changes whose times are uncertain (CounterSample::t_spread_s: a sampler that reads every
// ~4 ms knows a change only to within its reads): the fit regresses each interval's energy on
// the expected occupancy over those ranges (attribution_model.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attribution_workload.hpp"
#include "perseus/client/attribution.hpp"
#include "perseus/client/attribution_model.hpp"

namespace {

using perseus::client::attribute;
using perseus::client::AttributionInput;
using perseus::client::AttributionMethod;
using perseus::client::CounterSample;
using perseus::client::attribution_model::Activity;
using perseus::test::make_workload;
using perseus::test::Workload;
using perseus::test::WorkloadShape;

TEST(AttributionSpread, ExpectedOccupancyIsTheMeanOverBothEndsRanges) {
  const Workload w = make_workload(3.0, 7);
  const Activity activity(w.input);
  const CounterSample lo{0.4123, 0.0, 0.021}, hi{0.5311, 0.0, 0.013};
  const std::vector<double> expected = activity.expected_occupancy(lo, hi);
  // Midpoint rule over both uniform ranges.
  constexpr int kSteps = 300;
  std::vector<double> mean(activity.regressors(), 0.0);
  for (int i = 0; i < kSteps; ++i) {
    const double a = lo.t_s + lo.t_spread_s * (2.0 * (i + 0.5) / kSteps - 1.0);
    for (int j = 0; j < kSteps; ++j) {
      const double b = hi.t_s + hi.t_spread_s * (2.0 * (j + 0.5) / kSteps - 1.0);
      const std::vector<double> o = activity.occupancy(a, b);
      for (std::size_t r = 0; r < o.size(); ++r) mean[r] += o[r] / (kSteps * kSteps);
    }
  }
  double total = 0.0;
  for (std::size_t r = 0; r < mean.size(); ++r) {
    EXPECT_NEAR(expected[r], mean[r], 1e-6) << "regressor " << r;
    total += expected[r];
  }
  EXPECT_NEAR(total, hi.t_s - lo.t_s, 1e-12);  // the interval's expected length
  // Without spreads it is the occupancy between the observed times.
  EXPECT_EQ(activity.expected_occupancy({lo.t_s, 0.0}, {hi.t_s, 0.0}),
            activity.occupancy(lo.t_s, hi.t_s));
}

// Refreshes 40-200 ms apart (an H100's: 69-118 ms), each observed within +-spread_s of when it
// happened, as a sampler reading every 2 x spread_s sees them; spread_s recorded with each change,
// or not. The refresh times are spread much wider than spread_s, so given two observed times the
// true ones are independent and uniform over their ranges, as the attribution assumes.
void observe_refreshes(Workload& w, double spread_s, bool record_spread, unsigned seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> period(0.040, 0.200), where(-spread_s, spread_s);
  const double end = w.input.iterations.back().second;
  for (double r = 0.05; r < end + 0.2; r += period(random)) {
    w.input.counter.push_back(
        {r + where(random), w.trace.energy_at(r), record_spread ? spread_s : 0.0});
  }
}

// Relative error of the fitted forward and backward powers, averaged over seeds.
std::vector<double> fit_bias(double spread_s, bool record_spread) {
  WorkloadShape shape;  // forwards 30-70 ms, backwards 40-100 ms, idle gaps up to 60 ms
  std::vector<double> bias(2, 0.0);
  constexpr int kSeeds = 8;
  for (int seed = 0; seed < kSeeds; ++seed) {
    Workload w = make_workload(200.0, 100 + seed, shape);
    observe_refreshes(w, spread_s, record_spread, 200 + seed);
    const auto a = attribute(w.input, AttributionMethod::kFit);
    EXPECT_EQ(a.method, AttributionMethod::kFit);
    bias[0] += (a.keys[0].power_w / shape.forward_w - 1.0) / kSeeds;
    bias[1] += (a.keys[1].power_w / shape.backward_w - 1.0) / kSeeds;
  }
  return bias;
}

TEST(AttributionSpread, RegressingOnTheExpectedOccupancyShrinksTheBiasOfUncertainTimes) {
  // Changes known to +-8 ms. Regressed on the occupancy between the observed times, every
  // regressor is off by what ran at the interval's ends and both powers come out low (errors in
  // variables); on the expected occupancy the error left is the part of it that the refresh
  // periods' own bounds make dependent (measured: -0.73 %, -0.72 % against -0.26 %, -0.19 %).
  const std::vector<double> plain = fit_bias(0.008, false);
  const std::vector<double> spread = fit_bias(0.008, true);
  const double worst_plain = std::max(std::abs(plain[0]), std::abs(plain[1]));
  EXPECT_GT(worst_plain, 0.005);
  EXPECT_LT(std::max(std::abs(spread[0]), std::abs(spread[1])), 0.5 * worst_plain);
}

}  // namespace
