#include "perseus/server/job.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

#include "perseus/schedule/schedule_file.hpp"
#include "perseus/server/auth.hpp"
#include "perseus/server/stage_aggregate.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {

// How often a failed store write the job's progress waits for is tried again.
constexpr std::chrono::seconds kStoreRetryPeriod{1};

using nlohmann::json;

Job::Job(Store& store, std::string job_id, wire::JobInfo info, JobSettings settings, bool)
    : store_(store),
      id_(std::move(job_id)),
      info_(std::move(info)),
      settings_(std::move(settings)),
      ranks_(static_cast<std::size_t>(info_.world_size)),
      rank_bodies_(ranks_.size()),
      next_round_(ranks_.size(), 0) {
  info_.job_id = id_;
}

Job::Job(Store& store, std::string job_id, const wire::JobInfo& info, JobSettings settings,
         std::string secret_sha256, std::size_t instructions)
    : Job(store, std::move(job_id), info, std::move(settings), true) {
  secret_sha256_ = std::move(secret_sha256);
  instructions_ = instructions;
  json stored = wire::to_json(info_);
  if (!secret_sha256_.empty()) stored[kSecretField] = secret_sha256_;
  stored[kInstructionsField] = instructions_;
  store_.add_job(id_, stored);
}

std::uint64_t job_memory_bytes(long world_size, std::size_t instructions) {
  return static_cast<std::uint64_t>(std::max(0L, world_size)) * kJobBytesPerRank +
         static_cast<std::uint64_t>(instructions) * kJobBytesPerInstruction;
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

void Job::set_rank(const wire::RankInfo& rank, const json& body) {
  auto& slot = ranks_[static_cast<std::size_t>(rank.rank)];
  if (!slot) ++registered_;
  simulated_ += (rank.simulated_gpu ? 1 : 0) - (slot && slot->simulated_gpu ? 1 : 0);
  slot = rank;
  rank_bodies_[static_cast<std::size_t>(rank.rank)] = body;
}

std::string job_state(bool failed, bool started, bool final_round_released) {
  if (failed) return "failed";
  if (!started) return "registering";
  return final_round_released ? "done" : "running";
}

std::string Job::state() const {
  return job_state(!error_.empty(), scheduler_ != nullptr,
                   !held_.empty() && held_.back().plans.done && held_.back().released);
}

Job::HeldRound* Job::held(int round) {
  if (round < first_held_ || round >= computed()) return nullptr;
  return &held_[static_cast<std::size_t>(round - first_held_)];
}

const Job::HeldRound* Job::held(int round) const {
  return const_cast<Job*>(this)->held(round);
}

void Job::hold(Round plans, bool released) {
  held_.push_back({std::move(plans), released, {}, 0});
  held_.back().results.resize(ranks_.size());
  while (held_.size() > kHeldRounds) {
    held_.pop_front();
    ++first_held_;
  }
}

bool Job::finished() const {
  const std::string s = state();
  return s == "done" || s == "failed";
}

Reply Job::register_rank(const wire::RankInfo& rank, const json& body) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!error_.empty()) return job_failed(error_);
  if (auto problem = rank_problem(rank); !problem.empty()) return bad_request(problem);
  auto& slot = ranks_[static_cast<std::size_t>(rank.rank)];
  if (slot) {
    if (rank_bodies_[static_cast<std::size_t>(rank.rank)] == body) return {200, nullptr};
    return conflict("rank " + std::to_string(rank.rank) + " of job " + id_ +
                    " is already registered with different information");
  }
  store_.add_rank(id_, rank.rank, body);
  set_rank(rank, body);
  return {200, nullptr};
}

namespace {

std::optional<schedule::Schedule> job_pipeline_order(const wire::JobInfo& info) {
  if (!info.pipeline_order) return std::nullopt;
  const std::string source = "field 'pipeline_order'";
  auto order = schedule::schedule_from_json("pipeline_order", *info.pipeline_order, source);
  if (order.num_ranks() != info.pp_degree) {
    throw Error(source + ": has " + std::to_string(order.num_ranks()) +
                " ranks but the job has pp_degree " + std::to_string(info.pp_degree));
  }
  return order;
}

}  // namespace

JobSpec job_spec(const std::string& id, const wire::JobInfo& info, const JobSettings& settings) {
  JobSpec spec;
  spec.job_id = id;
  spec.pp_degree = info.pp_degree;
  spec.dp_degree = info.dp_degree;
  spec.tp_degree = info.tp_degree;
  for (int rank = 0; rank < info.world_size; ++rank) {
    spec.stage_of_rank.push_back(rank / std::max(1, info.dp_degree * info.tp_degree));
  }
  spec.args = info.scheduler_args.value_or(json::object());
  spec.pipeline_order = job_pipeline_order(info);
  spec.num_microbatches = info.num_microbatches;
  spec.output_dir = id.empty() ? settings.output : settings.output / id;
  spec.output_root = settings.output;
  spec.data_dir = settings.data;
  return spec;
}

