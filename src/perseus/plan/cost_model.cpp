#include "perseus/plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "perseus/util/error.hpp"

namespace perseus::plan {

namespace {

const std::string kExponentialName = "exponential";
const std::string kConvexHullName = "convex-hull";

// Best a, c for a fixed b and the resulting sum of squared errors. Times are shifted by t0 for
// conditioning; the returned `a` is for the unshifted model.
struct LinearFit {
  double a, c, sse;
};

LinearFit fit_for_rate(const std::vector<double>& t, const std::vector<double>& y, double b,
                       double t0) {
  double n = static_cast<double>(t.size()), sx = 0, sxx = 0, sy = 0, sxy = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    double x = std::exp(b * (t[i] - t0));
    sx += x;
    sxx += x * x;
    sy += y[i];
    sxy += x * y[i];
  }
  double det = n * sxx - sx * sx;
  if (!(std::abs(det) > 1e-300)) return {0.0, sy / n, std::numeric_limits<double>::infinity()};
  double a = (n * sxy - sx * sy) / det;
  double c = (sy - a * sx) / n;
  double sse = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    double r = a * std::exp(b * (t[i] - t0)) + c - y[i];
    sse += r * r;
  }
  return {a * std::exp(-b * t0), c, sse};
}

double golden_minimum(const std::vector<double>& t, const std::vector<double>& y, double t0,
                      double lo, double hi) {
  const double g = (std::sqrt(5.0) - 1.0) / 2.0;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = fit_for_rate(t, y, x1, t0).sse, f2 = fit_for_rate(t, y, x2, t0).sse;
  for (int i = 0; i < 200 && hi - lo > 1e-14 * (1.0 + std::abs(lo) + std::abs(hi)); ++i) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo);
      f1 = fit_for_rate(t, y, x1, t0).sse;
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo);
      f2 = fit_for_rate(t, y, x2, t0).sse;
    }
  }
  return f1 <= f2 ? x1 : x2;
}

std::vector<double> convex_hull_table(const profile::OptionSet& set) {
  // Lower convex hull (monotone chain) of (quant_time, cost), ascending in time.
  std::vector<std::pair<double, double>> hull;
  for (auto it = set.options.rbegin(); it != set.options.rend(); ++it) {
    std::pair<double, double> p{static_cast<double>(it->quant_time), it->cost};
    while (hull.size() >= 2) {
      auto [x1, y1] = hull[hull.size() - 2];
      auto [x2, y2] = hull.back();
      // Drop the middle point when it lies on or above the segment from x1 to p.
      if ((y2 - y1) * (p.first - x1) >= (p.second - y1) * (x2 - x1))
        hull.pop_back();
      else
        break;
    }
    hull.push_back(p);
  }
  std::vector<double> table;
  std::size_t seg = 0;
  for (long d = set.min_duration(); d <= set.max_duration(); ++d) {
    double x = static_cast<double>(d);
    while (seg + 1 < hull.size() && hull[seg + 1].first < x) ++seg;
    if (seg + 1 == hull.size()) {
      table.push_back(hull[seg].second);
      continue;
    }
    auto [x1, y1] = hull[seg];
    auto [x2, y2] = hull[seg + 1];
    table.push_back(y1 + (y2 - y1) * (x - x1) / (x2 - x1));
  }
  return table;
}

}  // namespace

CostModelKind parse_cost_model(const std::string& name) {
  if (name == kExponentialName) return CostModelKind::kExponential;
  if (name == kConvexHullName) return CostModelKind::kConvexHull;
  throw Error("unknown cost model '" + name + "' (expected exponential or convex-hull)");
}

const std::string& cost_model_name(CostModelKind kind) {
  return kind == CostModelKind::kExponential ? kExponentialName : kConvexHullName;
}

ExponentialFit fit_exponential(const std::vector<double>& t, const std::vector<double>& y) {
  auto [tmin, tmax] = std::minmax_element(t.begin(), t.end());
  double span = std::max(*tmax - *tmin, 1.0);
  double t0 = *tmin;
  // Coarse scan over decay rates |b| * span in [1e-3, 1e2].
  double best_b = 0.0, best = std::numeric_limits<double>::infinity();
  std::vector<double> grid;
  for (int i = 0; i <= 100; ++i) {
    double r = std::pow(10.0, -3.0 + 5.0 * i / 100.0) / span;
    grid.push_back(-r);
  }
  std::sort(grid.begin(), grid.end());
  std::size_t best_i = 0;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    double sse = fit_for_rate(t, y, grid[i], t0).sse;
    if (sse < best) best = sse, best_b = grid[i], best_i = i;
  }
  double lo = grid[best_i == 0 ? 0 : best_i - 1];
  double hi = grid[std::min(best_i + 1, grid.size() - 1)];
  if (lo < best_b && best_b < hi) best_b = golden_minimum(t, y, t0, lo, hi);
  LinearFit fit = fit_for_rate(t, y, best_b, t0);
  return {fit.a, best_b, fit.c, fit.sse / static_cast<double>(t.size())};
}

CostModel CostModel::build(const profile::OptionSet& set, CostModelKind kind) {
  CostModel model;
  model.min_duration_ = set.min_duration();
  model.max_duration_ = set.max_duration();
  if (kind == CostModelKind::kExponential && set.options.size() >= 3) {
    std::vector<double> t, y;
    for (const auto& o : set.options) {
      t.push_back(static_cast<double>(o.quant_time));
      y.push_back(o.cost);
    }
    ExponentialFit fit = fit_exponential(t, y);
    for (long d = model.min_duration_; d <= model.max_duration_; ++d) {
      model.table_.push_back(fit.a * std::exp(fit.b * static_cast<double>(d)) + fit.c);
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "exponential a=%.6g b=%.6g c=%.6g mse=%.3g", fit.a, fit.b, fit.c,
                  fit.mse);
    model.description_ = buf;
  } else {
    // Fewer than three options cannot determine an exponential; the hull is exact for them.
    model.table_ = convex_hull_table(set);
    model.description_ = "convex-hull with " + std::to_string(set.options.size()) + " options";
  }
  return model;
}

}  // namespace perseus::plan
