// Export of a stored job to the reference optimizer's dump layout (the Zeus/Perseus server's
// dump directory): perseus.json (settings), ranks.json (every rank's RankInfo), and per round N
// N.sched.json (per rank: {"rank", "power_states": [MHz or W per instruction], "frequencies"})
// and N.prof.json (per rank: the ProfilingResult it reported), ranks in order.
#pragma once

#include <filesystem>

#include "perseus/server/store.hpp"

namespace perseus::server {

// Writes the dump into `dir` (created if needed). Returns the number of rounds written. Throws
// perseus::Error when a file cannot be written.
int export_job(const StoredJob& job, const std::filesystem::path& dir);

}  // namespace perseus::server
