// The straggler sweep: energy saving (% of the all-max baseline) against the straggler's slowdown
// factor, as three lines (intrinsic, extrinsic, total) with a legend on the right.
#include <algorithm>

#include "perseus/report/canvas.hpp"
#include "perseus/report/charts.hpp"

namespace perseus::report {

namespace {

constexpr double kWidth = 980.0, kHeight = 400.0;
constexpr Margins kMargins{18.0, 250.0, 58.0, 78.0};
constexpr std::size_t kMaxMarkers = 60;

struct Series {
  const char* name;
  double emulate::ClusterPoint::*saving;
  const char* colour;
  const char* dash;
  double width;
};
constexpr Series kSeries[] = {
    {"total", &emulate::ClusterPoint::total_saving, palette::kBlack, "", 2.6},
    {"intrinsic", &emulate::ClusterPoint::intrinsic_saving, palette::kBlue, "", 2.0},
    {"extrinsic", &emulate::ClusterPoint::extrinsic_saving, palette::kOrange, "7 4", 2.0}};

std::pair<double, double> saving_range(const std::vector<emulate::ClusterPoint>& sweep) {
  double lo = 0.0, hi = 1.0;
  for (const auto& p : sweep) {
    for (const auto& s : kSeries) {
      lo = std::min(lo, 100.0 * (p.*s.saving));
      hi = std::max(hi, 100.0 * (p.*s.saving));
    }
  }
  return {lo, hi};
}

void draw_series(Canvas& c, const LinearScale& x, const LinearScale& y,
                 const std::vector<emulate::ClusterPoint>& sweep, const Series& s) {
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : sweep) xy.emplace_back(x(p.factor), y(100.0 * (p.*s.saving)));
  Element line("path");
  line.attr("class", "series")
      .attr("d", path_through(xy))
      .attr("fill", "none")
      .attr("stroke", s.colour)
      .attr("stroke-width", s.width)
      .attr("stroke-linejoin", "round");
  if (*s.dash != '\0') line.attr("stroke-dasharray", s.dash);
  c.add(line);
  if (sweep.size() > kMaxMarkers) return;
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    c.add(marker(Marker::kCircle, xy[i].first, xy[i].second, 2.8, s.colour)
              .attr("class", "series-point")
              .tooltip(std::string(s.name) + " at x" + num(sweep[i].factor, 3) + ": " +
                       num(100.0 * (sweep[i].*s.saving), 2) + " %"));
  }
}

}  // namespace

std::string sweep_chart(const std::vector<emulate::ClusterPoint>& sweep) {
  Canvas c(kWidth, kHeight, kMargins, "sweep",
           "Energy savings versus the slowdown factor of a straggler pipeline");
  double f0 = 1.0, f1 = 1.0;
  if (!sweep.empty()) {
    auto [lo, hi] = std::minmax_element(sweep.begin(), sweep.end(),
                                        [](auto& a, auto& b) { return a.factor < b.factor; });
    f0 = lo->factor;
    f1 = hi->factor;
  }
  if (f1 <= f0) f1 = f0 + 0.1;
  auto [s0, s1] = saving_range(sweep);
  auto [y0, y1] = nice_domain(s0, s1, 6);
  LinearScale x = c.x_scale(f0, f1), y = c.y_scale(y0, y1);
  c.x_axis(x, nice_ticks(f0, f1, 10), "Straggler slowdown factor", true);
  c.y_axis(y, nice_ticks(y0, y1, 6), "Energy saving vs all-max (%)", true);
  std::vector<LegendEntry> legend;
  for (const auto& s : kSeries) {
    draw_series(c, x, y, sweep, s);
    legend.push_back({s.name, s.colour, LegendEntry::Swatch::kLine, Marker::kCircle, s.dash});
  }
  c.legend(legend, c.right() + 24, c.top() + 12);
  return c.str();
}

}  // namespace perseus::report
