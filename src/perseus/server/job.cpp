#include "perseus/server/job.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include "perseus/server/auth.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {

// Attempts of a store write the job's progress depends on (a new round, a release).
constexpr int kStoreAttempts = 3;
// The stored job info's field holding the digest of the job's secret.
constexpr const char* kSecretField = "secret_sha256";
namespace {

using nlohmann::json;

// Element-wise combination of equally indexed values of several ranks (shortest length wins).
std::vector<double> combine(const std::vector<const std::vector<double>*>& lists,
                            const std::function<double(double, double)>& op) {
  std::size_t n = lists.front()->size();
  for (const auto* list : lists) n = std::min(n, list->size());
  std::vector<double> out(lists.front()->begin(), lists.front()->begin() + static_cast<long>(n));
  for (std::size_t r = 1; r < lists.size(); ++r) {
    for (std::size_t i = 0; i < n; ++i) out[i] = op(out[i], (*lists[r])[i]);
  }
  return out;
}

using Breakdown = std::map<std::string, std::vector<std::vector<double>>>;

Breakdown combine_breakdowns(const std::vector<const Breakdown*>& parts,
                             const std::function<double(double, double)>& op) {
  Breakdown out;
  for (const auto& [name, first] : *parts.front()) {
    std::size_t iterations = first.size();
    for (const auto* part : parts) {
      auto it = part->find(name);
      iterations = it == part->end() ? 0 : std::min(iterations, it->second.size());
    }
    auto& rows = out[name];
    for (std::size_t i = 0; i < iterations; ++i) {
      std::vector<const std::vector<double>*> lists;
      for (const auto* part : parts) lists.push_back(&part->at(name)[i]);
      rows.push_back(combine(lists, op));
    }
  }
  return out;
}

// Standard errors of summed energies: the root of the summed squares, for the instructions every
// rank reported one for.
std::map<std::string, double> combine_stderr(
    const std::vector<const std::map<std::string, double>*>& parts) {
  std::map<std::string, double> out;
  for (const auto& [name, first] : *parts.front()) {
    double variance = 0.0;
    bool everywhere = true;
    for (const auto* part : parts) {
      auto it = part->find(name);
      everywhere = everywhere && it != part->end();
      if (it != part->end()) variance += it->second * it->second;
    }
    if (everywhere) out[name] = std::sqrt(variance);
  }
  return out;
}

double max_of(double a, double b) {
  return std::max(a, b);
}
double sum_of(double a, double b) {
  return a + b;
}

// The stored JobInfo carries the assigned id, which a registration body must not.
wire::JobInfo stored_info(const StoredJob& stored) {
  json body = stored.info;
  body["job_id"] = "";
  return wire::parse_job_info(body);
}

}  // namespace

Job::Job(Store& store, std::string job_id, wire::JobInfo info, JobDirs dirs, bool)
    : store_(store),
      id_(std::move(job_id)),
      info_(std::move(info)),
      dirs_(std::move(dirs)),
      ranks_(static_cast<std::size_t>(info_.world_size)),
      rank_bodies_(ranks_.size()),
      next_round_(ranks_.size(), 0) {
  info_.job_id = id_;
}

Job::Job(Store& store, std::string job_id, const wire::JobInfo& info, JobDirs dirs,
         std::string secret_sha256)
    : Job(store, std::move(job_id), info, std::move(dirs), true) {
  secret_sha256_ = std::move(secret_sha256);
  json stored = wire::to_json(info_);
  if (!secret_sha256_.empty()) stored[kSecretField] = secret_sha256_;
  store_.add_job(id_, stored);
}

// The first secret that matches the stored digest is kept in memory, so the thousands of
// requests of a round compare texts instead of hashing each one.
bool Job::secret_matches(const std::string& secret) const {
  if (secret_sha256_.empty()) return true;
  if (!known_secret_.empty()) return same_secret(secret, known_secret_);
  if (!same_secret(sha256_hex(secret), secret_sha256_)) return false;
  known_secret_ = secret;
  return true;
}

