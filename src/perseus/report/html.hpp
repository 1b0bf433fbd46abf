// The report page: one self-contained HTML file (inline SVG charts, inline CSS, no scripts, no
// fonts or other network resources) with what each slowdown saves (next to the baselines), the
// frontier, the timeline of one plan, the straggler sweep and tables of the numbers behind them.
// Everything it shows comes in as plain data.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/emulate/cluster.hpp"
#include "perseus/emulate/timeline.hpp"
#include "perseus/report/charts.hpp"

namespace perseus::report {

struct ReportData {
  std::string title = "Perseus report";
  // Shown under the title as "key: value" (profile, GPU, time unit, ...), in order.
  std::vector<std::pair<std::string, std::string>> settings;
  // How well a measured profile's energies are known (profile::describe), one line each; shown
  // under the settings.
  std::vector<std::string> profile_error;
  std::string schedule;
  int num_stages = 0;
  int num_microbatches = 0;
  FrontierChartData frontier;  // frontier.highlight is the plan of the timeline
  NamedPoint fastest;          // the fastest frontier plan
  emulate::Timeline timeline;
  emulate::ClusterSpec cluster;
  bool cluster_assumed = false;  // the sweep's cluster is the default, not the user's
  std::vector<emulate::ClusterPoint> sweep;
  std::vector<SavingRow> savings;  // "saving at slowdown", in display order
  // Measured runs (a closed loop on simulated or real GPUs), the first one the reference.
  std::vector<NamedPoint> measured;
  // Some measured run's energies are a simulator's true energy, not a counter's reading
  // (simulate-training's "gpus": "simulated").
  bool measured_simulated = false;
  // The plan the user takes away, shown first as "Your plan": frontier.highlight (also drawn in
  // the timeline), why it is the one ("the cheapest plan within +2 % of all-max's time"), and
  // the shell commands that export it and serve it to a training job, in order.
  std::string chosen_by;
  std::vector<std::string> next_steps;
};

struct Charts {
  std::string frontier, timeline, sweep, saving;  // standalone <svg> elements
};

Charts render_charts(const ReportData& data);
// The page, embedding `charts` (render_charts(data)).
std::string render_report(const ReportData& data, const Charts& charts);
std::string render_report(const ReportData& data);
// An SVG chart as a file of its own (XML declaration + the <svg> element).
std::string svg_file(const std::string& chart);

}  // namespace perseus::report
