#include "perseus/profile/options.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "perseus/util/error.hpp"

namespace perseus::profile {

namespace {

std::string message(const char* text, double value) {
  std::ostringstream out;
  out << text << value;
  return out.str();
}

// All rows as options, slowest first (stable, like the reference's sorted(..., reverse=True)).
std::vector<Option> to_options(const std::vector<Measurement>& rows, double unit_time_s) {
  std::vector<Option> options;
  for (const auto& m : rows) {
    Option o;
    o.frequency_mhz = m.frequency_mhz;
    o.time_s = m.time_s;
    o.energy_j = m.energy_j;
    o.quant_time = static_cast<long>(python_floordiv(m.time_s, unit_time_s));
    options.push_back(o);
  }
  std::stable_sort(options.begin(), options.end(),
                   [](const Option& a, const Option& b) { return a.time_s > b.time_s; });
  return options;
}

// Drops every option that another option beats in both measured time and raw energy.
std::vector<Option> pareto_filter(const std::vector<Option>& options, double noise_factor) {
  std::vector<Option> kept;
  for (const auto& o : options) {
    bool dominated = std::any_of(options.begin(), options.end(), [&](const Option& other) {
      return other.time_s < o.time_s && other.energy_j * noise_factor < o.energy_j;
    });
    if (!dominated) kept.push_back(o);
  }
  return kept;
}

// Keeps one option per quantized time, the most expensive one (its real time is closest to the
// rounded-down quantized time), then sorts slowest first.
std::vector<Option> dedup_quant_time(std::vector<Option> options) {
  std::stable_sort(options.begin(), options.end(),
                   [](const Option& a, const Option& b) { return a.energy_j > b.energy_j; });
  std::vector<Option> unique;
  std::set<long> seen;
  for (const auto& o : options) {
    if (seen.insert(o.quant_time).second) unique.push_back(o);
  }
  std::stable_sort(unique.begin(), unique.end(),
                   [](const Option& a, const Option& b) { return a.quant_time > b.quant_time; });
  return unique;
}

}  // namespace

const Option& OptionSet::realize(long duration) const {
  for (const auto& o : options) {
    if (o.quant_time <= duration) return o;
  }
  return options.back();
}

double python_floordiv(double a, double b) {
  // CPython's float_floor_div (Objects/floatobject.c, _float_div_mod).
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

OptionSet make_option_set(const std::vector<Measurement>& rows, double unit_time_s,
                          double blocking_power_w, double noise_factor) {
  if (rows.empty()) throw Error("no measurements to build execution options from");
  if (!(unit_time_s > 0) || !std::isfinite(unit_time_s)) {
    throw Error(message("time unit must be a positive number of seconds, got ", unit_time_s));
  }
  if (!(noise_factor >= 1.0) || !std::isfinite(noise_factor)) {
    throw Error(message("noise factor must be at least 1, got ", noise_factor));
  }
  OptionSet set;
  set.options = dedup_quant_time(pareto_filter(to_options(rows, unit_time_s), noise_factor));
  for (auto& o : set.options) {
    o.cost = o.energy_j - blocking_power_w * static_cast<double>(o.quant_time) * unit_time_s;
  }
  return set;
}

}  // namespace perseus::profile
