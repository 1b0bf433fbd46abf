#include "perseus/server/scheduler.hpp"

#include <utility>

#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/gpu_limits.hpp"
#include "perseus/util/text.hpp"

namespace perseus::server {

namespace {

using Factory = std::unique_ptr<Scheduler> (*)(const JobSpec&);

struct Entry {
  std::string name;
  Factory make;
  bool instruction_order;  // takes schedulers::kScheduleArgs
};

// Perseus's schedulers, in the order scheduler_names() lists them.
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"point-solution", schedulers::make_point_solution, true},
      {"profiler", schedulers::make_profiler, true},
      {"frontier", schedulers::make_frontier, false},  // the frontier holds it
      {"all-max", schedulers::make_all_max, true},
      {"zeus-global", schedulers::make_zeus_global, true},
      {"zeus-per-stage", schedulers::make_zeus_per_stage, true},
  };
  return entries;
}

struct Alias {
  std::string zeus_name, name;
};

// Zeus's class names (ZEUS_PFO_SCHEDULER), each for the scheduler of registry() it stands for.
const std::vector<Alias>& zeus_aliases() {
  static const std::vector<Alias> aliases = {
      {"PointSolution", "point-solution"}, {"PointSolution3D", "point-solution"},
      {"InstructionProfiler", "profiler"}, {"InstructionProfiler3D", "profiler"},
      {"AllMaxFrequency", "all-max"},
  };
  return aliases;
}

const Entry* entry_of(const std::string& name) {
  for (const Entry& entry : registry()) {
    if (entry.name == name) return &entry;
  }
  for (const Alias& alias : zeus_aliases()) {
    if (alias.zeus_name == name) return entry_of(alias.name);
  }
  return nullptr;
}

}  // namespace

void Scheduler::report_straggler(const nlohmann::json& /*report*/) {
  throw Error("this job's scheduler does not take straggler reports");
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& entry : registry()) out.push_back(entry.name);
    return out;
  }();
  return names;
}

std::string scheduler_choices() {
  std::vector<std::string> aliases;
  for (const Alias& alias : zeus_aliases()) aliases.push_back(alias.zeus_name);
  return "expected one of " + join(scheduler_names(), ", ") + "; Zeus aliases " +
         join(aliases, ", ");
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
