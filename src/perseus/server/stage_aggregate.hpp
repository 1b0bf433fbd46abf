// Folding the reports of one pipeline stage's ranks (its data- and tensor-parallel copies) into
// the one result the scheduler observes for that stage: time is the slowest rank's, energy the
// sum over ranks, standard errors combine as the root of summed squares, clock readings pool
// (only instructions every rank reported an error or a clock for keep one), and the ranks whose
// energy counter did not change are listed. Lists of unequal length (a rank that ran fewer
// iterations) are cut to the shortest. O(total values).
#pragma once

#include <vector>

#include "perseus/server/scheduler.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::server {

// `ranks` holds at least one report.
StageResult aggregate_stage(const std::vector<const wire::ProfilingResult*>& ranks);

}  // namespace perseus::server