Job::Job(Store& store, const StoredJob& stored, JobDirs dirs)
    : Job(store, stored.job_id, stored_info(stored), std::move(dirs), true) {
  secret_sha256_ = stored.info.value(kSecretField, "");
  restore_history(stored);
}

std::unique_ptr<Job> Job::unusable(Store& store, const StoredJob& stored, std::string reason) {
  wire::JobInfo none;
  none.world_size = 0;
  std::unique_ptr<Job> job(new Job(store, stored.job_id, none, {}, true));
  job->error_ = std::move(reason);
  try {
    job->info_ = stored_info(stored);  // shown in its status; no per-rank state is built
    job->info_.job_id = stored.job_id;
  } catch (const std::exception&) {
  }
  return job;
}

std::string Job::rank_out_of_range(const std::string& field, int rank) const {
  return field + ": " + std::to_string(rank) + " is out of range for world_size " +
         std::to_string(info_.world_size);
}

std::string Job::rank_problem(const wire::RankInfo& rank) const {
  if (rank.rank >= info_.world_size) return rank_out_of_range("field 'rank'", rank.rank);
  if (rank.pp_rank >= info_.pp_degree || rank.dp_rank >= info_.dp_degree ||
      rank.tp_rank >= info_.tp_degree) {
    return "rank " + std::to_string(rank.rank) +
           ": pp_rank/dp_rank/tp_rank out of range for the job's degrees";
  }
  return "";
}

int Job::registered() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const auto& r) { return r.has_value(); }));
}

std::string Job::state() const {
  if (!error_.empty()) return "failed";
  if (!scheduler_) return "registering";
  bool finished = !rounds_.empty() && rounds_.back().done && released_.back();
  return finished ? "done" : "running";
}

Reply Job::register_rank(const wire::RankInfo& rank, const json& body) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!error_.empty()) return internal_error(error_);
  if (auto problem = rank_problem(rank); !problem.empty()) return bad_request(problem);
  auto& slot = ranks_[static_cast<std::size_t>(rank.rank)];
  if (slot) {
    if (rank_bodies_[static_cast<std::size_t>(rank.rank)] == body) return {200, nullptr};
    return conflict("rank " + std::to_string(rank.rank) + " of job " + id_ +
                    " is already registered with different information");
  }
  store_.add_rank(id_, rank.rank, body);
  slot = rank;
  rank_bodies_[static_cast<std::size_t>(rank.rank)] = body;
  if (registered() == info_.world_size && start_scheduler()) compute_round();
  return {200, nullptr};
}

JobSpec job_spec(const std::string& id, const wire::JobInfo& info, const JobDirs& dirs) {
  JobSpec spec;
  spec.job_id = id;
  spec.pp_degree = info.pp_degree;
  spec.dp_degree = info.dp_degree;
  spec.tp_degree = info.tp_degree;
  spec.args = info.scheduler_args.value_or(json::object());
  spec.output_dir = id.empty() ? dirs.output : dirs.output / id;
  spec.output_root = dirs.output;
  spec.data_dir = dirs.data;
  return spec;
}

// Builds the scheduler once every rank registered; false when that failed.
bool Job::start_scheduler() {
  JobSpec spec = job_spec(id_, info_, dirs_);
  std::set<int> common(ranks_[0]->available_frequencies.begin(),
                       ranks_[0]->available_frequencies.end());
  for (const auto& rank : ranks_) {
    std::set<int> mine(rank->available_frequencies.begin(), rank->available_frequencies.end());
    std::set<int> both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                          std::inserter(both, both.end()));
    common = std::move(both);
  }
  spec.available_frequencies.assign(common.rbegin(), common.rend());
  try {
    if (spec.available_frequencies.empty()) throw Error("the ranks have no SM clock in common");
    top_clock_ = spec.available_frequencies.front();
    scheduler_ = make_scheduler(info_.scheduler.value_or(""), spec);
  } catch (const std::exception& e) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + e.what());
    return false;
  }
  return true;
}

