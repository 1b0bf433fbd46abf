#include "perseus/measure/refresh_clock.hpp"

#include <algorithm>
#include <cmath>

namespace perseus::measure {

namespace {

double median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Tick numbers: each gap rounded to whole periods of the median gap.
std::vector<double> number_ticks(const std::vector<CounterSample>& c, double period_s) {
  std::vector<double> n(c.size(), 0.0);
  for (std::size_t i = 1; i < c.size(); ++i) {
    n[i] = n[i - 1] + std::round((c[i].t_s - c[i - 1].t_s) / period_s);
  }
  return n;
}

// Least squares of time on tick number over the changes marked in `use`; false when fewer than
// two distinct tick numbers are used.
bool fit_line(const std::vector<CounterSample>& c, const std::vector<double>& n,
              const std::vector<bool>& use, RefreshClock& clock) {
  double count = 0.0, sn = 0.0, st = 0.0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!use[i]) continue;
    count += 1.0;
    sn += n[i];
    st += c[i].t_s;
  }
  if (count < 2.0) return false;
  const double mn = sn / count, mt = st / count;
  double snn = 0.0, snt = 0.0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!use[i]) continue;
    snn += (n[i] - mn) * (n[i] - mn);
    snt += (n[i] - mn) * (c[i].t_s - mt);
  }
  if (!(snn > 0.0)) return false;
  clock.period_s = snt / snn;
  clock.first_tick_s = mt - clock.period_s * mn;
  // Covariance per unit residual variance (scaled by the robust variance once it is known).
  clock.var_period_s2 = 1.0 / snn;
  clock.var_first_s2 = 1.0 / count + mn * mn / snn;
  clock.cov_s2 = -mn / snn;
  return true;
}

std::vector<double> residuals(const std::vector<CounterSample>& c, const std::vector<double>& n,
                              const RefreshClock& clock) {
  std::vector<double> r(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) r[i] = c[i].t_s - clock.tick(n[i]);
  return r;
}

double robust_sd(const std::vector<double>& r) {
  std::vector<double> a(r.size());
  std::transform(r.begin(), r.end(), a.begin(), [](double x) { return std::abs(x); });
  return 1.4826 * median(a);
}

}  // namespace

double RefreshClock::tick_stderr_s(double n) const {
  return std::sqrt(std::max(0.0, var_first_s2 + n * n * var_period_s2 + 2.0 * n * cov_s2));
}

std::optional<RefreshClock> fit_refresh_clock(const std::vector<CounterSample>& changes) {
  const std::size_t size = changes.size();
  if (size < kRefreshClockMinChanges) return std::nullopt;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < size; ++i) gaps.push_back(changes[i].t_s - changes[i - 1].t_s);
  const double typical = median(gaps);
  if (!(typical > 0.0)) return std::nullopt;
  const std::vector<double> n = number_ticks(changes, typical);
  std::vector<bool> use(size, true);
  RefreshClock clock;
  for (int pass = 0; pass < 3; ++pass) {  // the changes near the line, then the line through them
    if (!fit_line(changes, n, use, clock)) return std::nullopt;
    const std::vector<double> r = residuals(changes, n, clock);
    clock.robust_sd_s = robust_sd(r);
    const double within = kRefreshClockInlier * std::max(clock.robust_sd_s, 1e-6 * typical);
    for (std::size_t i = 0; i < size; ++i) use[i] = std::abs(r[i]) <= within;
  }
  const auto inliers = static_cast<std::size_t>(std::count(use.begin(), use.end(), true));
  if (inliers < kRefreshClockMinChanges || !(clock.period_s > 0.0) ||
      !(clock.robust_sd_s <= kRefreshClockTolerance * clock.period_s)) {
    return std::nullopt;
  }
  if (!fit_line(changes, n, use, clock)) return std::nullopt;
  const double variance = clock.robust_sd_s * clock.robust_sd_s;
  clock.var_first_s2 *= variance;
  clock.var_period_s2 *= variance;
  clock.cov_s2 *= variance;
  return clock;
}

ClockTimedChanges time_by_clock(const std::vector<CounterSample>& changes,
                                const RefreshClock& clock) {
  ClockTimedChanges out{changes, 0};
  const double margin = kRefreshClockInlier * clock.robust_sd_s;
  std::vector<bool> timed(changes.size(), false);
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const CounterSample& c = changes[i];
    const double latest = c.t_s + c.t_spread_s + margin;
    const double n = std::floor((latest - clock.first_tick_s) / clock.period_s);
    const double tick = clock.tick(n);
    if (tick < c.t_s - c.t_spread_s - margin) continue;
    // A tick's standard error as the half-width of a uniform spread with that deviation.
    out.changes[i].t_s = tick;
    out.changes[i].t_spread_s = std::sqrt(3.0) * clock.tick_stderr_s(n);
    timed[i] = true;
  }
  // Two changes on one tick (or a timed change past an untimed neighbour): both keep their
  // observed times, so the series stays in order.
  for (bool again = true; again;) {
    again = false;
    for (std::size_t i = 1; i < changes.size(); ++i) {
      if (out.changes[i].t_s > out.changes[i - 1].t_s) continue;
      for (std::size_t j : {i - 1, i}) {
        again = again || timed[j];
        out.changes[j] = changes[j];
        timed[j] = false;
      }
    }
  }
  out.on_clock = static_cast<std::size_t>(std::count(timed.begin(), timed.end(), true));
  return out;
}

}  // namespace perseus::measure
