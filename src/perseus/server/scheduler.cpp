#include "perseus/server/scheduler.hpp"

#include "perseus/util/error.hpp"

namespace perseus::server {

void Scheduler::report_straggler(const nlohmann::json& /*report*/) {
  throw Error("this job's scheduler does not take straggler reports");
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names;  // filled in as schedulers land
  return names;
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, const JobSpec& /*job*/) {
  throw Error("unknown scheduler '" + name + "'");
}

}  // namespace perseus::server
