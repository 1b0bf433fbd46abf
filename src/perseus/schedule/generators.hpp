// Generators of the multi-stage pipeline schedules PyTorch's torch.distributed.pipelining runs
// (architecture section 10), producing the same per-rank order of compute actions as torch 2.11
// (checked against ../shared/data/torch_schedules/pipeline_orders.json). R ranks, V stages per
// rank, M microbatches. Looped schedules put stage s on rank s mod R; V-shaped ones (ZBV,
// DualPipeV) put stages r and 2R-1-r on rank r. Each throws perseus::Error for sizes torch refuses
// (non-positive sizes, and the combinations named per function).
#pragma once

#include "perseus/schedule/schedule.hpp"

namespace perseus::schedule {

// Interleaved 1F1B (Megatron-LM's virtual pipeline, torch's ScheduleInterleaved1F1B).
Schedule make_interleaved_1f1b(int num_ranks, int stages_per_rank, int num_microbatches);
// Looped BFS (breadth-first: every microbatch through a local stage before the next stage).
Schedule make_looped_bfs(int num_ranks, int stages_per_rank, int num_microbatches);
// Interleaved zero bubble (backward split into input and weight parts,
// torch's ScheduleInterleavedZeroBubble).
Schedule make_interleaved_zero_bubble(int num_ranks, int stages_per_rank, int num_microbatches);
// ZBV zero bubble: V-shaped, two stages per rank (torch's ScheduleZBVZeroBubble).
Schedule make_zbv(int num_ranks, int num_microbatches);
// DualPipeV: V-shaped, two stages per rank, M >= 2R (torch's ScheduleDualPipeV), with torch's
// overlapped forward/backward pairs (one instruction each, schedule.hpp) where torch has them.
Schedule make_dualpipev(int num_ranks, int num_microbatches);

}  // namespace perseus::schedule
