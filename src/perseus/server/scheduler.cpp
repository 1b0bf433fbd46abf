#include "perseus/server/scheduler.hpp"

#include <utility>

#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/gpu_limits.hpp"

namespace perseus::server {

namespace {

using Factory = std::unique_ptr<Scheduler> (*)(const JobSpec&);

// Canonical names first (the order scheduler_names() lists), then the Zeus class-name aliases.
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> entries = {
      {"point-solution", schedulers::make_point_solution},
      {"profiler", schedulers::make_profiler},
      {"frontier", schedulers::make_frontier},
      {"all-max", schedulers::make_all_max},
      {"zeus-global", schedulers::make_zeus_global},
      {"zeus-per-stage", schedulers::make_zeus_per_stage},
      {"PointSolution", schedulers::make_point_solution},
      {"PointSolution3D", schedulers::make_point_solution},
      {"InstructionProfiler", schedulers::make_profiler},
      {"AllMaxFrequency", schedulers::make_all_max},
  };
  return entries;
}

constexpr std::size_t kCanonical = 6;

}  // namespace

void Scheduler::report_straggler(const nlohmann::json& /*report*/) {
  throw Error("this job's scheduler does not take straggler reports");
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < kCanonical; ++i) out.push_back(registry()[i].first);
    return out;
  }();
  return names;
}

std::string scheduler_choices() {
  std::string list, aliases;
  for (std::size_t i = 0; i < registry().size(); ++i) {
    std::string& to = i < kCanonical ? list : aliases;
    to += (to.empty() ? "" : ", ") + registry()[i].first;
  }
  return "expected one of " + list + "; Zeus aliases " + aliases;
}

bool known_scheduler(const std::string& name) {
  for (const auto& entry : registry()) {
    if (entry.first == name) return true;
  }
  return false;
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, const JobSpec& job) {
  for (const auto& [known, factory] : registry()) {
    if (known == name) return factory(job);
  }
  throw Error("unknown scheduler '" + name + "' (" + scheduler_choices() + ")");
}

void check_scheduler(const std::string& name, JobSpec job, bool stages_known) {
  job.available_frequencies.clear();
  for (int mhz = kMaxClockMhz; mhz >= kMinClockMhz; --mhz) job.available_frequencies.push_back(mhz);
  try {
    make_scheduler(name, job);
  } catch (const StageCountMismatch&) {
    if (stages_known) throw;
  }
}

}  // namespace perseus::server