void Job::compute_round() {
  Round round;
  try {
    round = scheduler_->next();
    if (round.stages.size() != static_cast<std::size_t>(info_.pp_degree)) {
      throw Error("returned plans for " + std::to_string(round.stages.size()) +
                  " stages, the job has " + std::to_string(info_.pp_degree));
    }
  } catch (const std::exception& e) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + e.what());
    return;
  }
  int index = static_cast<int>(rounds_.size());
  if (!persist("storing round " + std::to_string(index),
               [&] { store_.add_round(id_, index, round_to_json(round)); })) {
    return;
  }
  rounds_.push_back(std::move(round));
  released_.push_back(false);
  results_.emplace_back(ranks_.size());
  results_in_round_.push_back(0);
  try_release(index);
}

void Job::try_release(int round) {
  auto asked = asked_.find(round);
  if (round >= static_cast<int>(rounds_.size()) || asked == asked_.end()) return;
  if (asked->second.count < info_.world_size) return;
  auto start = std::chrono::steady_clock::now();
  if (!persist("releasing round " + std::to_string(round),
               [&] { store_.mark_released(id_, round); })) {
    return;
  }
  released_[static_cast<std::size_t>(round)] = true;
  asked_.erase(asked);
  auto waiting = std::move(waiters_[round]);
  waiters_.erase(round);
  std::map<const StagePlan*, std::string> cache;  // ranks of a stage share one plan
  for (auto& [rank, respond] : waiting) respond({200, nullptr, schedule_text(rank, round, cache)});
  // Answers are handed to the kernel inside respond(): this is the server's share of the round.
  std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  release_ms_.push_back(took.count());
  log::info("job " + id_ + " round " + std::to_string(round) + " released to " +
            std::to_string(waiting.size()) + " waiting ranks in " + number(took.count()) + " ms");
}

std::string Job::schedule_text(int rank, int round,
                               std::map<const StagePlan*, std::string>& cache) const {
  const auto& info = *ranks_[static_cast<std::size_t>(rank)];
  const StagePlan* plan =
      &plan_for(rounds_[static_cast<std::size_t>(round)], info.dp_rank, info.pp_rank);
  auto it = cache.find(plan);
  if (it == cache.end()) {
    json body = wire::to_json(schedule_for(rank, round));
    body.erase("rank");
    it = cache.emplace(plan, body.dump().substr(1)).first;  // without the opening brace
  }
  return "{\"rank\":" + std::to_string(rank) + "," + it->second;
}

bool Job::persist(const std::string& what, const std::function<void()>& write) {
  for (int attempt = 1;; ++attempt) {
    try {
      write();
      return true;
    } catch (const StoreError& e) {
      if (attempt == kStoreAttempts) {
        fail("the store failed while " + what + ": " + e.what());
        return false;
      }
      log::warn("job " + id_ + ": " + e.what() + "; retrying");
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * attempt));
    }
  }
}

void Job::fail(const std::string& message) {
  log::error("job " + id_ + " failed: " + message);
  error_ = message;
  try {
    store_.set_error(id_, message);
  } catch (const StoreError& e) {  // the failure is served from memory until a restart
    log::error("job " + id_ + ": cannot store its failure: " + e.what());
  }
  auto waiting = std::move(waiters_);
  waiters_.clear();
  asked_.clear();
  for (auto& [round, list] : waiting) {
    for (auto& [rank, respond] : list) respond(internal_error(message));
  }
}

wire::FrequencySchedule Job::schedule_for(int rank, int round) const {
  const auto& info = *ranks_[static_cast<std::size_t>(rank)];
  const Round& r = rounds_[static_cast<std::size_t>(round)];
  const StagePlan& plan = plan_for(r, info.dp_rank, info.pp_rank);
  return {rank, plan.frequencies, round, r.done, plan.power_limit_w};
}

