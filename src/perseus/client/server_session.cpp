#include "perseus/client/server_session.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include "perseus/util/steady_time.hpp"

namespace perseus::client {

using nlohmann::json;

namespace {

// The text of a server's answer as one short line for a warning.
std::string one_line(const std::string& text, std::size_t max = 300) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// A refused request's answer as a warning shows it: the server's `detail` when it sent one (in
// full: the server bounds it), else the body's first 300 characters; then what to do for the
// statuses a user can fix.
std::string refusal_text(const HttpResponse& r) {
  std::string text = one_line(r.body);
  try {
    const json answer = json::parse(r.body);
    if (answer.is_object() && answer.contains("detail") && answer["detail"].is_string()) {
      text = one_line(answer["detail"].get<std::string>(), 2000);
    }
  } catch (const json::exception&) {
  }
  if (r.status == 401) {
    text += " (give the client the server's cluster token: PERSEUS_TOKEN, or the token option)";
  } else if (r.status == 403) {
    text += " (the job's secret does not match: is PERSEUS_JOB_ID or job_id another job's?)";
  }
  return text.empty() ? text : ": " + text;
}

// The option, else the environment variable, else "".
std::string option_or_env(const std::string& option, const char* variable) {
  const char* env = std::getenv(variable);
  return !option.empty() ? option : env ? env : "";
}

}  // namespace

bool CircuitBreaker::backing_off() {
  if (skip_ == 0) return false;
  --skip_;
  return true;
}

void CircuitBreaker::failed() {
  skip_ = std::min(next_, cap_);
  next_ = std::min(2 * next_, std::max(cap_, 1));
}

void CircuitBreaker::succeeded() {
  skip_ = 0;
  next_ = 1;
}

HttpClient server_client(const OptimizerOptions& options) {
  HttpClient http(options.server_url, options.request_timeout_s,
                  option_or_env(options.ca_file, "PERSEUS_CA_FILE"));
  const std::string token = option_or_env(options.token, "PERSEUS_TOKEN");
  if (!token.empty()) http.set_header("Authorization", "Bearer " + token);
  return http;
}

ServerSession::ServerSession(const OptimizerOptions& options)
    : opt_(options), http_(server_client(options)), breaker_(options.max_skipped_windows) {
  start_exchange();
}

std::string ServerSession::credential() const {
  return secret_.empty() ? job_id_ : job_id_ + wire::kCredentialSeparator + secret_;
}

// Takes "<job id>[#<secret>]"; the secret goes with every later request.
void ServerSession::take_credential(const std::string& credential) {
  auto cut = credential.find(wire::kCredentialSeparator);
  job_id_ = credential.substr(0, cut);
  secret_ = cut == std::string::npos ? "" : credential.substr(cut + 1);
  http_.set_header(wire::kJobSecretHeader, secret_);
}

void ServerSession::start_exchange() {
  deadline_ = std::chrono::steady_clock::now() + steady_duration(opt_.stall_bound_s);
}

namespace {

// A 4xx answer that the same request would get again (a bad field, a wrong secret, an unknown
// job): not retried. Timeouts (408), "not now" (409, a round not served yet) and caps (429) are.
bool refused_for_good(int status) {
  return status >= 400 && status < 500 && status != 408 && status != 409 && status != 429;
}

}  // namespace

// One request with bounded retries; `accept` turns the parsed JSON answer into the result and
// throws perseus::Error when it is unacceptable (retried like garbage).
template <typename Accept>
auto ServerSession::call(bool post, const std::string& target, const std::string& body,
                         double timeout_s, Accept&& accept, bool counted)
    -> decltype(accept(json())) {
  std::string last;
  const int attempts = 1 + opt_.retries;
  double delay = opt_.backoff_s;
  auto left = [&] {
    return std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
  };
  int attempt = 0;
  bool refused = false;
  while (attempt < attempts && left() > 0.0 && !refused) {
    if (attempt > 0 && delay > 0.0) {
      if (delay >= left()) break;  // the retry would start past the stall bound
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      delay *= 2.0;
    }
    const double budget = std::min(timeout_s, left());
    if (budget <= 0.0) break;
    ++attempt;
    try {
      HttpResponse r = post ? http_.post(target, body, budget) : http_.get(target, budget);
      zeus_server_ = r.header("Server").rfind(wire::kServerName, 0) != 0;
      if (!r.ok()) {
        last = std::string(post ? "POST " : "GET ") + http_.url_of(target) + ": HTTP " +
               std::to_string(r.status) + refusal_text(r);
        if (!r.header(wire::kJobFailedHeader).empty()) throw JobFailed(last);
        if (counted && zeus_server_ && r.status >= 500) {
          throw StopAsking(last + " (the job's scheduler failed on a server that is not " +
                           "Perseus's, which answers the job's later requests by never " +
                           "answering: this rank stops asking it)");
        }
        refused = refused_for_good(r.status);
        continue;
      }
      try {
        answer_secret_ = r.header(wire::kJobSecretHeader);
        return accept(wire::parse_json(r.body));
      } catch (const Error& e) {
        last = std::string(post ? "POST " : "GET ") + http_.url_of(target) +
               ": unusable answer: " + e.what();
      }
    } catch (const HttpError& e) {
      last = e.what();
      if (counted && zeus_server_ && e.timed_out()) {
        throw StopAsking(
            last + " (a server that is not Perseus's, like Zeus's, counts every schedule request " +
            "at its barrier, so one given up after the stall bound of " +
            number(opt_.stall_bound_s) + " s cannot be sent again: this rank stops asking and " +
            "trains at the default clocks; give it a stall bound above the longest pause " +
            "between ranks)");
      }
    }
  }
  if (last.empty()) {
    last = std::string(post ? "POST " : "GET ") + http_.url_of(target) + ": not sent";
  }
  std::string why;
  if (refused) {
    why = ", not retried: the same request gets the same answer";
  } else if (attempt < attempts) {
    why = ", stopped by the stall bound of " + number(opt_.stall_bound_s) + " s";
  }
  throw ServerFailure(last + " (" + std::to_string(attempt) +
                      (attempt == 1 ? " attempt" : " attempts") + why + ")");
}

std::string ServerSession::register_job() {
  wire::JobInfo info;
  info.pp_degree = opt_.pp_degree;
  info.dp_degree = opt_.dp_degree;
  info.tp_degree = opt_.tp_degree;
  info.world_size = opt_.world_size;
  info.job_metadata = opt_.job_metadata;
  if (!opt_.scheduler.empty()) info.scheduler = opt_.scheduler;
  if (!opt_.scheduler_args.empty()) info.scheduler_args = opt_.scheduler_args;
  info.pipeline_order = opt_.pipeline_order;
  info.applies_power_limits = true;  // FrequencyController::set_power_limit
  std::string id = call(true, wire::kRegisterJobPath, wire::to_json(info).dump(),
                        opt_.request_timeout_s, [](const json& answer) {
                          if (!answer.is_string() || answer.get<std::string>().empty()) {
                            throw Error("expected the job id as a non-empty JSON string, got " +
                                        one_line(answer.dump(), 80));
                          }
                          return answer.get<std::string>();
                        });
  return answer_secret_.empty() ? id : id + wire::kCredentialSeparator + answer_secret_;
}

// Finds this job's id (registering it on rank 0); throws ServerFailure when it stays unknown.
void ServerSession::resolve_job_id() {
  if (!job_id_.empty()) return;
  if (!opt_.job_id.empty()) {
    take_credential(opt_.job_id);
    return;
  }
  if (const char* env = std::getenv("PERSEUS_JOB_ID"); env != nullptr && *env != '\0') {
    take_credential(env);
    return;
  }
  std::string mine;
  std::exception_ptr failure;  // a ServerFailure, kept whole (JobFailed included)
  if (opt_.rank == 0) {
    try {
      mine = register_job();
    } catch (const ServerFailure&) {
      failure = std::current_exception();
    }
  }
  // Every rank takes part in the exchange, also when rank 0 failed (it passes "").
  if (opt_.share_job_id) {
    try {
      take_credential(opt_.share_job_id(mine));
    } catch (const std::exception& e) {
      throw ServerFailure(std::string("share_job_id failed: ") + e.what());
    }
    // The broadcast waited for the framework's ranks, not for the server: the requests after
    // it get the whole stall bound.
    start_exchange();
  } else if (opt_.rank == 0) {
    take_credential(mine);
  }
  if (failure) std::rethrow_exception(failure);
  if (job_id_.empty()) {
    throw ServerFailure(opt_.share_job_id
                            ? "rank 0 did not register the job (it shared an empty job id)"
                            : "rank " + std::to_string(opt_.rank) +
                                  " has no job id: set options.job_id, PERSEUS_JOB_ID or "
                                  "options.share_job_id");
  }
}

void ServerSession::ensure_registered(const std::vector<int>& clocks, bool simulated_gpu) {
  resolve_job_id();
  if (rank_registered_) return;
  wire::RankInfo info;
  info.rank = opt_.rank;
  info.dp_rank = opt_.dp_rank;
  info.pp_rank = opt_.pp_rank;
  info.tp_rank = opt_.tp_rank;
  info.available_frequencies = clocks;
  info.simulated_gpu = simulated_gpu;
  call(true, wire::kRegisterRankPath + job_id_, wire::to_json(info).dump(), opt_.request_timeout_s,
       [](const json&) { return 0; });
  rank_registered_ = true;
}

wire::FrequencySchedule ServerSession::fetch_schedule(int round) {
  std::string target = wire::kSchedulePath + job_id_ + "?rank=" + std::to_string(opt_.rank) +
                       "&round=" + std::to_string(round);
  return call(
      false, target, "", opt_.barrier_timeout_s,
      [&](const json& answer) {
        wire::FrequencySchedule s = wire::parse_frequency_schedule(answer);
        if (s.rank != opt_.rank) {
          throw Error("schedule is for rank " + std::to_string(s.rank) + ", not " +
                      std::to_string(opt_.rank));
        }
        if (s.power_limit_w && !(*s.power_limit_w > 0.0)) {
          throw Error("field 'power_limit_w': must be positive");
        }
        for (std::size_t i = 0; i < s.frequencies.size(); ++i) {
          if (s.frequencies[i].first.empty()) {
            throw Error("field 'frequencies[" + std::to_string(i) + "]': empty instruction name");
          }
        }
        return s;
      },
      true);
}

// Posts the unacknowledged result (reports are idempotent on the server); throws
// ServerFailure and keeps it when the server does not take it.
void ServerSession::queue_result(WindowMeasurements m, int round, int final_window) {
  wire::ProfilingResult result;
  result.rank = opt_.rank;
  result.iter_time = std::move(m.iter_time);
  result.iter_energy = std::move(m.iter_energy);
  result.round = round;
  if (final_window > 0) result.final_window = final_window;
  result.time_breakdown = std::move(m.time_breakdown);
  result.energy_breakdown = std::move(m.energy_breakdown);
  result.energy_stderr = std::move(m.energy_stderr_j);
  result.energy_pooling_error = std::move(m.energy_pooling_error_j);
  result.attribution = to_string(m.method);
  for (const auto& [name, c] : m.clocks) result.clocks[name] = c;
  result.energy_measured = m.measured;
  unsent_result_ = wire::to_json(result).dump();
}

void ServerSession::post_pending() {
  if (!unsent_result_) return;
  call(true, wire::kResultPath + job_id_, *unsent_result_, opt_.request_timeout_s,
       [](const json&) { return 0; });
  unsent_result_.reset();
}

}  // namespace perseus::client
