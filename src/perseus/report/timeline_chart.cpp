// The Gantt chart of one iteration: a lane per rank (GPU; rank 0 on top, labelled with the stages
// it runs), one bar per action coloured by its average power and labelled with its clock (and
// name where it fits: "F3", or "2F3" with the stage when a rank runs several stages), idle time
// in light grey, the critical path outlined and joined by a line; a colour bar for power and a
// small legend on the right.
#include <algorithm>
#include <cmath>

#include "perseus/report/canvas.hpp"
#include "perseus/report/charts.hpp"

namespace perseus::report {

namespace {

constexpr double kWidth = 980.0;
constexpr Margins kMargins{32.0, 170.0, 58.0, 70.0};
constexpr double kPlotHeight = 260.0;  // lanes share this (within the lane height limits)
constexpr double kMinLane = 12.0, kMaxLane = 44.0;
constexpr int kColourBarSlices = 48;

int rank_count(const emulate::Timeline& t) {
  int n = static_cast<int>(t.rank_busy_s.size());
  for (const auto& e : t.entries) n = std::max(n, e.rank + 1);
  return std::max(n, 1);
}

// Per rank, the stages its actions belong to, in first-seen order.
std::vector<std::vector<int>> stages_of_ranks(const emulate::Timeline& t, int ranks) {
  std::vector<std::vector<int>> stages(static_cast<std::size_t>(ranks));
  for (const auto& e : t.entries) {
    auto& list = stages[static_cast<std::size_t>(e.rank)];
    if (std::find(list.begin(), list.end(), e.instruction.stage) == list.end()) {
      list.push_back(e.instruction.stage);
    }
  }
  return stages;
}

bool one_stage_per_rank(const std::vector<std::vector<int>>& stages) {
  for (std::size_t r = 0; r < stages.size(); ++r) {
    if (stages[r].size() > 1 || (stages[r].size() == 1 && stages[r][0] != static_cast<int>(r))) {
      return false;
    }
  }
  return true;
}

std::string lane_label(int rank, const std::vector<int>& stages, bool classic) {
  if (classic) return "stage " + std::to_string(rank);
  std::string out = "GPU " + std::to_string(rank) + " (";
  for (std::size_t i = 0; i < stages.size(); ++i) {
    out += (i ? "," : "") + std::to_string(stages[i]);
  }
  return out + ")";
}

struct PowerRange {
  double lo, hi;
  double fraction(double w) const { return hi > lo ? (w - lo) / (hi - lo) : 0.5; }
};

PowerRange power_range(const emulate::Timeline& t) {
  if (t.entries.empty()) return {0.0, 1.0};
  double lo = t.entries.front().power_w(), hi = lo;
  for (const auto& e : t.entries) {
    lo = std::min(lo, e.power_w());
    hi = std::max(hi, e.power_w());
  }
  return {lo, hi};
}

// Geometry of the lanes: rank r occupies [top(r), top(r) + lane) vertically. `classic` when every
// rank runs one stage, its own number (bars then need no stage in their names).
struct Lanes {
  double y0, lane;
  bool classic = true;
  double top(int rank) const { return y0 + lane * rank; }
  double centre(int rank) const { return top(rank) + lane / 2; }
};

std::string entry_name(const emulate::TimelineEntry& e, bool classic) {
  std::string name = schedule::action_name(e.instruction);
  return classic ? name.substr(std::to_string(e.instruction.stage).size()) : name;
}

std::string entry_tooltip(const emulate::TimelineEntry& e) {
  std::string what;
  for (const schedule::Instruction& a : schedule::actions_of(e.instruction)) {
    what += (what.empty() ? "" : " overlapped with ") + std::string("stage ") +
            std::to_string(a.stage) + ", " + schedule::type_name(a.type) + " of microbatch " +
            std::to_string(a.microbatch);
  }
  return "GPU " + std::to_string(e.rank) + ", " + what + "\n" + std::to_string(e.frequency_mhz) +
         " MHz, " + num(e.start_s, 4) + "-" + num(e.end_s, 4) + " s, " + num(e.power_w(), 1) +
         " W, " + num(e.energy_j, 2) + " J" + (e.critical ? "\ncritical path" : "");
}

void draw_lanes(Canvas& c, const Lanes& l, const std::vector<std::vector<int>>& stages) {
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    c.add(Element("rect")
              .attr("class", "lane")
              .attr("x", c.left())
              .attr("y", l.top(s) + 1)
              .attr("width", c.right() - c.left())
              .attr("height", l.lane - 2)
              .attr("fill", palette::kIdle));
    c.label(c.left() - 8, l.centre(s) + 4, lane_label(s, stages[s], l.classic), "end", 12,
            "#222222");
  }
}

// The clock on every bar: "F3 1410" across it when that fits, else the clock alone, else the
// clock written upward, as large as the bar allows (tiny on a dense timeline, but there: the SVG
// is vector, zooming in reads it).
void draw_clock(Canvas& c, double x0, double w, double y0, double h, bool classic,
                const emulate::TimelineEntry& e, const char* colour) {
  constexpr double kFont = 9.5, kCharWidth = 0.62;  // average glyph width / font size
  const std::string clock = std::to_string(e.frequency_mhz);
  const std::string both = entry_name(e, classic) + " " + clock;
  const double cx = x0 + w / 2, cy = y0 + h / 2;
  auto fits = [&](const std::string& text, double font) {
    return kCharWidth * font * static_cast<double>(text.size()) + 3 <= w && font + 2 <= h;
  };
  const bool across = fits(both, kFont) || fits(clock, kFont);
  // Upward: the text's length runs along the bar's height, its size across the bar's width.
  const double font =
      across
          ? kFont
          : std::max(0.5, std::min({kFont, w * 0.9,
                                    (h - 2) / (kCharWidth * static_cast<double>(clock.size()))}));
  const double x = across ? cx : cx + font * 0.36, y = across ? cy + font * 0.36 : cy;
  Element label("text");
  label.attr("class", "clock")
      .attr("x", x)
      .attr("y", y)
      .attr("text-anchor", "middle")
      .attr("font-size", font)
      .attr("fill", colour);
  if (!across) label.attr("transform", "rotate(-90 " + num(x, 2) + " " + num(y, 2) + ")");
  c.add(label.text(fits(both, kFont) ? both : clock));
}

void draw_entry(Canvas& c, const LinearScale& x, const Lanes& l, const PowerRange& power,
                const emulate::TimelineEntry& e) {
  const double x0 = x(e.start_s), w = std::max(x(e.end_s) - x0, 0.6);
  const double pad = std::min(3.0, l.lane * 0.12);
  const double t = power.fraction(e.power_w());
  Element bar("rect");
  bar.attr("class", e.critical ? "entry critical" : "entry")
      .attr("x", x0)
      .attr("y", l.top(e.rank) + pad)
      .attr("width", w)
      .attr("height", l.lane - 2 * pad)
      .attr("fill", viridis(t));
  if (e.critical) {
    bar.attr("stroke", palette::kCritical).attr("stroke-width", std::clamp(w / 4, 0.7, 1.4));
  } else {
    bar.attr("stroke", "#ffffff").attr("stroke-width", w > 3 ? 0.5 : 0.0);
  }
  c.add(bar.tooltip(entry_tooltip(e)));
  draw_clock(c, x0, w, l.top(e.rank) + pad, l.lane - 2 * pad, l.classic, e,
             t > 0.55 ? "#222222" : "#ffffff");
}

// Connectors between consecutive critical instructions (time order) on different stages: from
// the end of one bar to the start of the next, lane centre to lane centre (the bars themselves
// are outlined).
void draw_critical_path(Canvas& c, const LinearScale& x, const Lanes& l,
                        const emulate::Timeline& t) {
  std::vector<const emulate::TimelineEntry*> path;
  for (const auto& e : t.entries) {
    if (e.critical) path.push_back(&e);
  }
  std::sort(path.begin(), path.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  std::string d;
  for (std::size_t i = 1; i < path.size(); ++i) {
    const auto *from = path[i - 1], *to = path[i];
    if (from->rank == to->rank) continue;
    d += (d.empty() ? "" : " ") + path_through({{x(from->end_s), l.centre(from->rank)},
                                                {x(to->start_s), l.centre(to->rank)}});
  }
  if (d.empty()) return;
  c.add(Element("path")
            .attr("class", "critical-path")
            .attr("d", d)
            .attr("fill", "none")
            .attr("stroke", palette::kCritical)
            .attr("stroke-width", 1.6)
            .attr("stroke-linejoin", "round")
            .attr("opacity", 0.9));
}

void draw_colour_bar(Canvas& c, const PowerRange& power, double y0, double y1) {
  const double x0 = c.right() + 22, width = 14;
  c.label(x0 - 4, y0 - 10, "Power (W)", "start", 12, "#222222");
  const double slice = (y1 - y0) / kColourBarSlices;
  for (int i = 0; i < kColourBarSlices; ++i) {
    double t = 1.0 - (i + 0.5) / kColourBarSlices;
    c.add(Element("rect")
              .attr("class", "colour-bar")
              .attr("x", x0)
              .attr("y", y0 + slice * i)
              .attr("width", width)
              .attr("height", slice + 0.3)
              .attr("fill", viridis(t)));
  }
  LinearScale y{power.lo, power.hi, y1, y0};
  Ticks ticks = nice_ticks(power.lo, power.hi, 4);
  for (double v : ticks.values) {
    if (v < power.lo || v > power.hi) continue;
    c.add(Element("line")
              .attr("x1", x0 + width)
              .attr("y1", y(v))
              .attr("x2", x0 + width + 4)
              .attr("y2", y(v))
              .attr("stroke", palette::kAxis));
    c.label(x0 + width + 7, y(v) + 4, tick_label(v, ticks.step), "start", 11);
  }
}

}  // namespace

std::string timeline_chart(const emulate::Timeline& t) {
  const int ranks = rank_count(t);
  const auto stages = stages_of_ranks(t, ranks);
  const double lane = std::clamp(kPlotHeight / ranks, kMinLane, kMaxLane);
  const double height = kMargins.top + lane * ranks + kMargins.bottom;
  const bool classic = one_stage_per_rank(stages);
  Margins margins = kMargins;
  if (!classic) margins.left += 40;  // "GPU 3 (3,12)" is longer than "stage 3"
  Canvas c(kWidth, height, margins, "timeline",
           "Timeline of one iteration per GPU (pipeline rank), coloured by power");
  const Lanes lanes{c.top(), lane, classic};
  const double end = t.time_s > 0.0 ? t.time_s : 1.0;
  LinearScale x = c.x_scale(0.0, end);
  draw_lanes(c, lanes, stages);
  c.x_axis(x, nice_ticks(0.0, end, 10), "Time within the iteration (s)", true);
  const PowerRange power = power_range(t);
  for (const auto& e : t.entries) draw_entry(c, x, lanes, power, e);
  draw_critical_path(c, x, lanes, t);
  const double bar_bottom = lanes.top(ranks) - 56;
  draw_colour_bar(c, power, lanes.y0 + 8, std::max(bar_bottom, lanes.y0 + 40));
  using Swatch = LegendEntry::Swatch;
  c.legend({{"blocked (" + num(t.blocking_power_w, 1) + " W)", palette::kIdle, Swatch::kBox,
             Marker::kCircle, ""},
            {"critical path", palette::kCritical, Swatch::kLine, Marker::kCircle, ""}},
           c.right() + 14, lanes.top(ranks) - 30);
  return c.str();
}

}  // namespace perseus::report
