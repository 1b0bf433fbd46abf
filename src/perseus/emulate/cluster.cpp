#include "perseus/emulate/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "perseus/util/error.hpp"

namespace perseus::emulate {

namespace {

// Parses one factor of `spec`; throws naming the spec.
double parse_number(const std::string& text, const std::string& spec) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    throw Error("slowdown factors '" + spec + "': '" + text + "' is not a number");
  }
  return value;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::vector<double> parse_range(const std::vector<std::string>& parts, const std::string& spec) {
  double first = parse_number(parts[0], spec), last = parse_number(parts[1], spec);
  double step = parse_number(parts[2], spec);
  if (!(step > 0.0)) throw Error("slowdown factors '" + spec + "': step must be positive");
  if (last < first) throw Error("slowdown factors '" + spec + "': range is empty");
  std::vector<double> out;
  // Count steps with a tolerance so that 1.00:1.50:0.01 includes 1.50 despite rounding.
  const auto n = static_cast<long>(std::floor((last - first) / step + 1e-9));
  for (long i = 0; i <= n; ++i) out.push_back(first + static_cast<double>(i) * step);
  return out;
}

}  // namespace

std::vector<double> parse_factors(const std::string& spec) {
  std::vector<std::string> range = split(spec, ':');
  std::vector<double> out;
  if (range.size() == 3) {
    out = parse_range(range, spec);
  } else if (range.size() == 1) {
    for (const auto& part : split(spec, ',')) out.push_back(parse_number(part, spec));
  } else {
    throw Error("slowdown factors '" + spec + "': expected first:last:step or a comma list");
  }
  for (double f : out) {
    if (f < 1.0) {
      throw Error("slowdown factors '" + spec + "': factor " + std::to_string(f) +
                  " is below 1 (a straggler is never faster)");
    }
  }
  return out;
}

void check_cluster(const ClusterSpec& spec, const std::vector<double>& factors) {
  if (spec.pipelines < 1) {
    throw Error("number of pipelines must be at least 1, got " + std::to_string(spec.pipelines));
  }
  if (spec.tensor_parallel < 1) {
    throw Error("tensor-parallel degree must be at least 1, got " +
                std::to_string(spec.tensor_parallel));
  }
  if (factors.empty()) throw Error("no slowdown factors given");
  for (double f : factors) {
    if (!(f >= 1.0) || !std::isfinite(f)) {
      throw Error("slowdown factor " + std::to_string(f) + " is below 1 (a straggler is never " +
                  "faster)");
    }
  }
}

namespace {

// Energy of the whole cluster for one iteration that ends at `end_s`: D - 1 pipelines run a plan
// taking (time_s, energy_j) and block for the rest; the straggler runs (straggler_time_s,
// straggler_energy_j) stretched by the factor. Pipeline energies are per GPU of each stage, so
// everything scales with the tensor-parallel degree.
double cluster_energy(const plan::TimeEnergy& others, const plan::TimeEnergy& straggler,
                      double factor, double end_s, int num_ranks, double blocking_power_w,
                      const ClusterSpec& spec) {
  double other = others.energy_j + num_ranks * blocking_power_w * (end_s - others.time_s);
  double slow = factor * straggler.energy_j;
  return spec.tensor_parallel * ((spec.pipelines - 1) * other + slow);
}

plan::TimeEnergy time_energy(const plan::FrontierRow& r) {
  return {r.evaluated_time_s, r.evaluated_energy_j};
}

}  // namespace

ClusterPoint emulate_cluster(const plan::FrontierQuery& query, int num_ranks,
                             double blocking_power_w, const ClusterSpec& spec, double factor) {
  ClusterPoint p;
  p.factor = factor;
  const plan::TimeEnergy& all_max = query.all_max();
  const plan::TimeEnergy fastest = time_energy(query.row(query.fastest()));
  p.baseline.time_s = factor * all_max.time_s;
  p.baseline.energy_j = cluster_energy(all_max, all_max, factor, p.baseline.time_s, num_ranks,
                                       blocking_power_w, spec);
  p.intrinsic.time_s = p.perseus.time_s = factor * fastest.time_s;
  p.intrinsic.energy_j = cluster_energy(fastest, fastest, factor, p.intrinsic.time_s, num_ranks,
                                        blocking_power_w, spec);
  p.perseus_plan = query.within(p.perseus.time_s).value_or(query.fastest());
  p.perseus.energy_j = cluster_energy(time_energy(query.row(p.perseus_plan)), fastest, factor,
                                      p.perseus.time_s, num_ranks, blocking_power_w, spec);
  p.intrinsic_saving = (p.baseline.energy_j - p.intrinsic.energy_j) / p.baseline.energy_j;
  p.extrinsic_saving = (p.intrinsic.energy_j - p.perseus.energy_j) / p.baseline.energy_j;
  p.total_saving = p.intrinsic_saving + p.extrinsic_saving;
  return p;
}

std::vector<ClusterPoint> sweep_cluster(const plan::StoredFrontier& frontier,
                                        const ClusterSpec& spec,
                                        const std::vector<double>& factors) {
  check_cluster(spec, factors);
  plan::FrontierQuery query(frontier);
  std::vector<ClusterPoint> out;
  out.reserve(factors.size());
  for (double f : factors) {
    out.push_back(emulate_cluster(query, frontier.num_ranks(), frontier.blocking_power_w, spec, f));
  }
  return out;
}

}  // namespace perseus::emulate
