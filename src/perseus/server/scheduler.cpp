#include "perseus/server/scheduler.hpp"

#include <utility>

#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/gpu_limits.hpp"

namespace perseus::server {

namespace {

using Factory = std::unique_ptr<Scheduler> (*)(const JobSpec&);

struct Entry {
  std::string name;
  Factory make;
  bool instruction_order;  // takes schedulers::kScheduleArgs
};

// Canonical names first (the order scheduler_names() lists), then the Zeus class-name aliases.
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"point-solution", schedulers::make_point_solution, true},
      {"profiler", schedulers::make_profiler, true},
      {"frontier", schedulers::make_frontier, false},  // the frontier holds it
      {"all-max", schedulers::make_all_max, true},
      {"zeus-global", schedulers::make_zeus_global, true},
      {"zeus-per-stage", schedulers::make_zeus_per_stage, true},
      {"PointSolution", schedulers::make_point_solution, true},
      {"PointSolution3D", schedulers::make_point_solution, true},
      {"InstructionProfiler", schedulers::make_profiler, true},
      {"InstructionProfiler3D", schedulers::make_profiler, true},
      {"AllMaxFrequency", schedulers::make_all_max, true},
  };
  return entries;
}

const Entry* entry_of(const std::string& name) {
  for (const Entry& entry : registry()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

constexpr std::size_t kCanonical = 6;

}  // namespace

void Scheduler::report_straggler(const nlohmann::json& /*report*/) {
  throw Error("this job's scheduler does not take straggler reports");
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < kCanonical; ++i) out.push_back(registry()[i].name);
    return out;
  }();
  return names;
}

std::string scheduler_choices() {
  std::string list, aliases;
  for (std::size_t i = 0; i < registry().size(); ++i) {
    std::string& to = i < kCanonical ? list : aliases;
    to += (to.empty() ? "" : ", ") + registry()[i].name;
  }
  return "expected one of " + list + "; Zeus aliases " + aliases;
}

bool known_scheduler(const std::string& name) {
  return entry_of(name) != nullptr;
}

bool takes_instruction_order(const std::string& name) {
  const Entry* entry = entry_of(name);
  return entry != nullptr && entry->instruction_order;
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, const JobSpec& job) {
  if (const Entry* entry = entry_of(name)) return entry->make(job);
  throw Error("unknown scheduler '" + name + "' (" + scheduler_choices() + ")");
}

std::unique_ptr<Scheduler> check_scheduler(const std::string& name, JobSpec job,
                                           bool stages_known) {
  job.available_frequencies.clear();
  for (int mhz = kMaxClockMhz; mhz >= kMinClockMhz; --mhz) job.available_frequencies.push_back(mhz);
  try {
    return make_scheduler(name, job);
  } catch (const DependsOnJob&) {
    if (stages_known) throw;
    return nullptr;
  }
}

}  // namespace perseus::server
