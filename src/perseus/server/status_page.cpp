#include "perseus/server/status_page.hpp"

#include <sstream>

#include "perseus/server/job.hpp"
#include "perseus/util/text.hpp"

namespace perseus::server {
namespace {

// "time s / energy J" of the last complete round, summed over stages for energy.
std::string last_results(const nlohmann::json& job) {
  if (!job.contains("last_results")) return "&ndash;";
  double time = 0.0, energy = 0.0;
  for (const auto& stage : job["last_results"]["stages"]) {
    time = std::max(time, stage["mean_time_s"].get<double>());
    energy += stage["mean_energy_j"].get<double>();
  }
  return "round " + job["last_results"]["round"].dump() + ": " + fixed(time, 4) + " s, " +
         fixed(energy, 1) + " J";
}

// The ranks whose energy counter did not change in the latest complete round, if any: the last
// results shown are an earlier round's.
std::string unmeasured(const nlohmann::json& job) {
  const auto it = job.find("unmeasured_ranks");
  if (it == job.end() || it->empty()) return "";
  std::string ranks;
  for (const auto& rank : *it) ranks += (ranks.empty() ? "" : ", ") + rank.dump();
  return " <span class=\"stale\">(the latest round's energy was not measured by rank" +
         std::string(it->size() > 1 ? "s " : " ") + ranks + ")</span>";
}

// The ranks on simulated GPUs, if any: their energies are a simulator's, not a real counter's.
std::string simulated(const nlohmann::json& job) {
  const int n = job.value("simulated_ranks", 0);
  if (n == 0) return "";
  const bool all = n == job["ranks_registered"].get<int>();
  return all ? " (simulated GPUs)" : " (" + std::to_string(n) + " on simulated GPUs)";
}

// The job's saving (saving_text), else a dash.
std::string saving(const nlohmann::json& job) {
  const std::string text = saving_text(job);
  return text.empty() ? "&ndash;" : text;
}

constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Sans", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.8em; text-align: left; }
th { background: #f3f3f3; }
.failed { color: #b00020; } .done { color: #1b5e20; } .running { color: #0d47a1; }
.stale { color: #8a6d00; font-weight: bold; }
code { font-size: 0.9em; }
)css";

}  // namespace

std::string render_status_page(const std::vector<nlohmann::json>& jobs, double uptime_s,
                               const std::string& query) {
  const std::string q = escape(query);
  std::ostringstream html;
  html << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
       << "<meta http-equiv=\"refresh\" content=\"5\"><link rel=\"icon\" href=\"data:,\">"
       << "<title>Perseus control plane</title>"
       << "<style>" << kStyle << "</style></head><body>"
       << "<h1>Perseus control plane</h1><p>" << jobs.size() << " job(s), up " << fixed(uptime_s, 0)
       << " s. JSON: <a href=\"/jobs" << q << "\">/jobs</a>, "
       << "<a href=\"/healthz\">/healthz</a>, <a href=\"/metrics" << q << "\">/metrics</a>.</p>";
  if (jobs.empty()) {
    html << "<p>No jobs yet.</p>";
  } else {
    html << "<table><thead><tr><th>job</th><th>state</th><th>scheduler</th><th>ranks</th>"
         << "<th>round</th><th>last results</th><th>energy saving</th></tr></thead><tbody>";
    for (const auto& job : jobs) {
      std::string id = job["job_id"].get<std::string>();
      std::string state = job["state"].get<std::string>();
      html << "<tr><td><a href=\"/jobs/" << escape(id) << q << "\"><code>" << escape(id)
           << "</code></a></td><td class=\"" << state << "\">" << state;
      if (job.contains("error")) html << ": " << escape(job["error"].get<std::string>());
      if (job.value("stale", false)) {
        html << " <span class=\"stale\">stale: no request for " << fixed(job["idle_s"], 0)
             << " s</span>";
      }
      html << "</td><td>" << escape(job["scheduler"].get<std::string>()) << "</td><td>"
           << job["ranks_registered"].dump() << " / " << job["world_size"].dump() << simulated(job)
           << "</td><td>" << job["round"].dump() << "</td><td>" << last_results(job)
           << unmeasured(job) << "</td><td>" << saving(job) << "</td></tr>";
    }
    html << "</tbody></table>";
  }
  html << "</body></html>\n";
  return html.str();
}

}  // namespace perseus::server
