// Schedules by name (the CLI's --schedule, plan files, the server's job info): one entry per
// generator with its name, what its stage count means and its default stages per rank.
#pragma once

#include <string>
#include <vector>

#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::schedule {

// Builds the named schedule for `num_stages` pipeline stages (virtual stages included) and
// `num_microbatches`. `stages_per_rank` 0 takes the schedule's default (1 for 1f1b, gpipe and
// envelope, 2 for the others); the ranks are num_stages / stages_per_rank. Names: 1f1b, gpipe,
// envelope:e0,...,eS-1, interleaved-1f1b, looped-bfs, interleaved-zero-bubble, zbv, dualpipev.
// Throws perseus::Error for unknown or malformed names, non-positive sizes, a stage count that is
// not a multiple of stages_per_rank, a stages_per_rank the schedule does not take, and a size
// beyond check_schedule_size's bounds (before anything is built). The plain
// name "envelope" needs a profile to compute its counts (baselines::envelope_schedule).
Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches,
                       int stages_per_rank = 0);
// make_schedule for `num_ranks` GPUs (the control plane's pp_degree): stages_per_rank (0: the
// schedule's default) stages on each, num_ranks * stages_per_rank stages in all.
Schedule make_schedule_on_ranks(const std::string& name, int num_ranks, int num_microbatches,
                                int stages_per_rank = 0);
// Names accepted by make_schedule and the CLI ("envelope" standing for "envelope:e0,...").
const std::vector<std::string>& schedule_names();

}  // namespace perseus::schedule