void Job::request_schedule(int rank, std::optional<int> round, Responder respond) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!error_.empty()) return respond(internal_error(error_));
  if (rank < 0 || rank >= info_.world_size) {
    return respond(bad_request(rank_out_of_range("query 'rank'", rank)));
  }
  if (!ranks_[static_cast<std::size_t>(rank)]) {
    return respond(
        conflict("rank " + std::to_string(rank) + " of job " + id_ + " has not registered"));
  }
  int r = round.value_or(next_round_[static_cast<std::size_t>(rank)]);
  int computed = static_cast<int>(rounds_.size());
  if (computed > 0 && rounds_.back().done && r >= computed) r = computed - 1;
  if (r < computed && released_[static_cast<std::size_t>(r)]) {
    std::map<const StagePlan*, std::string> cache;
    return respond({200, nullptr, schedule_text(rank, r, cache)});
  }
  if (r > computed) {
    return respond(conflict("round " + std::to_string(r) + " is not the next round for rank " +
                            std::to_string(rank) + " (next: " + std::to_string(computed) + ")"));
  }
  auto& barrier = asked_[r];
  barrier.asked.resize(ranks_.size(), 0);
  if (!barrier.asked[static_cast<std::size_t>(rank)]) {
    barrier.asked[static_cast<std::size_t>(rank)] = 1;
    ++barrier.count;
  }
  waiters_[r].emplace_back(rank, std::move(respond));
  try_release(r);
}

Reply Job::report_result(const wire::ProfilingResult& result, const json& body) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!error_.empty()) return internal_error(error_);
  if (result.rank >= info_.world_size) {
    return bad_request(rank_out_of_range("field 'rank'", result.rank));
  }
  auto rank = static_cast<std::size_t>(result.rank);
  int r = result.round.value_or(next_round_[rank]);
  if (already_acknowledged(result, r)) return {200, nullptr};
  if (r >= static_cast<int>(rounds_.size()) || !released_[static_cast<std::size_t>(r)]) {
    return conflict("round " + std::to_string(r) + " has not been served to rank " +
                    std::to_string(result.rank));
  }
  auto& slot = results_[static_cast<std::size_t>(r)][rank];
  if (slot) return {200, nullptr};  // a retry of an acknowledged report
  store_.add_result(id_, r, result.rank, body);
  slot = result;
  next_round_[rank] = std::max(next_round_[rank], r + 1);
  if (++results_in_round_[static_cast<std::size_t>(r)] == info_.world_size) finish_round(r);
  return {200, nullptr};
}

// Zeus clients send results without `round`, and keep reporting after the final round: a
// report past the final round, or one without `round` while this rank's next round is not
// served yet (the retry of its last report), is acknowledged and changes nothing.
bool Job::already_acknowledged(const wire::ProfilingResult& result, int r) const {
  const int computed = static_cast<int>(rounds_.size());
  if (computed > 0 && rounds_.back().done && r >= computed) return true;
  if (result.round || r == 0) return false;
  bool next_served = r < computed && released_[static_cast<std::size_t>(r)];
  return !next_served &&
         results_[static_cast<std::size_t>(r - 1)][static_cast<std::size_t>(result.rank)];
}

// Every rank reported round `round`: the scheduler observes it and plans the next one.
void Job::finish_round(int round) {
  if (rounds_[static_cast<std::size_t>(round)].done ||
      round + 1 != static_cast<int>(rounds_.size())) {
    return;
  }
  try {
    scheduler_->observe(aggregate(round));
  } catch (const std::exception& e) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + e.what());
    return;
  }
  compute_round();
}

