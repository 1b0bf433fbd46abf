// The time-energy chart: frontier line with points, reference and baseline markers, power-limit
// sweep curves, and a legend in the right margin.
#include <algorithm>
#include <cmath>

#include "perseus/report/canvas.hpp"
#include "perseus/report/charts.hpp"

namespace perseus::report {

namespace {

constexpr double kWidth = 980.0, kHeight = 470.0;
constexpr Margins kMargins{18.0, 250.0, 58.0, 78.0};
constexpr std::size_t kMaxFrontierMarkers = 200;

struct Style {
  const char* colour;
  Marker shape;
  const char* dash;
};
constexpr Style kBaselineStyles[] = {{palette::kGreen, Marker::kSquare, ""},
                                     {palette::kSky, Marker::kTriangleUp, ""},
                                     {palette::kOrange, Marker::kTriangleDown, ""},
                                     {palette::kPurple, Marker::kDiamond, ""}};
constexpr Style kCurveStyles[] = {{palette::kPurple, Marker::kCircle, ""},
                                  {palette::kGrey, Marker::kSquare, "6 3"},
                                  {palette::kGreen, Marker::kDiamond, "2 2"}};
constexpr Style kFrontierStyle{palette::kBlue, Marker::kCircle, ""};
constexpr Style kAllMaxStyle{palette::kBlack, Marker::kDiamond, ""};

template <std::size_t N>
const Style& style_of(const Style (&styles)[N], std::size_t i) {
  return styles[i % N];
}

// Joules, or kilojoules when the numbers get long.
struct EnergyUnit {
  double divisor;
  const char* name;
};

// Scales and units of one chart, shared by everything drawn on it.
struct Axes {
  LinearScale x, y;
  EnergyUnit unit;
  double px(const plan::TimeEnergy& p) const { return x(p.time_s); }
  double py(const plan::TimeEnergy& p) const { return y(p.energy_j / unit.divisor); }
};

std::vector<plan::TimeEnergy> all_points(const FrontierChartData& d) {
  std::vector<plan::TimeEnergy> pts = d.frontier;
  pts.push_back(d.all_max);
  pts.push_back(d.highlight.value);
  for (const auto& b : d.baselines) pts.push_back(b.value);
  for (const auto& c : d.curves) pts.insert(pts.end(), c.points.begin(), c.points.end());
  return pts;
}

std::string describe(std::string_view name, const plan::TimeEnergy& p) {
  return std::string(name) + ": " + num(p.time_s, 4) + " s, " + num(p.energy_j, 1) + " J";
}

Axes draw_axes(Canvas& c, const FrontierChartData& d) {
  auto pts = all_points(d);
  auto [t0, t1] = std::minmax_element(pts.begin(), pts.end(),
                                      [](auto& a, auto& b) { return a.time_s < b.time_s; });
  auto [e0, e1] = std::minmax_element(pts.begin(), pts.end(),
                                      [](auto& a, auto& b) { return a.energy_j < b.energy_j; });
  EnergyUnit unit = e1->energy_j >= 1e4 ? EnergyUnit{1e3, "kJ"} : EnergyUnit{1.0, "J"};
  auto [x0, x1] = nice_domain(t0->time_s, t1->time_s, 8);
  auto [y0, y1] = nice_domain(e0->energy_j / unit.divisor, e1->energy_j / unit.divisor, 6);
  Axes a{c.x_scale(x0, x1), c.y_scale(y0, y1), unit};
  c.x_axis(a.x, nice_ticks(x0, x1, 8), "Iteration time (s)", true);
  c.y_axis(a.y, nice_ticks(y0, y1, 6), std::string("Energy per iteration (") + unit.name + ")",
           true);
  return a;
}

Element point(const Axes& a, const plan::TimeEnergy& p, const Style& s, double size,
              std::string_view cls, std::string_view tip) {
  return marker(s.shape, a.px(p), a.py(p), size, s.colour).attr("class", cls).tooltip(tip);
}

Element line_through(const Axes& a, const std::vector<plan::TimeEnergy>& pts, const Style& s,
                     std::string_view cls, double width) {
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : pts) xy.emplace_back(a.px(p), a.py(p));
  Element path("path");
  path.attr("class", cls)
      .attr("d", path_through(xy))
      .attr("fill", "none")
      .attr("stroke", s.colour)
      .attr("stroke-width", width)
      .attr("stroke-linejoin", "round");
  if (*s.dash != '\0') path.attr("stroke-dasharray", s.dash);
  return path;
}

// Indices of at most `limit` points spread evenly over [0, n), first and last included.
std::vector<std::size_t> sample(std::size_t n, std::size_t limit) {
  std::vector<std::size_t> out;
  if (n <= limit) {
    for (std::size_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (std::size_t k = 0; k < limit; ++k) out.push_back(k * (n - 1) / (limit - 1));
  return out;
}

void draw_frontier(Canvas& c, const Axes& a, std::vector<plan::TimeEnergy> pts) {
  std::sort(pts.begin(), pts.end(), [](auto& p, auto& q) { return p.time_s < q.time_s; });
  c.add(line_through(a, pts, kFrontierStyle, "frontier-line", 2.0));
  for (std::size_t i : sample(pts.size(), kMaxFrontierMarkers)) {
    c.add(point(a, pts[i], kFrontierStyle, 2.6, "frontier-point", describe("frontier", pts[i])));
  }
}

void draw_curve(Canvas& c, const Axes& a, const NamedCurve& curve, const Style& s) {
  c.add(line_through(a, curve.points, s, "curve", 1.6));
  for (const auto& p : curve.points) {
    c.add(point(a, p, s, 2.8, "curve-point", describe(curve.name, p)));
  }
  if (curve.chosen < curve.points.size()) {
    const auto& p = curve.points[curve.chosen];
    std::string tip = describe(curve.name + " (chosen)", p);
    c.add(point(a, p, s, 5.0, "chosen", tip));
    c.add(point(a, p, {palette::kBlack, Marker::kRing, ""}, 5.0, "chosen-ring", tip));
  }
}

std::vector<LegendEntry> legend_entries(const FrontierChartData& d) {
  using Swatch = LegendEntry::Swatch;
  std::vector<LegendEntry> e{
      {"Perseus frontier (" + std::to_string(d.frontier.size()) + " plans)", kFrontierStyle.colour,
       Swatch::kLineMarker, kFrontierStyle.shape, ""},
      {"Plan in the timeline", palette::kVermillion, Swatch::kMarker, Marker::kRing, ""},
      {"All-max", kAllMaxStyle.colour, Swatch::kMarker, kAllMaxStyle.shape, ""}};
  for (std::size_t i = 0; i < d.baselines.size(); ++i) {
    const Style& s = style_of(kBaselineStyles, i);
    e.push_back({d.baselines[i].name, s.colour, Swatch::kMarker, s.shape, ""});
  }
  for (std::size_t i = 0; i < d.curves.size(); ++i) {
    const Style& s = style_of(kCurveStyles, i);
    e.push_back({d.curves[i].name, s.colour, Swatch::kLineMarker, s.shape, s.dash});
  }
  if (!d.curves.empty()) {
    e.push_back({"chosen power limit", palette::kBlack, Swatch::kMarker, Marker::kRing, ""});
  }
  return e;
}

}  // namespace

std::vector<NamedPoint> FrontierChartData::chosen_baselines() const {
  std::vector<NamedPoint> out = baselines;
  for (const auto& c : curves) {
    if (c.chosen < c.points.size()) {
      out.push_back({c.name, c.points[c.chosen], c.note, c.chosen_error});
    }
  }
  return out;
}

std::string frontier_chart(const FrontierChartData& d) {
  Canvas c(kWidth, kHeight, kMargins, "frontier",
           "Iteration time versus energy of the Perseus frontier and the baselines");
  Axes a = draw_axes(c, d);
  for (std::size_t i = 0; i < d.curves.size(); ++i) {
    draw_curve(c, a, d.curves[i], style_of(kCurveStyles, i));
  }
  draw_frontier(c, a, d.frontier);
  for (std::size_t i = 0; i < d.baselines.size(); ++i) {
    const auto& b = d.baselines[i];
    c.add(point(a, b.value, style_of(kBaselineStyles, i), 5.5, "baseline",
                describe(b.name, b.value)));
  }
  c.add(point(a, d.all_max, kAllMaxStyle, 5.5, "baseline", describe("All-max", d.all_max)));
  c.add(point(a, d.highlight.value, {palette::kVermillion, Marker::kRing, ""}, 5.5, "highlight",
              describe(d.highlight.name, d.highlight.value)));
  c.legend(legend_entries(d), c.right() + 24, c.top() + 12);
  return c.str();
}

}  // namespace perseus::report
