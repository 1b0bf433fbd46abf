// The report library: SVG escaping and element writing, nice axis ticks, the colour scale, the
// drawn elements of each chart for small synthetic inputs, and the HTML page (well-formed, no
// network URLs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perseus/report/charts.hpp"
#include "perseus/report/html.hpp"
#include "perseus/report/svg.hpp"
#include "test_support.hpp"

namespace perseus::report {
namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Checks that every start tag is closed in order (self-closing tags, <!DOCTYPE> and <?xml?>
// stand alone); returns an empty string when balanced, else what is wrong.
std::string tag_balance(const std::string& text) {
  std::vector<std::string> open;
  for (auto lt = text.find('<'); lt != std::string::npos; lt = text.find('<', lt + 1)) {
    auto gt = text.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag at " + std::to_string(lt);
    std::string tag = text.substr(lt + 1, gt - lt - 1);
    if (tag.empty() || tag[0] == '!' || tag[0] == '?' || tag.back() == '/') continue;
    bool closing = tag[0] == '/';
    std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" \n", 1) - (closing ? 1 : 0));
    if (!closing) {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
    } else {
      open.pop_back();
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

TEST(ReportSvg, EscapesTheXmlSpecialCharacters) {
  EXPECT_EQ(escape("a<b & \"c\" > 'd'"), "a&lt;b &amp; &quot;c&quot; &gt; &#39;d&#39;");
  EXPECT_EQ(escape("plain text 1.5"), "plain text 1.5");
  EXPECT_EQ(escape(""), "");
}

TEST(ReportSvg, ElementEscapesAttributesAndText) {
  EXPECT_EQ(Element("rect").attr("x", 1.5).attr("fill", "#000").str(),
            "<rect x=\"1.5\" fill=\"#000\"/>");
  EXPECT_EQ(Element("text").attr("title", "a\"b").text("x < y & z").str(),
            "<text title=\"a&quot;b\">x &lt; y &amp; z</text>");
  // An empty container stays paired (HTML has no self-closing <td/>).
  EXPECT_EQ(Element("td").text("").str(), "<td></td>");
  EXPECT_EQ(Element("g").add(Element("circle")).str(), "<g><circle/></g>");
}

TEST(ReportSvg, FormatsNumbersCompactlyOrFixed) {
  EXPECT_EQ(num(1.5), "1.5");
  EXPECT_EQ(num(2.0), "2");
  EXPECT_EQ(num(0.126, 2), "0.13");
  EXPECT_EQ(num(-0.001, 2), "0");
  EXPECT_EQ(fixed(1.5, 2), "1.50");
  EXPECT_EQ(fixed(-0.0001, 2), "0.00");
  EXPECT_EQ(fixed(-2.5, 1), "-2.5");
}

TEST(ReportSvg, NiceStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(1.0, 5), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(0.63, 6), 0.1);
  EXPECT_DOUBLE_EQ(nice_step(2400.0, 5), 500.0);
  EXPECT_DOUBLE_EQ(nice_step(0.5, 10), 0.05);
}

TEST(ReportSvg, TicksAreMultiplesOfTheStepInsideTheRange) {
  Ticks t = nice_ticks(0.0, 1.0, 5);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_DOUBLE_EQ(t.values.front(), 0.0);
  EXPECT_NEAR(t.values.back(), 1.0, 1e-12);

  t = nice_ticks(2.83, 3.46, 6);
  EXPECT_DOUBLE_EQ(t.step, 0.1);
  ASSERT_EQ(t.values.size(), 6u);  // 2.9 .. 3.4
  EXPECT_NEAR(t.values.front(), 2.9, 1e-12);
  EXPECT_NEAR(t.values.back(), 3.4, 1e-12);
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    EXPECT_GE(t.values[i], 2.83);
    EXPECT_LE(t.values[i], 3.46);
  }

  auto [lo, hi] = nice_domain(2.83, 3.46, 6);
  EXPECT_NEAR(lo, 2.8, 1e-12);
  EXPECT_NEAR(hi, 3.5, 1e-12);
  // A zero-width range is widened so that it still has ticks around the value.
  t = nice_ticks(5.0, 5.0);
  ASSERT_FALSE(t.values.empty());
  EXPECT_LE(t.values.front(), 5.0);
  EXPECT_GE(t.values.back(), 5.0);
}

TEST(ReportSvg, TickLabelsUseTheStepsDecimals) {
  EXPECT_EQ(tick_label(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(tick_label(1.0, 0.05), "1.00");
  EXPECT_EQ(tick_label(1500.0, 500.0), "1500");
  EXPECT_EQ(tick_label(-0.0, 0.2), "0.0");
}

TEST(ReportSvg, ViridisRunsFromPurpleToYellowAndClamps) {
  EXPECT_EQ(viridis(0.0), "#440154");
  EXPECT_EQ(viridis(1.0), "#fde725");
  EXPECT_EQ(viridis(-3.0), "#440154");
  EXPECT_EQ(viridis(7.0), "#fde725");
  EXPECT_NE(viridis(0.5), viridis(0.6));
}

emulate::TimelineEntry entry(int stage, int position, schedule::InstructionType type, int mb,
                             double start, double end, double energy, bool critical) {
  emulate::TimelineEntry e;
  e.rank = stage;
  e.position = position;
  e.instruction = {type, mb, stage};
  e.frequency_mhz = 1410;
  e.start_s = start;
  e.end_s = end;
  e.energy_j = energy;
  e.critical = critical;
  return e;
}

// Two stages, one microbatch: F0 on stage 0, F0 and B0 on stage 1, B0 on stage 0.
emulate::Timeline small_timeline() {
  using schedule::InstructionType;
  emulate::Timeline t;
  t.time_s = 0.4;
  t.energy_j = 150.0;
  t.blocking_power_w = 80.0;
  t.rank_busy_s = {0.3, 0.3};
  t.rank_idle_s = {0.1, 0.1};
  t.rank_energy_j = {75.0, 75.0};
  t.entries = {entry(0, 0, InstructionType::kForward, 0, 0.0, 0.1, 30.0, true),
               entry(0, 1, InstructionType::kBackward, 0, 0.2, 0.4, 60.0, true),
               entry(1, 0, InstructionType::kForward, 0, 0.1, 0.15, 20.0, true),
               entry(1, 1, InstructionType::kBackward, 0, 0.15, 0.2, 40.0, false)};
  return t;
}

TEST(ReportCharts, TimelineDrawsOneRectPerEntryAndMarksTheCriticalOnes) {
  std::string svg = timeline_chart(small_timeline());
  EXPECT_EQ(count(svg, "class=\"entry\""), 1u);
  EXPECT_EQ(count(svg, "class=\"entry critical\""), 3u);
  EXPECT_EQ(count(svg, "class=\"lane\""), 2u);
  EXPECT_EQ(count(svg, "class=\"critical-path\""), 1u);
  EXPECT_NE(svg.find(">stage 0<"), std::string::npos);
  EXPECT_NE(svg.find(">stage 1<"), std::string::npos);
  EXPECT_NE(svg.find("Power (W)"), std::string::npos);
  EXPECT_NE(svg.find("Time within the iteration (s)"), std::string::npos);
  EXPECT_EQ(tag_balance(svg), "");
}

TEST(ReportCharts, TimelineColoursBarsByPower) {
  std::string svg = timeline_chart(small_timeline());
  // Stage 0 runs at 300 W (the lowest), B0 on stage 1 at 40 J / 0.05 s = 800 W (the highest):
  // they get the ends of the colour scale.
  EXPECT_NE(svg.find("fill=\"" + viridis(0.0) + "\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"" + viridis(1.0) + "\""), std::string::npos);
}

FrontierChartData small_frontier() {
  FrontierChartData d;
  d.frontier = {{3.0, 900.0}, {3.1, 860.0}, {3.2, 840.0}, {3.4, 830.0}, {3.6, 828.0}};
  d.all_max = {2.95, 1000.0};
  d.highlight = {"Frontier plan #4", d.frontier[0], ""};
  d.baselines = {{"Uniform", {3.7, 835.0}, ""},
                 {"EnvPipe <greedy> & co", {2.95, 950.0}, "stopped"},
                 {"EnvPipe balanced", {2.96, 940.0}, ""}};
  d.curves = {{"Zeus global", {{2.95, 1000.0}, {3.1, 950.0}, {3.3, 900.0}, {3.8, 880.0}}, 2, ""},
              {"Zeus per-stage", {{2.95, 990.0}, {3.0, 930.0}, {3.2, 870.0}, {3.5, 860.0}}, 1, ""}};
  return d;
}

TEST(ReportCharts, FrontierDrawsEveryPointBaselineAndCurve) {
  std::string svg = frontier_chart(small_frontier());
  EXPECT_EQ(count(svg, "class=\"frontier-point\""), 5u);
  EXPECT_EQ(count(svg, "class=\"frontier-line\""), 1u);
  EXPECT_EQ(count(svg, "class=\"baseline\""), 4u);  // three baselines and all-max
  EXPECT_EQ(count(svg, "class=\"curve\""), 2u);
  EXPECT_EQ(count(svg, "class=\"curve-point\""), 8u);
  EXPECT_EQ(count(svg, "class=\"chosen\""), 2u);
  EXPECT_EQ(count(svg, "class=\"highlight\""), 1u);
  EXPECT_NE(svg.find("Iteration time (s)"), std::string::npos);
  EXPECT_NE(svg.find("Energy per iteration (J)"), std::string::npos);
  // Names are escaped wherever they appear (legend, tooltips).
  EXPECT_EQ(svg.find("<greedy>"), std::string::npos);
  EXPECT_NE(svg.find("EnvPipe &lt;greedy&gt; &amp; co"), std::string::npos);
  EXPECT_EQ(tag_balance(svg), "");
}

TEST(ReportCharts, FrontierSamplesLargeFrontiersButKeepsTheLine) {
  FrontierChartData d = small_frontier();
  d.frontier.clear();
  for (int i = 0; i < 5000; ++i) d.frontier.push_back({3.0 + i * 1e-4, 900.0 - i * 0.01});
  std::string svg = frontier_chart(d);
  std::size_t points = count(svg, "class=\"frontier-point\"");
  EXPECT_GE(points, 50u);
  EXPECT_LE(points, 500u);
  EXPECT_EQ(count(svg, "class=\"frontier-line\""), 1u);
  // Large energies switch the axis to kilojoules.
  d.all_max.energy_j = 25000.0;
  EXPECT_NE(frontier_chart(d).find("Energy per iteration (kJ)"), std::string::npos);
}

std::vector<emulate::ClusterPoint> small_sweep() {
  std::vector<emulate::ClusterPoint> sweep;
  for (int i = 0; i <= 4; ++i) {
    emulate::ClusterPoint p;
    p.factor = 1.0 + 0.1 * i;
    p.intrinsic_saving = 0.15;
    p.extrinsic_saving = 0.02 * i;
    p.total_saving = p.intrinsic_saving + p.extrinsic_saving;
    p.baseline = {3.0 * p.factor, 1e6};
    p.perseus = {3.0 * p.factor, 1e6 * (1 - p.total_saving)};
    p.perseus_plan = static_cast<std::size_t>(10 - i);
    sweep.push_back(p);
  }
  return sweep;
}

TEST(ReportCharts, SweepDrawsThreeSeriesWithAPointPerFactor) {
  std::string svg = sweep_chart(small_sweep());
  EXPECT_EQ(count(svg, "class=\"series\""), 3u);
  EXPECT_EQ(count(svg, "class=\"series-point\""), 15u);
  EXPECT_NE(svg.find("Straggler slowdown factor"), std::string::npos);
  EXPECT_NE(svg.find("Energy saving vs all-max (%)"), std::string::npos);
  EXPECT_EQ(tag_balance(svg), "");
}

TEST(ReportCharts, EmptyInputsDrawAnEmptyFrame) {
  std::string timeline = timeline_chart(emulate::Timeline{});
  EXPECT_EQ(count(timeline, "class=\"entry"), 0u);
  EXPECT_EQ(tag_balance(timeline), "");
  std::string sweep = sweep_chart({});
  EXPECT_EQ(count(sweep, "class=\"series-point\""), 0u);
  EXPECT_EQ(tag_balance(sweep), "");
}

ReportData small_report() {
  ReportData d;
  d.settings = {{"profile", "test <profile>"}};
  d.schedule = "1f1b";
  d.num_stages = 2;
  d.num_microbatches = 1;
  d.frontier = small_frontier();
  d.fastest = {"Frontier plan #0 (fastest)", d.frontier.frontier[0], ""};
  d.frontier.highlight = d.fastest;  // the timeline shows the fastest plan
  d.timeline = small_timeline();
  d.cluster = {4, 2};
  d.sweep = small_sweep();
  const auto& all_max = d.frontier.all_max;
  d.savings = {{"Perseus within +0 %", std::nullopt, "no plan is this fast", false},
               {"Perseus within +5 %",
                plan::TimeEnergy{all_max.time_s * 1.04, all_max.energy_j * 0.8}, "plan #3", false},
               {"EnvPipe balanced", plan::TimeEnergy{all_max.time_s, all_max.energy_j * 0.9},
                "stopped", true}};
  return d;
}

TEST(ReportHtml, PageEmbedsTheFourChartsAndIsWellFormed) {
  std::string html = render_report(small_report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg"), 4u);
  EXPECT_EQ(count(html, "</svg>"), 4u);
  EXPECT_EQ(count(html, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart "), 4u);
  EXPECT_EQ(tag_balance(html), "");
  EXPECT_NE(html.find("test &lt;profile&gt;"), std::string::npos);
}

TEST(ReportHtml, SavingsShowEachBoundAndBaselineWithItsSavingAndSlowdown) {
  ReportData d = small_report();
  std::string chart = saving_chart(d.savings, d.frontier.all_max);
  EXPECT_EQ(count(chart, "<rect class=\"bar perseus\""), 1u);  // the +0 % row has no plan
  EXPECT_EQ(count(chart, "<rect class=\"bar baseline\""), 1u);
  EXPECT_CONTAINS(chart, "20 % at +4 % time");
  EXPECT_CONTAINS(chart, "10 % at +0 % time");
  EXPECT_CONTAINS(chart, "no plan is this fast");
  std::string html = render_report(d);
  auto table = html.substr(html.find("<table class=\"savings\""));
  table = table.substr(0, table.find("</table>"));
  EXPECT_EQ(count(table, "<tr"), 1u + 3u);
  EXPECT_EQ(count(table, "<tr class=\"baseline\""), 1u);
  EXPECT_CONTAINS(table, "-20.00");
  // The sweep's heading says the cluster was assumed when the user gave none.
  d.cluster_assumed = true;
  EXPECT_CONTAINS(render_report(d), "(assumed: give --gpus or --pipelines for your cluster)");
}

TEST(ReportHtml, AMeasuredProfileShowsItsErrorsAndEachSavingsStandardError) {
  ReportData d = small_report();
  std::string html = render_report(d);
  EXPECT_EQ(html.find("<ul class=\"profile-error\">"), std::string::npos);  // no error columns
  EXPECT_EQ(html.find("std. error"), std::string::npos);
  d.savings[1].error.standard_error = 0.06;
  d.profile_error = {"energy standard error: median 0.05 %", "energy pooling error: none"};
  std::string chart = saving_chart(d.savings, d.frontier.all_max);
  EXPECT_CONTAINS(chart, "20 ± 0.06 % at +4 % time");
  EXPECT_EQ(count(chart, "class=\"pooling-bound\""), 0u);
  d.savings[1].error.pooling_bound = 1.5;  // a whisker from 18.5 to 21.5 %
  chart = saving_chart(d.savings, d.frontier.all_max);
  EXPECT_EQ(count(chart, "<path class=\"pooling-bound\""), 1u);
  EXPECT_CONTAINS(chart, "may move this saving by up to ± 1.5 points");
  html = render_report(d);
  EXPECT_CONTAINS(html, "Whiskers: how far the profile");
  EXPECT_CONTAINS(html, "saving ± 0.06 points (std. error), up to ± 1.5 from pooled rows");
  EXPECT_EQ(count(html, "<li>Measured profile: energy "), 2u);
  EXPECT_CONTAINS(html, "<ul class=\"profile-error\">");
  EXPECT_CONTAINS(html, "plan #3; saving ± 0.06 points (std. error)");
  EXPECT_EQ(tag_balance(html), "");
}

TEST(ReportHtml, HasNoNetworkReferences) {
  std::string html = render_report(small_report());
  // The only URL is the SVG namespace, which browsers never fetch.
  std::string stripped = html;
  for (auto pos = stripped.find("http://www.w3.org/2000/svg"); pos != std::string::npos;
       pos = stripped.find("http://www.w3.org/2000/svg")) {
    stripped.erase(pos, 26);
  }
  for (const char* bad : {"http", "//", "url(", "src=", "href=", "<script", "@import", "<link"}) {
    EXPECT_EQ(stripped.find(bad), std::string::npos) << bad;
  }
}

TEST(ReportHtml, TablesListEveryPlanAndSampleTheSweep) {
  ReportData d = small_report();
  std::string html = render_report(d);
  // Plans: all-max, fastest (also the timeline plan: one row), 3 baselines, 2 chosen Zeus points.
  auto plans = html.substr(html.find("<table class=\"plans\""));
  plans = plans.substr(0, plans.find("</table>"));
  EXPECT_EQ(count(plans, "<tr"), 1u + 7u);
  // A timeline plan other than the fastest gets its own row.
  d.frontier.highlight.name = "Frontier plan #2";
  std::string html2 = render_report(d);
  auto plans2 = html2.substr(html2.find("<table class=\"plans\""));
  EXPECT_EQ(count(plans2.substr(0, plans2.find("</table>")), "<tr"), 1u + 8u);
  // The sweep table: at most six factors, first and last included.
  auto sweep = html.substr(html.find("<table class=\"sweep\""));
  sweep = sweep.substr(0, sweep.find("</table>"));
  EXPECT_EQ(count(sweep, "<tr"), 1u + 5u);
  EXPECT_NE(sweep.find(">1.00<"), std::string::npos);
  EXPECT_NE(sweep.find(">1.40<"), std::string::npos);
}

TEST(ReportHtml, SvgFileStartsWithAnXmlDeclaration) {
  std::string file = svg_file(sweep_chart(small_sweep()));
  EXPECT_EQ(file.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
}

}  // namespace
}  // namespace perseus::report
