// Cost models: effective energy of one (stage, instruction) as a function of its integer
// (quantized) duration, tabulated over [min_duration, max_duration]. The frontier solver reads
// marginal costs from these tables (architecture section 5).
//   exponential  least-squares fit of a*exp(b*t)+c to the Pareto options (as the published
//                optimizer; may have fitting error, convex when a > 0)
//   convex-hull  piecewise-linear lower convex hull of the Pareto options (exact at the
//                options, always convex)
#pragma once

#include <string>
#include <vector>

#include "perseus/profile/options.hpp"

namespace perseus::plan {

enum class CostModelKind { kExponential, kConvexHull };

// Parses "exponential" / "convex-hull"; throws perseus::Error otherwise.
CostModelKind parse_cost_model(const std::string& name);
const std::string& cost_model_name(CostModelKind kind);

struct ExponentialFit {
  double a = 0.0, b = 0.0, c = 0.0;
  double mse = 0.0;  // mean squared error at the fitted points
};

// Least-squares fit of y = a*exp(b*t)+c over decaying exponentials (b < 0), the family the
// published optimizer's initial guesses start from (its Levenberg-Marquardt fit stays there; a
// fit over both signs can be concave, which breaks the minimum-cut step). For fixed b the best
// a, c solve a 2x2 linear system (variable projection), so the fit is a one-dimensional search
// over b: a log-spaced scan of |b| * span in [1e-3, 1e2] followed by golden-section refinement.
// Where the error keeps falling towards b = 0 (nearly linear data) the fit ends at the scan's
// edge, as the reference's does. Needs at least 3 distinct t.
ExponentialFit fit_exponential(const std::vector<double>& t, const std::vector<double>& y);

class CostModel {
 public:
  static CostModel build(const profile::OptionSet& options, CostModelKind kind);

  long min_duration() const { return min_duration_; }
  long max_duration() const { return max_duration_; }
  // Effective energy at integer duration d, min_duration() <= d <= max_duration().
  double operator()(long d) const { return table_[static_cast<std::size_t>(d - min_duration_)]; }
  // Human-readable parameters (for logs and the frontier metadata).
  const std::string& description() const { return description_; }

 private:
  long min_duration_ = 0;
  long max_duration_ = 0;
  std::vector<double> table_;
  std::string description_;
};

}  // namespace perseus::plan
