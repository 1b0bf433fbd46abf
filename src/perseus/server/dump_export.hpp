// Export of a stored job to the reference optimizer's dump layout (the Zeus/Perseus server's
// dump directory): perseus.json (settings), ranks.json (every rank's RankInfo), and per round N
// N.sched.json (per rank: {"rank", "power_states": [MHz or W per instruction], "frequencies"})
// and N.prof.json (per rank: the ProfilingResult it reported), ranks in order; and, beside
// Zeus's layout, summary.json: the job as GET /jobs/{id} shows it (JobSummary::stored), with what
// it measured and saved as the store last held it.
#pragma once

#include <filesystem>

#include "perseus/server/store.hpp"

namespace perseus::server {

struct ExportedJob {
  int rounds = 0;          // rounds written
  nlohmann::json summary;  // what summary.json holds
};

// Writes the dump into `dir` (created if needed). Throws perseus::Error when a file cannot be
// written.
ExportedJob export_job(const StoredJob& job, const std::filesystem::path& dir);

}  // namespace perseus::server
