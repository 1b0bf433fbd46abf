#include "perseus/report/html.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "perseus/report/svg.hpp"

namespace perseus::report {

namespace {

constexpr std::size_t kSweepTableRows = 6;

constexpr const char* kStyle = R"(
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #222; line-height: 1.45;
  font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 15px; }
main { max-width: 1000px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 26px; margin: 0 0 10px; }
h2 { font-size: 19px; margin: 30px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 18px 0 4px; }
dl.settings { display: grid; grid-template-columns: max-content 1fr max-content 1fr;
  gap: 2px 16px; margin: 0; font-size: 13.5px; }
dl.settings dt { color: #666; }
dl.settings dd { margin: 0; }
ul.profile-error { font-size: 13.5px; color: #444; margin: 8px 0 0; padding-left: 18px; }
figure { margin: 0; }
svg.chart { display: block; width: 100%; height: auto; }
figcaption { font-size: 13.5px; color: #444; margin-top: 6px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 18px; font-size: 13.5px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #e4e4e4; text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { border-bottom: 2px solid #999; }
th:first-child, td:first-child, .note { text-align: left; }
td.note { white-space: normal; color: #555; }
tr.emphasis td { font-weight: bold; }
tr.chosen td { font-weight: bold; background: #fff3e0; }
section.your-plan { margin: 22px 0 0; padding: 4px 18px 10px; border: 2px solid #e67e22;
  border-radius: 6px; background: #fffaf4; }
section.your-plan h2 { border: 0; margin: 10px 0 6px; }
section.your-plan p { margin: 6px 0; }
pre.commands { margin: 8px 0; padding: 8px 10px; background: #f4f4f4; font-size: 13px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
div.table { overflow-x: auto; }
tr.baseline td { color: #666; }
footer { margin-top: 28px; font-size: 12px; color: #777; }
@media print { main { max-width: none; padding: 0; } section { break-inside: avoid; } }
)";

// A number with `decimals` decimals and groups of thousands ("12,345.6").
std::string grouped(double value, int decimals) {
  std::string s = fixed(value, decimals);
  std::size_t begin = s[0] == '-' ? 1 : 0, end = std::min(s.find('.'), s.size());
  for (std::size_t i = end; i > begin + 3; i -= 3) s.insert(i - 3, ",");
  return s;
}

std::string signed_percent(double part, double whole) {
  std::string s = grouped(whole != 0.0 ? 100.0 * part / whole : 0.0, 2);
  return s[0] == '-' ? s : "+" + s;
}

// Slowdown factors with two decimals, three when they need them.
std::string factor_label(double f) {
  return fixed(f, std::abs(f * 100.0 - std::round(f * 100.0)) > 1e-6 ? 3 : 2);
}

Element cell(std::string_view tag, std::string_view text, std::string_view cls = "") {
  Element e(tag);
  if (!cls.empty()) e.attr("class", cls);
  return e.text(text);
}

Element row(const std::vector<std::string>& cells, std::string_view tag = "td",
            std::string_view cls = "") {
  Element tr("tr");
  if (!cls.empty()) tr.attr("class", cls);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    bool note = i + 1 == cells.size();
    tr.add(cell(tag, cells[i], note ? "note" : ""));
  }
  return tr;
}

// A table in a box that scrolls sideways where the page is narrower than the table.
Element table(std::string_view cls, const std::vector<std::string>& header,
              const std::vector<Element>& rows) {
  Element body("tbody");
  for (const auto& r : rows) body.add(r);
  return Element("div")
      .attr("class", "table")
      .add(Element("table")
               .attr("class", cls)
               .add(Element("thead").add(row(header, "th")))
               .add(body));
}

Element plan_row(const NamedPoint& p, const plan::TimeEnergy& ref, std::string_view cls = "") {
  return row({p.name, grouped(p.value.time_s, 4), grouped(p.value.energy_j, 1),
              signed_percent(p.value.time_s - ref.time_s, ref.time_s),
              signed_percent(p.value.energy_j - ref.energy_j, ref.energy_j), p.note},
             "td", cls);
}

Element plans_table(const ReportData& d) {
  const auto& ref = d.frontier.all_max;
  const bool fastest_chosen = d.frontier.highlight.name == d.fastest.name;
  std::vector<Element> rows{
      plan_row({"All-max", ref, "every instruction at the highest clock"}, ref),
      plan_row(d.fastest, ref, fastest_chosen ? "chosen" : "emphasis")};
  if (!fastest_chosen) rows.push_back(plan_row(d.frontier.highlight, ref, "chosen"));
  for (const auto& b : d.frontier.chosen_baselines()) rows.push_back(plan_row(b, ref));
  return table(
      "plans",
      {"plan", "time (s)", "energy (J)", "time vs all-max (%)", "energy vs all-max (%)", "note"},
      rows);
}

// Indices of up to `n` sweep points spread evenly, first and last included.
std::vector<std::size_t> spread(std::size_t size, std::size_t n) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < n && size > 0; ++k) {
    std::size_t i = n == 1 ? 0 : k * (size - 1) / (n - 1);
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  return out;
}

Element savings_table(const ReportData& d) {
  const auto& ref = d.frontier.all_max;
  std::vector<Element> rows;
  for (const auto& r : d.savings) {
    if (!r.value) {
      rows.push_back(row({r.label, "–", "–", "–", "–", r.note}));
      continue;
    }
    std::string note = r.note;
    const SavingErrorPoints& e = r.error;
    if (e.standard_error)
      note += "; saving ± " + num(*e.standard_error, 2) + " points (std. error)";
    if (e.pooling_bound.value_or(0.0) > 0.0) {
      note += ", up to ± " + num(*e.pooling_bound, 2) + " from pooled rows";
    }
    rows.push_back(plan_row({r.label, *r.value, note}, ref, r.baseline ? "baseline" : ""));
  }
  return table(
      "savings",
      {"plan", "time (s)", "energy (J)", "time vs all-max (%)", "energy vs all-max (%)", "note"},
      rows);
}

Element measured_table(const ReportData& d) {
  std::vector<Element> rows;
  for (const auto& m : d.measured) rows.push_back(plan_row(m, d.measured.front().value));
  return table("measured",
               {"run", "time (s)", "energy (J)", "time vs " + d.measured.front().name + " (%)",
                "energy vs " + d.measured.front().name + " (%)", "source"},
               rows);
}

Element sweep_table(const ReportData& d) {
  std::vector<Element> rows;
  for (std::size_t i : spread(d.sweep.size(), kSweepTableRows)) {
    const auto& p = d.sweep[i];
    rows.push_back(row({factor_label(p.factor), grouped(p.perseus.time_s, 4),
                        grouped(p.baseline.energy_j / 1e3, 1), grouped(p.perseus.energy_j / 1e3, 1),
                        grouped(100.0 * p.intrinsic_saving, 2),
                        grouped(100.0 * p.extrinsic_saving, 2), grouped(100.0 * p.total_saving, 2),
                        "frontier plan #" + std::to_string(p.perseus_plan)}));
  }
  return table("sweep",
               {"slowdown", "time (s)", "all-max (kJ)", "Perseus (kJ)", "intrinsic %",
                "extrinsic %", "total %", "non-stragglers run"},
               rows);
}

Element settings_list(const ReportData& d) {
  Element dl("dl");
  dl.attr("class", "settings");
  auto item = [&](std::string_view key, std::string_view value) {
    dl.add(Element("dt").text(key)).add(Element("dd").text(value));
  };
  for (const auto& [key, value] : d.settings) item(key, value);
  item("pipeline", d.schedule + ", " + std::to_string(d.num_stages) + " stages, " +
                       std::to_string(d.num_microbatches) + " microbatches");
  item("frontier", std::to_string(d.frontier.frontier.size()) + " plans");
  return dl;
}

// The measured profile's errors under the settings (none for a profile without them).
std::optional<Element> profile_error_list(const ReportData& d) {
  if (d.profile_error.empty()) return std::nullopt;
  Element ul("ul");
  ul.attr("class", "profile-error");
  for (const auto& line : d.profile_error) ul.add(Element("li").text("Measured profile: " + line));
  return ul;
}

std::string cluster_text(const ReportData& d) {
  const auto& c = d.cluster;
  long gpus = static_cast<long>(c.pipelines) * d.num_stages * c.tensor_parallel;
  return std::to_string(c.pipelines) + " data-parallel pipelines x " +
         std::to_string(d.num_stages) + " stages x " + std::to_string(c.tensor_parallel) +
         "-way tensor parallelism = " + grouped(static_cast<double>(gpus), 0) + " GPUs" +
         (d.cluster_assumed ? " (assumed: give --gpus or --pipelines for your cluster)" : "");
}

std::string saving_caption(const ReportData& d) {
  std::string caption =
      "Blue: the cheapest Perseus frontier plan within each slowdown of all-max's iteration "
      "time, and the plan with the least energy. Grey: each baseline, directly above the "
      "cheapest Perseus plan that takes at most the baseline's own iteration time, so in every "
      "pair Perseus is as fast or faster.";
  if (std::any_of(d.savings.begin(), d.savings.end(),
                  [](const SavingRow& r) { return r.error.standard_error.has_value(); })) {
    caption += " ±: the saving's standard error from the measured profile's rows.";
  }
  if (std::any_of(d.savings.begin(), d.savings.end(),
                  [](const SavingRow& r) { return r.error.pooling_bound.value_or(0.0) > 0.0; })) {
    caption +=
        " Whiskers: how far the profile's pooled rows (instructions the energy counter "
        "could not tell apart) may move the saving, a bound rather than a spread.";
  }
  return caption;
}

// "Your plan": the chosen plan's saving and cost against all-max, and the commands that take it
// to a training job.
Element your_plan(const ReportData& d) {
  const NamedPoint& p = d.frontier.highlight;
  const auto& ref = d.frontier.all_max;
  Element box = Element("section").attr("id", "your-plan").attr("class", "your-plan");
  box.add(Element("h2").text("Your plan: " + p.name));
  box.add(Element("p").text(
      "Energy " + signed_percent(p.value.energy_j - ref.energy_j, ref.energy_j) +
      " %, iteration time " + signed_percent(p.value.time_s - ref.time_s, ref.time_s) +
      " % against all-max (" + grouped(p.value.energy_j, 1) + " J and " +
      grouped(p.value.time_s, 4) + " s per iteration of one pipeline): " + d.chosen_by + "."));
  if (!d.next_steps.empty()) {
    std::string commands;
    for (const auto& c : d.next_steps) commands += c + "\n";
    box.add(Element("p").text("To export it and serve it to your training job's ranks:"))
        .add(Element("pre").attr("class", "commands").text(commands))
        .add(Element("p").text(
            "Then attach the client to the training job (perseus.torch.attach, "
            "perseus.deepspeed.attach or perseus.megatron.attach with the server's URL; "
            "docs/integration.md) and read the measured saving on the server's status page."));
  }
  return box;
}

Element figure(const std::string& chart, std::string_view caption) {
  return Element("figure").raw(chart).add(Element("figcaption").text(caption));
}

Element section(std::string_view id, std::string_view heading) {
  return Element("section").attr("id", id).add(Element("h2").text(heading));
}

std::string frontier_caption(const ReportData& d) {
  return "Every plan is scored the same way: iteration time is the critical path of the "
         "profiled durations, energy the profiled instruction energies plus blocking power "
         "while idle. Blue: the " +
         std::to_string(d.frontier.frontier.size()) +
         " plans of the Perseus frontier. Markers: all-max and the baselines. Curves: every "
         "power limit a Zeus variant explores; the ringed point is the one it chooses. Orange "
         "ring: the plan shown in the timeline below.";
}

std::string timeline_caption(const ReportData& d) {
  return "One iteration of " + d.frontier.highlight.name + " (" + d.schedule +
         "): each bar is "
         "a forward (F) or backward (B) of one microbatch, coloured by its average power; grey "
         "is time blocked on communication. Outlined in red and joined by the red line: the "
         "critical path. Hover a bar for its clock, times and energy. Iteration " +
         num(d.timeline.time_s, 4) + " s, " + grouped(d.timeline.energy_j, 1) + " J.";
}

std::string sweep_caption(const ReportData& d) {
  return cluster_text(d) +
         "; one pipeline straggles by the factor on the x-axis. Intrinsic: "
         "every pipeline runs the fastest frontier plan instead of all-max. Extrinsic: the "
         "other pipelines also slow down to the cheapest frontier plan that finishes with the "
         "straggler instead of blocking. Savings are fractions of the all-max cluster energy.";
}

}  // namespace

Charts render_charts(const ReportData& data) {
  return {frontier_chart(data.frontier), timeline_chart(data.timeline), sweep_chart(data.sweep),
          saving_chart(data.savings, data.frontier.all_max)};
}

std::string render_report(const ReportData& d, const Charts& charts) {
  Element main("main");
  Element header("header");
  header.add(Element("h1").text(d.title)).add(settings_list(d));
  if (auto errors = profile_error_list(d)) header.add(std::move(*errors));
  main.add(std::move(header));
  main.add(your_plan(d));
  main.add(section("saving", "What each slowdown saves")
               .add(figure(charts.saving, saving_caption(d)))
               .add(savings_table(d)));
  if (!d.measured.empty()) {
    main.add(section("measured", "Measured in the closed loop")
                 .add(measured_table(d))
                 .add(Element("p").text(
                     d.measured_simulated
                         ? "Mean iteration time and energy of each run's final schedule. Runs on "
                           "simulated GPUs (marked in the source column) show the simulated GPUs' "
                           "true energy, not a counter's reading; their clients' counters, with "
                           "the counter model's noise, measured what went to the server."
                         : "Mean iteration time and energy of each run's final schedule, as the "
                           "clients measured them (energy from the GPUs' counters).")));
  }
  main.add(section("frontier", "Time-energy frontier")
               .add(figure(charts.frontier, frontier_caption(d))));
  main.add(section("timeline", "Timeline of " + d.frontier.highlight.name)
               .add(figure(charts.timeline, timeline_caption(d))));
  main.add(section("sweep", "Straggler sweep: " + cluster_text(d))
               .add(figure(charts.sweep, sweep_caption(d))));
  main.add(section("numbers", "Numbers")
               .add(Element("h3").text("Plans (one pipeline, one iteration)"))
               .add(plans_table(d))
               .add(Element("h3").text("Straggler sweep (" + cluster_text(d) + ")"))
               .add(sweep_table(d)));
  main.add(Element("footer").text(
      "Generated by perseus report. Self-contained: inline SVG and CSS, no scripts, fonts or "
      "network resources. The charts are also written as separate SVG files."));
  Element head("head");
  head.add(Element("meta").attr("charset", "utf-8"))
      .add(Element("meta").attr("name", "viewport").attr("content", "width=device-width"))
      .add(Element("title").text(d.title))
      .add(Element("style").raw(kStyle));
  return "<!DOCTYPE html>\n" +
         Element("html").attr("lang", "en").add(head).add(Element("body").add(main)).str() + "\n";
}

std::string render_report(const ReportData& data) {
  return render_report(data, render_charts(data));
}

std::string svg_file(const std::string& chart) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + chart + "\n";
}

}  // namespace perseus::report
