// The client's side of the control-plane protocol (DESIGN section 7, perseus/wire/protocol.hpp):
// registering the job (rank 0) and the rank, fetching each round's schedule (the barrier), and
// posting results, each request with bounded retries and exponential backoff. A failure after
// the retries is a ServerFailure saying why; what to do about it (run at the default clock) is
// the optimizer's business. A result the server did not acknowledge is kept and sent again
// first, because the server cannot plan the next round without it.
#pragma once

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

class ServerSession {
 public:
  // `options` must outlive the session.
  explicit ServerSession(const OptimizerOptions& options);

  // Finds the job id (rank 0 registers the job) and registers this rank with `clocks`, as far
  // as not done yet. Throws ServerFailure.
  void ensure_registered(const std::vector<int>& clocks);
  // The schedule of `round` (blocks in the server's barrier). Throws ServerFailure.
  wire::FrequencySchedule fetch_schedule(int round);
  // Queues a result body; post_pending() sends it.
  void queue_result(std::string body) { unsent_result_ = std::move(body); }
  // Sends the queued result, if any; keeps it and throws ServerFailure when not acknowledged.
  void post_pending();
  const std::string& job_id() const { return job_id_; }

 private:
  template <typename Accept>
  auto call(bool post, const std::string& target, const std::string& body, double timeout_s,
            Accept&& accept) -> decltype(accept(nlohmann::json()));
  std::string register_job();
  void resolve_job_id();

  const OptimizerOptions& opt_;
  HttpClient http_;
  std::string job_id_;
  bool rank_registered_ = false;
  std::optional<std::string> unsent_result_;
};

}  // namespace perseus::client
