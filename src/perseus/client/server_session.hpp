// The client's side of the control-plane protocol (architecture section 7,
// perseus/wire/protocol.hpp): registering the job (rank 0) and the rank, fetching each round's
// schedule (the barrier), and posting results, each request with bounded retries and exponential
// backoff (not for a 4xx refusal the same request would get again). The requests of one exchange (a
// window boundary) share one deadline, `stall_bound_s`, which caps every timeout, retry and
// back-off delay in it. A failure is a ServerFailure saying why; what to do about it (run at the
// default clock) is the optimizer's business, and the session's circuit breaker says how many
// windows to leave the server alone afterwards. A result the server did not acknowledge is kept and
// sent again first, because the server cannot plan the next round without it. A server that is
// not Perseus's (its answers lack `Server: perseus`; Zeus's) counts every schedule request at its
// barrier: a schedule request it timed out on, or a 5xx from it (its scheduler failed; it never
// answers the job again), is StopAsking, never sent again.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perseus/client/http_client.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/util/error.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::client {

// A request to the server failed for good (after retries); the message says why.
class ServerFailure : public Error {
 public:
  using Error::Error;
};

// The server answered that the job failed for good (wire::kJobFailedHeader): not retried, and
// asking again later is pointless too.
class JobFailed : public ServerFailure {
 public:
  using ServerFailure::ServerFailure;
};

// Asking the server again would do harm (a schedule request a server that is not Perseus's, like
// Zeus's, would count twice at its barrier): not retried, and not asked again later.
class StopAsking : public ServerFailure {
 public:
  using ServerFailure::ServerFailure;
};

// Back-off after failed exchanges: skips 1, 2, 4, ... window boundaries (at most `cap`); a
// success resets it.
class CircuitBreaker {
 public:
  explicit CircuitBreaker(int cap) : cap_(cap) {}
  // Called once per window boundary: true while backing off (that boundary is skipped).
  bool backing_off();
  void failed();
  void succeeded();

 private:
  int cap_;
  int skip_ = 0;  // boundaries left to skip
  int next_ = 1;  // boundaries to skip after the next failure
};

// An HTTP client to the control-plane server as a rank reaches it: options.server_url, the CA
// file (options.ca_file, else $PERSEUS_CA_FILE) and the cluster token (options.token, else
// $PERSEUS_TOKEN) sent as a bearer token. Throws perseus::Error for a malformed URL.
HttpClient server_client(const OptimizerOptions& options);

class ServerSession {
 public:
  // `options` must outlive the session.
  explicit ServerSession(const OptimizerOptions& options);

  // Finds the job id (rank 0 registers the job) and registers this rank with `clocks`, as far
  // as not done yet. Throws ServerFailure.
  void ensure_registered(const std::vector<int>& clocks, bool simulated_gpu);
  // The schedule of `round` (blocks in the server's barrier). Throws ServerFailure.
  wire::FrequencySchedule fetch_schedule(int round);
  // Queues a window's measurements as this rank's result for `round` (replacing one not sent);
  // post_pending() sends it. `final_window` k >= 1: the final round's k-th window after its
  // first (wire::ProfilingResult::final_window).
  void queue_result(WindowMeasurements m, int round, int final_window = 0);
  // Sends the queued result, if any; keeps it and throws ServerFailure when not acknowledged.
  void post_pending();
  const std::string& job_id() const { return job_id_; }
  // Whether the last answer came from a server that is not Perseus's (Zeus's).
  bool zeus_server() const { return zeus_server_; }
  // "<job id>#<secret>" (just the id when the server gave no secret): what another rank needs
  // to join the job (options.job_id, PERSEUS_JOB_ID).
  std::string credential() const;

  // Starts an exchange: its requests share one deadline, stall_bound_s from now.
  void start_exchange();
  void exchange_succeeded() { breaker_.succeeded(); }
  void exchange_failed() { breaker_.failed(); }
  bool backing_off() { return breaker_.backing_off(); }

 private:
  // `counted`: a schedule request, which Zeus's server counts at its barrier (never sent twice
  // to a server that is not Perseus's: a timeout or 5xx there is StopAsking).
  template <typename Accept>
  auto call(bool post, const std::string& target, const std::string& body, double timeout_s,
            Accept&& accept, bool counted = false) -> decltype(accept(nlohmann::json()));
  std::string register_job();
  void resolve_job_id();
  void take_credential(const std::string& credential);

  const OptimizerOptions& opt_;
  HttpClient http_;
  std::string job_id_;
  std::string secret_;
  std::string answer_secret_;  // the job-secret header of the last answer taken
  bool rank_registered_ = false;
  std::optional<std::string> unsent_result_;
  bool zeus_server_ = false;  // the last answer came from a server that is not Perseus's
  CircuitBreaker breaker_;
  std::chrono::steady_clock::time_point deadline_;  // of the current exchange
};

}  // namespace perseus::client