bool Job::ready_to_start() const {
  return error_.empty() && !scheduler_ && !starting_ && registered() == info_.world_size;
}

std::pair<std::string, JobSpec> Job::start_spec() {
  JobSpec spec = job_spec(id_, info_, settings_);
  std::set<int> common(ranks_[0]->available_frequencies.begin(),
                       ranks_[0]->available_frequencies.end());
  for (const auto& rank : ranks_) {
    spec.stage_of_rank[static_cast<std::size_t>(rank->rank)] = rank->pp_rank;
    std::set<int> mine(rank->available_frequencies.begin(), rank->available_frequencies.end());
    std::set<int> both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                          std::inserter(both, both.end()));
    common = std::move(both);
  }
  spec.available_frequencies.assign(common.rbegin(), common.rend());
  if (spec.available_frequencies.empty()) throw Error("the ranks have no SM clock in common");
  top_clock_ = spec.available_frequencies.front();
  starting_ = true;
  return {info_.scheduler.value_or(""), std::move(spec)};
}

void Job::start(std::unique_ptr<Scheduler> scheduler, std::optional<MadeRound> first,
                const std::string& error) {
  if (install(std::move(scheduler), error)) compute_round(std::move(first));
}

bool Job::install(std::unique_ptr<Scheduler> scheduler, const std::string& error) {
  starting_ = false;
  if (!error_.empty()) return false;
  if (!scheduler) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + error);
    return false;
  }
  scheduler_ = std::move(scheduler);
  return true;
}

bool Job::start_scheduler() {
  std::unique_ptr<Scheduler> scheduler;
  std::string error;
  try {
    auto [name, spec] = start_spec();
    scheduler = make_scheduler(name, spec);
  } catch (const std::exception& e) {
    error = reason_of(e);
  }
  return install(std::move(scheduler), error);
}

void Job::compute_round(std::optional<MadeRound> made) {
  try {
    if (!made) made = made_round(scheduler_->next());
    const Round& round = made->plans;
    if (round.stages.size() != static_cast<std::size_t>(info_.pp_degree)) {
      throw Error("returned plans for " + std::to_string(round.stages.size()) +
                  " stages, the job has " + std::to_string(info_.pp_degree));
    }
  } catch (const std::exception& e) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + reason_of(e));
    return;
  }
  unstored_ = std::move(made);
  store_next_round();
}

void Job::store_next_round() {
  const int index = computed();
  if (!persist("storing round " + std::to_string(index),
               [&] { store_.add_round(id_, index, unstored_->text); })) {
    return;
  }
  hold(std::move(unstored_->plans), false);
  unstored_.reset();
  if (scheduler_->history_free()) compact_store();
  try_release(index);
}

void Job::retry_store() {
  if (!error_.empty()) return;
  if (unstored_) return store_next_round();  // (persist keeps the back-off)
  if (!store_failing_since_) return;
  std::vector<int> complete;  // barriers every rank reached, not released: the release failed
  for (const auto& [round, barrier] : asked_) {
    if (barrier.count == info_.world_size) complete.push_back(round);
  }
  for (int round : complete) try_release(round);
}

void Job::store_measurements() {
  try {
    store_.set_measurements(id_, measured_.to_json());
  } catch (const StoreError& e) {  // shown live all the same; the next round stores them again
    log::warn("job " + id_ + ": cannot store its measurements: " + std::string(e.what()));
  }
}

void Job::compact_store() {
  if (first_held_ == 0) return;
  try {
    store_.compact(id_, first_held_, measured_.to_json());
  } catch (const StoreError& e) {  // the rows stay; the next round tries again
    log::warn("job " + id_ + ": cannot drop rounds before " + std::to_string(first_held_) +
              " from the store: " + e.what());
  }
}

void Job::try_release(int round) {
  auto asked = asked_.find(round);
  if (!held(round) || asked == asked_.end()) return;
  if (asked->second.count < info_.world_size) return;
  auto start = std::chrono::steady_clock::now();
  if (!persist("releasing round " + std::to_string(round),
               [&] { store_.mark_released(id_, round); })) {
    return;
  }
  held(round)->released = true;
  asked_.erase(asked);
  auto waiting = std::move(waiters_[round]);
  waiters_.erase(round);
  std::map<const StagePlan*, std::string> cache;  // ranks of a stage share one plan
  for (auto& [rank, respond] : waiting) respond({200, nullptr, schedule_text(rank, round, cache)});
  // Answers are handed to the kernel inside respond(): this is the server's share of the round.
  std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  release_ms_.push_back(took.count());
  if (release_ms_.size() > kReleaseTimesShown) release_ms_.pop_front();
  if (on_release_) on_release_(took.count());
  log::info("job " + id_ + " round " + std::to_string(round) + " released to " +
            std::to_string(waiting.size()) + " waiting ranks in " + number(took.count()) + " ms");
}

