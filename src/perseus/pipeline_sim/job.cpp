#include "perseus/pipeline_sim/job.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "perseus/pipeline_sim/processes.hpp"
#include "perseus/pipeline_sim/rank.hpp"
#include "perseus/pipeline_sim/rank_log.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::pipeline_sim {

std::string rank_label(int rank, const schedule::Schedule& sched) {
  const int gpus = sched.num_ranks();
  std::vector<std::string> stages;
  for (int s : sched.stages_of(rank % gpus)) stages.push_back(std::to_string(s));
  return "rank " + std::to_string(rank) + " (stage" + (stages.size() > 1 ? "s " : " ") +
         join(stages) + ", pipeline " + std::to_string(rank / gpus) + ")";
}

RunResult run_job(const SimulatedJob& job, const StopRule& stop, double timeout_s) {
  const auto label = [&](int rank) { return rank_label(rank, job.schedule); };
  std::vector<Channel> parent_ends;
  std::vector<RankLinks> links =
      make_links(job.schedule, job.pipelines, label, "the parent process", parent_ends);
  const int n = static_cast<int>(links.size());

  RankLog warnings;  // destroyed after `processes`: every child has exited by then
  RankProcesses processes;
  for (int r = 0; r < n; ++r) {
    processes.spawn([&, r] {
      warnings.redirect_child();
      // Keep only this rank's descriptors: peers must see end-of-stream when a rank dies.
      RankLinks mine = std::move(links[r]);
      links.clear();
      parent_ends.clear();
      RankSpec spec = rank_spec(r, job.schedule, job.pipelines, job.profile, job.blocking_power_w,
                                job.optimizer);
      spec.counter = job.counter;
      spec.trace_dir = job.trace_dir;
      spec.optimizer.log = [r](const std::string& message) {
        std::fprintf(stderr, "perseus: warning: rank %d: %s\n", r, message.c_str());
        std::fflush(stderr);
      };
      // A failure goes to the parent, which reports the rank that caused the others to fail.
      return run_rank_reporting(spec, mine).empty() ? 0 : 1;
    });
  }
  links.clear();  // the parent keeps only its own ends
  warnings.start();

  RunResult result;
  try {
    result = coordinate(parent_ends, stop, timeout_s);
  } catch (const RankFailure& f) {
    processes.kill_all();
    std::string message = label(f.rank()) + " failed: " + f.what();
    if (f.exited_silently()) {
      message += " (" + describe_status(processes.child(f.rank()).status) + ")";
    }
    throw Error(message);
  } catch (const Error&) {
    processes.kill_all();
    throw;
  }
  parent_ends.clear();
  if (!processes.wait_all(30.0)) {
    throw Error("rank processes did not exit within 30 s after the run ended; killed them");
  }
  warnings.finish();
  for (int r = 0; r < n; ++r) {
    const Child& c = processes.child(r);
    if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
      throw Error(label(r) + " failed after the run: " + describe_status(c.status));
    }
  }
  return result;
}

}  // namespace perseus::pipeline_sim
