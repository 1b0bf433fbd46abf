// The control plane's answers and request errors. A Reply is what a handler returns (status and
// JSON body, or prebuilt text); a RequestError is what a handler throws when the request cannot
// be served, carrying its HTTP status, so the status is chosen where the error is known and
// mapped to an answer in one place (ControlPlane::handle). Error details are one line and never
// quote raw request bytes: detail text passes through `printable` on its way into a Reply.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perseus/util/error.hpp"

namespace perseus::server {

struct Reply {
  Reply(int s = 200, nlohmann::json b = nullptr, std::string t = "",
        std::string type = "application/json")
      : status(s), body(std::move(b)), text(std::move(t)), content_type(std::move(type)) {}
  int status;
  nlohmann::json body;
  std::string text;  // when not empty: the body, already serialized (used instead of `body`)
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
  // The body as sent: `text`, or `body` serialized (invalid UTF-8 replaced, never a throw).
  std::string payload() const;
};

// {"detail": printable(detail, kMaxDetailBytes)} with the given status: room for a reason that
// names both sides of a mismatch and what to do, never for a request's bytes (the texts a detail
// quotes of a request are bounded where they are quoted).
inline constexpr std::size_t kMaxDetailBytes = 600;
Reply error_reply(int status, std::string_view detail);

// One helper per status the control plane answers with.
Reply bad_request(std::string_view detail);          // 400: not HTTP/JSON we can read
Reply unauthorized(std::string_view detail);         // 401: no or wrong cluster token
Reply forbidden(std::string_view detail);            // 403: not this job's secret
Reply not_found(std::string_view detail);            // 404
Reply method_not_allowed(std::string_view detail);   // 405
Reply conflict(std::string_view detail);             // 409: not now (round, registration)
Reply payload_too_large(std::string_view detail);    // 413
Reply unprocessable(std::string_view detail);        // 422: readable JSON, wrong fields
Reply too_many_requests(std::string_view detail);    // 429: a server cap is reached
Reply internal_error(std::string_view detail);       // 500: an unexpected error
Reply job_failed(std::string_view detail);           // 500: the job failed for good
Reply service_unavailable(std::string_view detail);  // 503: out of a shared budget

// A request the control plane refuses, with the status it answers.
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// `raw` as one printable line of at most `max_bytes`: valid UTF-8 text is kept, control
// characters and bytes that are not valid UTF-8 become \xNN, longer text ends in "...".
std::string printable(std::string_view raw, std::size_t max_bytes = 300);

}  // namespace perseus::server