std::string Job::schedule_text(int rank, int round,
                               std::map<const StagePlan*, std::string>& cache) const {
  const auto& info = *ranks_[static_cast<std::size_t>(rank)];
  const StagePlan* plan = &plan_for(held(round)->plans, info.dp_rank, info.pp_rank);
  auto it = cache.find(plan);
  if (it == cache.end()) {
    json body = wire::to_json(schedule_for(rank, round));
    body.erase("rank");
    it = cache.emplace(plan, body.dump().substr(1)).first;  // without the opening brace
  }
  return "{\"rank\":" + std::to_string(rank) + "," + it->second;
}

bool Job::persist(const std::string& what, const std::function<void()>& write) {
  const auto now = std::chrono::steady_clock::now();
  if (store_failing_since_ && now < next_store_try_) return false;
  try {
    write();
  } catch (const StoreError& e) {
    const bool first = !store_failing_since_;
    if (first) store_failing_since_ = now;
    const double failing_s = std::chrono::duration<double>(now - *store_failing_since_).count();
    if (failing_s >= settings_.store_retry_s) {
      fail("the store failed while " + what + " (for " + number(failing_s) + " s, " +
           "--store-retry-for " + number(settings_.store_retry_s) + " s): " + e.what());
      return false;
    }
    if (first) {  // said once; the end of the episode is said too
      log::warn("job " + id_ + ": " + e.what() + " while " + what + "; retrying every " +
                std::to_string(kStoreRetryPeriod.count()) + " s for up to " +
                number(settings_.store_retry_s) + " s");
    }
    next_store_try_ = now + kStoreRetryPeriod;
    return false;
  } catch (const std::exception& e) {  // out of memory: failed with the reason, never half-made
    fail(what + " failed: " + reason_of(e));
    return false;
  }
  if (store_failing_since_) log::info("job " + id_ + ": the store works again (" + what + ")");
  store_failing_since_.reset();
  return true;
}

void Job::fail(const std::string& message) {
  log::error("job " + id_ + " failed: " + message);
  error_ = message;
  try {
    store_.set_error(id_, message);
  } catch (const StoreError& e) {  // the failure is served from memory until a restart
    log::error("job " + id_ + ": cannot store its failure: " + e.what());
  }
  release_waiters(job_failed(message));
}

void Job::release_waiters(const Reply& reply) {
  auto waiting = std::move(waiters_);
  waiters_.clear();
  asked_.clear();
  for (auto& [round, list] : waiting) {
    for (auto& [rank, respond] : list) respond(reply);
  }
}

wire::FrequencySchedule Job::schedule_for(int rank, int round) const {
  const auto& info = *ranks_[static_cast<std::size_t>(rank)];
  const Round& r = held(round)->plans;
  const StagePlan& plan = plan_for(r, info.dp_rank, info.pp_rank);
  return {rank, plan.frequencies, round, r.done, plan.power_limit_w, r.report_every};
}