std::vector<StageResult> Job::aggregate(int round) const {
  std::vector<StageResult> out(static_cast<std::size_t>(info_.pp_degree));
  for (int stage = 0; stage < info_.pp_degree; ++stage) {
    std::vector<const std::vector<double>*> times, energies;
    std::vector<const Breakdown*> time_parts, energy_parts;
    std::vector<const std::map<std::string, double>*> stderr_parts;
    for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
      if (ranks_[rank]->pp_rank != stage) continue;
      const auto& result = *results_[static_cast<std::size_t>(round)][rank];
      times.push_back(&result.iter_time);
      energies.push_back(&result.iter_energy);
      time_parts.push_back(&result.time_breakdown);
      energy_parts.push_back(&result.energy_breakdown);
      stderr_parts.push_back(&result.energy_stderr);
    }
    auto& agg = out[static_cast<std::size_t>(stage)];
    agg.iter_time = combine(times, max_of);
    agg.iter_energy = combine(energies, sum_of);
    agg.time_breakdown = combine_breakdowns(time_parts, max_of);
    agg.energy_breakdown = combine_breakdowns(energy_parts, sum_of);
    agg.energy_stderr = combine_stderr(stderr_parts);
  }
  return out;
}

Reply Job::report_straggler(const json& report) {
  if (!error_.empty()) return internal_error(error_);
  if (!scheduler_ || rounds_.empty()) {
    return conflict("job " + id_ + " has not started: not every rank has registered");
  }
  try {
    scheduler_->report_straggler(report);
  } catch (const std::exception& e) {
    return bad_request(e.what());
  }
  store_.add_straggler(id_, static_cast<int>(rounds_.size()) - 1, report);
  ++stragglers_reported_;
  return {200, nullptr};
}

// Replays the stored history: the same scheduler calls in the same order as the original
// process made, serving the stored rounds (not recomputed ones) to the ranks.
void Job::restore_history(const StoredJob& stored) {
  for (const auto& body : stored.ranks) {
    auto rank = wire::parse_rank_info(body);
    if (auto problem = rank_problem(rank); !problem.empty()) throw Error("stored " + problem);
    ranks_[static_cast<std::size_t>(rank.rank)] = rank;
    rank_bodies_[static_cast<std::size_t>(rank.rank)] = body;
  }
  error_ = stored.error;
  if (!error_.empty() || registered() < info_.world_size || !start_scheduler()) return;
  for (std::size_t r = 0; r < stored.rounds.size() && error_.empty(); ++r) {
    if (!replay_round(stored, r)) return;
  }
  if (rounds_.empty()) compute_round();
}

// Replays round r; false when the scheduler failed.
bool Job::replay_round(const StoredJob& stored, std::size_t r) {
  try {
    scheduler_->next();
    for (const auto& [round, report] : stored.stragglers) {
      if (round != static_cast<int>(r)) continue;
      scheduler_->report_straggler(report);
      ++stragglers_reported_;
    }
  } catch (const std::exception& e) {
    fail("replaying round " + std::to_string(r) + ": " + e.what());
    return false;
  }
  rounds_.push_back(round_from_json(stored.rounds[r]));
  released_.push_back(stored.released[r]);
  results_.emplace_back(ranks_.size());
  results_in_round_.push_back(0);
  if (r >= stored.results.size()) return true;
  for (const auto& body : stored.results[r]) {
    auto result = wire::parse_profiling_result(body);
    if (result.rank >= info_.world_size) {
      throw Error("stored result of round " + std::to_string(r) + ": " +
                  rank_out_of_range("field 'rank'", result.rank));
    }
    results_[r][static_cast<std::size_t>(result.rank)] = result;
    auto& next = next_round_[static_cast<std::size_t>(result.rank)];
    next = std::max(next, static_cast<int>(r) + 1);
    ++results_in_round_[r];
  }
  bool complete = results_in_round_[r] == info_.world_size && !rounds_[r].done;
  if (!complete) return true;
  if (r + 1 == stored.rounds.size()) {
    finish_round(static_cast<int>(r));  // it crashed before planning the next round
    return error_.empty();
  }
  try {
    scheduler_->observe(aggregate(static_cast<int>(r)));
  } catch (const std::exception& e) {
    fail("replaying round " + std::to_string(r) + ": " + e.what());
    return false;
  }
  return true;
}

}  // namespace perseus::server
