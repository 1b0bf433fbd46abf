#include "perseus/report/svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace perseus::report {

Element& Element::attr(std::string_view key, std::string_view value) {
  attrs_ += ' ';
  attrs_ += key;
  attrs_ += "=\"";
  attrs_ += escape(value);
  attrs_ += '"';
  return *this;
}

Element& Element::attr(std::string_view key, double value) {
  return attr(key, std::string_view(num(value)));
}

Element& Element::text(std::string_view content) {
  container_ = true;
  content_ += escape(content);
  return *this;
}

Element& Element::add(const Element& child) {
  container_ = true;
  content_ += child.str();
  return *this;
}

Element& Element::raw(std::string_view markup) {
  container_ = true;
  content_ += markup;
  return *this;
}

Element& Element::tooltip(std::string_view content) {
  return add(Element("title").text(content));
}

std::string Element::str() const {
  std::string out = "<" + name_ + attrs_;
  if (!container_) return out + "/>";
  return out + ">" + content_ + "</" + name_ + ">";
}

double LinearScale::operator()(double value) const {
  if (d1 == d0) return (r0 + r1) / 2.0;
  return r0 + (value - d0) * (r1 - r0) / (d1 - d0);
}

namespace {

// A zero-width range gets a width so that it can carry ticks.
std::pair<double, double> widened(double lo, double hi) {
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo > 1e-12 * std::max(std::abs(lo), std::abs(hi))) return {lo, hi};
  double pad = lo == 0.0 ? 1.0 : std::abs(lo) * 0.05;
  return {lo - pad, hi + pad};
}

}  // namespace

double nice_step(double span, int target) {
  double raw = span / std::max(target, 1);
  if (!(raw > 0.0) || !std::isfinite(raw)) return 1.0;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double best = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::abs(m * magnitude - raw) < std::abs(best - raw)) best = m * magnitude;
  }
  return best;
}

Ticks nice_ticks(double lo, double hi, int target) {
  std::tie(lo, hi) = widened(lo, hi);
  Ticks t;
  t.step = nice_step(hi - lo, target);
  const double eps = t.step * 1e-9;
  for (double k = std::ceil((lo - eps) / t.step); k * t.step <= hi + eps; k += 1.0) {
    double v = k * t.step;
    t.values.push_back(std::abs(v) < eps ? 0.0 : v);
  }
  return t;
}

std::pair<double, double> nice_domain(double lo, double hi, int target) {
  std::tie(lo, hi) = widened(lo, hi);
  double step = nice_step(hi - lo, target);
  const double eps = step * 1e-9;
  return {std::floor((lo + eps) / step) * step, std::ceil((hi - eps) / step) * step};
}

std::string tick_label(double value, double step) {
  int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fixed(value, decimals);
}

std::string viridis(double t) {
  // Nine samples of matplotlib's viridis, interpolated linearly in RGB.
  static constexpr std::array<std::array<int, 3>, 9> kStops{{{68, 1, 84},
                                                             {71, 44, 122},
                                                             {59, 81, 139},
                                                             {44, 113, 142},
                                                             {33, 144, 141},
                                                             {39, 173, 129},
                                                             {92, 200, 99},
                                                             {170, 220, 50},
                                                             {253, 231, 37}}};
  double x = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * (kStops.size() - 1);
  auto i = std::min(static_cast<std::size_t>(x), kStops.size() - 2);
  double f = x - static_cast<double>(i);
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c])));
  }
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

}  // namespace perseus::report