void Job::request_schedule(int rank, std::optional<int> round, Responder respond) {
  last_activity_ = std::chrono::steady_clock::now();
  retry_store();
  if (!error_.empty()) return respond(job_failed(error_));
  if (rank < 0 || rank >= info_.world_size) {
    return respond(bad_request(rank_out_of_range("query 'rank'", rank)));
  }
  if (!ranks_[static_cast<std::size_t>(rank)]) {
    return respond(
        conflict("rank " + std::to_string(rank) + " of job " + id_ + " has not registered"));
  }
  int r = round.value_or(next_round_[static_cast<std::size_t>(rank)]);
  const int made = computed();
  if (made > 0 && held_.back().plans.done && r >= made) r = made - 1;
  if (r < first_held_) {
    return respond(conflict("round " + std::to_string(r) + " is over: the job is at round " +
                            std::to_string(made - 1) + " and holds rounds from " +
                            std::to_string(first_held_) + " on"));
  }
  if (r < made && held(r)->released) {
    std::map<const StagePlan*, std::string> cache;
    return respond({200, nullptr, schedule_text(rank, r, cache)});
  }
  if (r > made) {
    return respond(conflict("round " + std::to_string(r) + " is not the next round for rank " +
                            std::to_string(rank) + " (next: " + std::to_string(made) + ")"));
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
  if (!error_.empty()) return job_failed(error_);
  if (result.rank >= info_.world_size) {
    return bad_request(rank_out_of_range("field 'rank'", result.rank));
  }
  if (result.final_window) return report_final_window(result);
  auto rank = static_cast<std::size_t>(result.rank);
  int r = result.round.value_or(next_round_[rank]);
  if (already_acknowledged(result, r)) return {200, nullptr};
  HeldRound* round = held(r);
  if (!round || !round->released) {
    return conflict("round " + std::to_string(r) + " has not been served to rank " +
                    std::to_string(result.rank));
  }
  auto& slot = round->results[rank];
  if (slot) return {200, nullptr};  // a retry of an acknowledged report
  store_.add_result(id_, r, result.rank, body);
  slot = result;
  next_round_[rank] = std::max(next_round_[rank], r + 1);
  if (++round->results_in == info_.world_size) {
    record_measurement(r, round->plans, round->results);
    store_measurements();
    finish_round(r);
  }
  return {200, nullptr};
}

Reply Job::report_final_window(const wire::ProfilingResult& result) {
  const int final_round = computed() - 1;
  if (held_.empty() || !held_.back().plans.done || !held_.back().released) {
    return conflict("field 'final_window': job " + id_ + " is not done (round " +
                    std::to_string(final_round) + " is not its final round served)");
  }
  if (*result.round != final_round) {
    return conflict("field 'final_window': round " + std::to_string(*result.round) +
                    " is not the job's final round " + std::to_string(final_round));
  }
  const int window = *result.final_window;
  if (window <= measured_.counted_final_window) return {200, nullptr};  // a retry
  auto& results = final_windows_[window];
  results.resize(ranks_.size());
  auto& slot = results[static_cast<std::size_t>(result.rank)];
  if (slot) return {200, nullptr};  // a retry
  slot = result;
  const bool complete =
      std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); });
  if (complete) {
    record_measurement(final_round, held_.back().plans, results, window);
    store_measurements();
    final_windows_.erase(final_windows_.begin(), final_windows_.upper_bound(window));
  }
  while (final_windows_.size() > kHeldRounds) final_windows_.erase(final_windows_.begin());
  return {200, nullptr};
}

// Zeus clients send results without `round`, and keep reporting after the final round: a
// report past the final round, or one without `round` while this rank's next round is not
// served yet (the retry of its last report), is acknowledged and changes nothing.
bool Job::already_acknowledged(const wire::ProfilingResult& result, int r) const {
  const int made = computed();
  if (made > 0 && held_.back().plans.done && r >= made) return true;
  if (r < first_held_) return true;  // every rank reported it
  if (result.round || r == 0) return false;
  const HeldRound* next = held(r);
  const HeldRound* before = held(r - 1);  // not held: every rank reported it
  return !(next && next->released) &&
         (!before || before->results[static_cast<std::size_t>(result.rank)]);
}

// Every rank reported round `round`: the scheduler observes it and plans the next one.
void Job::finish_round(int round) {
  if (held(round)->plans.done || round + 1 != computed()) return;
  try {
    scheduler_->observe(aggregate(held(round)->results));
  } catch (const std::exception& e) {
    fail(std::string("scheduler '") + info_.scheduler.value_or("") + "' failed: " + reason_of(e));
    return;
  }
  compute_round();
}

std::vector<StageResult> Job::aggregate(const RankResults& results) const {
  std::vector<StageResult> out;
  for (int stage = 0; stage < info_.pp_degree; ++stage) {
    std::vector<const wire::ProfilingResult*> reports;
    for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
      if (ranks_[rank]->pp_rank == stage) {
        reports.push_back(&*results[rank]);
      }
    }
    out.push_back(aggregate_stage(reports));
  }
  return out;
}

Reply Job::report_straggler(const json& report) {
  if (!error_.empty()) return job_failed(error_);
  if (!scheduler_ || held_.empty()) {
    return conflict("job " + id_ + " has not started: " +
                    (registered() < info_.world_size
                         ? std::string("not every rank has registered")
                         : std::string("its scheduler is being made; retry in a moment")));
  }
  if (held_.back().plans.done) {
    return conflict("job " + id_ +
                    " is done: its ranks keep their final plans and ask for no "
                    "more; register the job again to react to stragglers (the frontier "
                    "scheduler with done_after 0 never ends)");
  }
  try {
    scheduler_->report_straggler(report);
  } catch (const std::exception& e) {
    return bad_request(e.what());
  }
  store_.add_straggler(id_, computed() - 1, report);
  ++stragglers_reported_;
  return {200, nullptr};
}

}  // namespace perseus::server
