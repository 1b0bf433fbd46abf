// Name resolution for the control-plane client (issue 50.17), inside a request's deadline: the
// system resolver (getaddrinfo, which has no deadline of its own: about 20 s with dead DNS
// servers) runs on a thread of its own, and a request waits for it until the request's deadline
// at most. Its answer is kept for kCacheFor; after that it is looked up again in the background
// while the kept answer serves (also while lookups fail), so a slow or dead DNS server costs a
// reporting window at most once, never the training loop. Numeric addresses need no lookup.
// Not thread-safe: one per HTTP client, as the client.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace perseus::client {

class NameResolver {
 public:
  using Endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  static constexpr std::chrono::seconds kCacheFor{60};

  NameResolver(std::string host, std::string port);
  // The host's addresses. Throws HttpError (timed out) when none is known and the lookup is not
  // done by `deadline` (it goes on for the next request), and HttpError with the resolver's
  // reason when it failed; `what` names the request in the message.
  Endpoints resolve(std::chrono::steady_clock::time_point deadline, const std::string& what);

 private:
  struct Lookup;  // shared with the thread that runs it
  void start_lookup();
  // Takes a finished lookup's answer (kept when it has addresses); false while it runs.
  bool take_finished(std::string& error);

  std::string host_, port_;
  Endpoints endpoints_;  // the latest addresses found (numeric hosts: fixed)
  bool numeric_ = false;
  std::chrono::steady_clock::time_point resolved_at_{};
  std::shared_ptr<Lookup> lookup_;  // the one running or finished, not yet taken
};

}  // namespace perseus::client
