// The report's three charts, each a standalone <svg class="chart ..."> string (usable inline in
// HTML or written as a .svg file for papers):
//   frontier_chart  evaluated iteration time vs energy: the Perseus frontier, all-max, baselines
//                   as labelled points, power-limit sweeps as curves with their chosen point
//   timeline_chart  Gantt chart of one iteration, one lane per stage, bars coloured by power,
//                   the critical path outlined and connected
//   sweep_chart     straggler sweep: intrinsic, extrinsic and total energy saving vs slowdown
//   saving_chart    energy saving of plans within slowdown bounds, and of each baseline next to
//                   Perseus at that baseline's own iteration time
// Inputs are plain data; rendering never fails (empty inputs draw an empty, labelled frame).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "perseus/emulate/cluster.hpp"
#include "perseus/emulate/timeline.hpp"
#include "perseus/plan/plan_io.hpp"

namespace perseus::report {

// How far a plan's saving against all-max may be off, in points, where the profile has errors
// (plan::SavingError): its standard error, and the bound pooled rows put on it (shown when
// above 0).
struct SavingErrorPoints {
  std::optional<double> standard_error, pooling_bound;
};

// One plan scored by the evaluator, e.g. a baseline.
struct NamedPoint {
  std::string name;
  plan::TimeEnergy value;
  std::string note;           // shown in the table (e.g. EnvPipe's stop reason)
  SavingErrorPoints error{};  // of its saving (baselines on a measured profile)
};

// A family of plans explored in order (e.g. Zeus' power limits), one of which was chosen.
struct NamedCurve {
  std::string name;
  std::vector<plan::TimeEnergy> points;
  std::size_t chosen = 0;  // index into points
  std::string note;
  SavingErrorPoints chosen_error{};  // of the chosen point's saving
};

struct FrontierChartData {
  std::vector<plan::TimeEnergy> frontier;  // evaluated time and energy of every frontier plan
  plan::TimeEnergy all_max;
  NamedPoint highlight;               // the plan shown in the timeline
  std::vector<NamedPoint> baselines;  // drawn as markers
  std::vector<NamedCurve> curves;     // drawn as lines with their chosen point

  // Every baseline's plan: the markers, then each curve's chosen point (with the curve's note).
  std::vector<NamedPoint> chosen_baselines() const;
};

// One row of "saving at slowdown": a plan (Perseus within a bound, or a baseline) or, when no
// plan meets the bound, no value and a note saying why.
struct SavingRow {
  std::string label;  // "Perseus within +5 %", "EnvPipe balanced", ...
  std::optional<plan::TimeEnergy> value;
  std::string note;
  bool baseline = false;  // drawn grey, above the Perseus row it is compared with
  SavingErrorPoints error{};
};

std::string frontier_chart(const FrontierChartData& data);
std::string saving_chart(const std::vector<SavingRow>& rows, const plan::TimeEnergy& all_max);
// Every entry is a <rect class="entry"> (class "entry critical" on the critical path).
std::string timeline_chart(const emulate::Timeline& timeline);
std::string sweep_chart(const std::vector<emulate::ClusterPoint>& sweep);

}  // namespace perseus::report
