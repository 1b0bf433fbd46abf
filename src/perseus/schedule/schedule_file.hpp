// Schedules given as data (architecture section 10): per-rank action lists in PyTorch's notation
// ("0F0", "3I1", "2W0"; stage, kind F/B/I/W, microbatch), read from
//   - CSV, as a torch.distributed.pipelining schedule writes it (_dump_csv): one row per rank, one
//     action per cell, empty cells idle;
//   - JSON: an array of per-rank arrays, or an object {"0": [...], "1": [...]} keyed by rank (the
//     values of ../shared/data/torch_schedules/pipeline_orders.json); null is idle.
// Bookkeeping actions (UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B, RECV_B) are skipped;
// torch's overlapped pair "(0F3;3B1)OVERLAP_F_B" is one item (schedule.hpp: one instruction
// under one clock). The stage-to-rank map,
// the stage count and the microbatch count follow from the actions; the result is checked as the
// DAG checks it (every action once, in dependency order, no deadlock). Every error is one line
// naming the source and the rank and item.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perseus/schedule/schedule.hpp"

namespace perseus::schedule {

// The schedule named `name` whose ranks run these items (action texts as above, "" idle).
Schedule schedule_from_actions(const std::string& name,
                               const std::vector<std::vector<std::string>>& ranks,
                               const std::string& source);
// The schedule of a JSON document already parsed (an array of per-rank arrays, or an object keyed
// by rank), e.g. the pipeline_order a job registers with (docs/protocol.md).
Schedule schedule_from_json(const std::string& name, const nlohmann::json& ranks,
                            const std::string& source);
// Parses CSV or JSON text (JSON when it starts with '[' or '{').
Schedule parse_schedule_text(const std::string& text, const std::string& source);
// Reads a schedule file; the schedule's name is the file name.
Schedule read_schedule_file(const std::string& path);
// The schedule as the CSV read_schedule_file reads (one row per rank, no idle cells).
std::string schedule_to_csv(const Schedule& schedule);
// Per rank, every action's text (what meta.json stores).
std::vector<std::vector<std::string>> action_texts(const Schedule& schedule);

}  // namespace perseus::schedule
