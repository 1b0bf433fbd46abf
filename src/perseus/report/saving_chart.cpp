// "What do I save at what slowdown": one horizontal bar per row, the energy saving against
// all-max, labelled with the saving and the slowdown it costs. Perseus rows in blue; a baseline
// in grey directly above Perseus at that baseline's own iteration time, so each pair compares
// like with like. A row without a plan (no plan within the bound) draws its reason instead. On a
// measured profile each Perseus label carries the saving's standard error, and a whisker shows
// how far pooled rows may move it (plan::SavingError).
#include <algorithm>
#include <cmath>

#include "perseus/report/canvas.hpp"
#include "perseus/report/charts.hpp"

namespace perseus::report {

namespace {

constexpr double kWidth = 980.0, kRow = 26.0;
constexpr Margins kMargins{16.0, 200.0, 50.0, 300.0};

double saving(const SavingRow& r, const plan::TimeEnergy& all_max) {
  return r.value ? 100.0 * (1.0 - r.value->energy_j / all_max.energy_j) : 0.0;
}

std::string bar_label(const SavingRow& r, const plan::TimeEnergy& all_max) {
  if (!r.value) return r.note;
  const auto& se = r.error.standard_error;
  const std::string error = se ? " ± " + num(*se, 2) : "";
  return num(saving(r, all_max), 2) + error + " % at " +
         (r.value->time_s >= all_max.time_s ? "+" : "") +
         num(100.0 * (r.value->time_s / all_max.time_s - 1.0), 2) + " % time";
}

// How far pooled rows may move the row's saving, in points (0: not at all, or not known).
double pooling(const SavingRow& r) {
  return r.value ? r.error.pooling_bound.value_or(0.0) : 0.0;
}

// The pooling bound as a whisker across the bar's end, from saving - bound to saving + bound.
Element whisker(const SavingRow& r, const LinearScale& x, double s, double y) {
  const double a = x(s - pooling(r)), b = x(s + pooling(r)), h = 5.0;
  return Element("path")
      .attr("class", "pooling-bound")
      .attr("d", "M" + num(a, 1) + " " + num(y, 1) + " H" + num(b, 1) + " M" + num(a, 1) + " " +
                     num(y - h, 1) + " V" + num(y + h, 1) + " M" + num(b, 1) + " " + num(y - h, 1) +
                     " V" + num(y + h, 1))
      .attr("stroke", "#222222")
      .attr("stroke-width", 1.3)
      .attr("fill", "none")
      .tooltip(r.label + ": pooled profile rows may move this saving by up to ± " +
               num(pooling(r), 2) + " points");
}

}  // namespace

std::string saving_chart(const std::vector<SavingRow>& rows, const plan::TimeEnergy& all_max) {
  const double height = kMargins.top +
                        kRow * static_cast<double>(std::max<std::size_t>(rows.size(), 1)) +
                        kMargins.bottom;
  Canvas c(kWidth, height, kMargins, "saving",
           "Energy saving against all-max of each plan, with the slowdown it costs");
  double hi = 5.0, lo = 0.0;
  for (const auto& r : rows) {
    hi = std::max(hi, saving(r, all_max) + pooling(r));
    lo = std::min(lo, saving(r, all_max) - pooling(r));
  }
  auto [x0, x1] = nice_domain(lo, hi, 6);
  LinearScale x = c.x_scale(x0, x1);
  c.x_axis(x, nice_ticks(x0, x1, 6), "Energy saving vs all-max (%)", true);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SavingRow& r = rows[i];
    const double y = c.top() + kRow * static_cast<double>(i);
    c.label(c.left() - 10, y + kRow / 2 + 4, r.label, "end", 12.5,
            r.baseline ? palette::kGrey : "#222222");
    if (r.value) {
      double a = x(std::min(0.0, saving(r, all_max))), b = x(std::max(0.0, saving(r, all_max)));
      c.add(Element("rect")
                .attr("class", r.baseline ? "bar baseline" : "bar perseus")
                .attr("x", a)
                .attr("y", y + 4)
                .attr("width", std::max(b - a, 1.0))
                .attr("height", kRow - 8)
                .attr("fill", r.baseline ? palette::kGrey : palette::kBlue)
                .tooltip(r.label + ": " + num(r.value->time_s, 4) + " s, " +
                         num(r.value->energy_j, 1) + " J"));
    }
    if (pooling(r) > 0.0) c.add(whisker(r, x, saving(r, all_max), y + kRow / 2));
    c.label(x(std::max(0.0, saving(r, all_max) + pooling(r))) + 6, y + kRow / 2 + 4,
            bar_label(r, all_max), "start", 12, r.value ? "#222222" : palette::kGrey);
  }
  return c.str();
}

}  // namespace perseus::report
