// Reopening a job from the store after a restart: the registered ranks, the rounds served, the
// results reported and the stragglers are replayed through a fresh scheduler in their original
// order, so the job continues where the previous process left it.
#include <algorithm>

#include "perseus/server/job.hpp"
#include "perseus/util/error.hpp"

namespace perseus::server {

namespace {

using nlohmann::json;

// The stored JobInfo carries the assigned id, which a registration body must not.
wire::JobInfo stored_info(const StoredJob& stored) {
  json body = stored.info;
  body["job_id"] = "";
  return wire::parse_job_info(body);
}

}  // namespace

Job::Job(Store& store, const StoredJob& stored, JobSettings settings)
    : Job(store, stored.job_id, stored_info(stored), std::move(settings), true) {
  secret_sha256_ = stored.info.value(kSecretField, "");
  instructions_ = stored_instructions(stored.info);
  restore_history(stored);
  active_since(stored.active_at);
}

// A job stored before its instructions were kept: none (its ranks alone count).
std::size_t Job::stored_instructions(const json& stored_info) {
  auto it = stored_info.find(kInstructionsField);
  return it != stored_info.end() && it->is_number_unsigned() ? it->get<std::size_t>() : 0;
}

std::uint64_t Job::stored_memory_bytes(const json& stored_info) {
  return job_memory_bytes(stored_info.at("world_size").get<long>(),
                          stored_instructions(stored_info));
}

// Idle since the store last saw the job active (a restart does not renew a job); unknown: now.
void Job::active_since(double unix_seconds) {
  const double since =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
      unix_seconds;
  if (unix_seconds > 0 && since > 0) {
    last_activity_ -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(since));
  }
}

std::unique_ptr<Job> Job::unusable(Store& store, const StoredJob& stored, std::string reason) {
  wire::JobInfo none;
  none.world_size = 0;
  std::unique_ptr<Job> job(new Job(store, stored.job_id, none, {}, true));
  job->error_ = std::move(reason);
  job->active_since(stored.active_at);
  try {
    job->info_ = stored_info(stored);  // shown in its status; no per-rank state is built
    job->info_.job_id = stored.job_id;
  } catch (const std::exception&) {
  }
  return job;
}

// Replays the stored history: the same scheduler calls in the same order as the original
// process made, serving the stored rounds (not recomputed ones) to the ranks.
void Job::restore_history(const StoredJob& stored) {
  for (const auto& body : stored.ranks) {
    auto rank = wire::parse_rank_info(body);
    if (auto problem = rank_problem(rank); !problem.empty()) throw Error("stored " + problem);
    set_rank(rank, body);
  }
  error_ = stored.error;
  first_held_ = stored.first_round;
  if (!stored.measurements.is_null()) measured_ = JobMeasurements::from_json(stored.measurements);
  if (!error_.empty() || registered() < info_.world_size || !start_scheduler()) return;
  // The rounds the store no longer holds (a history-free scheduler's): their straggler reports.
  for (const auto& [round, report] : stored.stragglers) {
    if (round >= stored.first_round) break;
    try {
      scheduler_->report_straggler(report);
    } catch (const std::exception& e) {
      return fail("replaying round " + std::to_string(round) + ": " + reason_of(e));
    }
    ++stragglers_reported_;
  }
  for (std::size_t i = 0; i < stored.rounds.size() && error_.empty(); ++i) {
    if (!replay_round(stored, i)) return;
  }
  if (held_.empty()) compute_round();
}

// Replays the stored round at `index` (round stored.first_round + index); false when the
// scheduler failed.
bool Job::replay_round(const StoredJob& stored, std::size_t index) {
  const int r = stored.first_round + static_cast<int>(index);
  try {
    scheduler_->next();
    for (const auto& [round, report] : stored.stragglers) {
      if (round != r) continue;
      scheduler_->report_straggler(report);
      ++stragglers_reported_;
    }
  } catch (const std::exception& e) {
    fail("replaying round " + std::to_string(r) + ": " + reason_of(e));
    return false;
  }
  hold(round_from_json(stored.rounds[index]), stored.released[index]);
  HeldRound& round = held_.back();
  if (index >= stored.results.size()) return true;
  for (const auto& body : stored.results[index]) {
    auto result = wire::parse_profiling_result(body);
    if (result.rank >= info_.world_size) {
      throw Error("stored result of round " + std::to_string(r) + ": " +
                  rank_out_of_range("field 'rank'", result.rank));
    }
    round.results[static_cast<std::size_t>(result.rank)] = result;
    auto& next = next_round_[static_cast<std::size_t>(result.rank)];
    next = std::max(next, r + 1);
    ++round.results_in;
  }
  if (round.results_in < info_.world_size) return true;
  record_measurement(r, round.plans, round.results);
  if (round.plans.done) return true;
  if (index + 1 == stored.rounds.size()) {
    finish_round(r);  // it crashed before planning the next round
    return error_.empty();
  }
  try {
    scheduler_->observe(aggregate(round.results));
  } catch (const std::exception& e) {
    fail("replaying round " + std::to_string(r) + ": " + reason_of(e));
    return false;
  }
  return true;
}

}  // namespace perseus::server
