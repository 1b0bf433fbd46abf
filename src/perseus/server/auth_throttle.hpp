// Failed authentications counted per peer address: a peer with more than kMaxAuthFailures in
// kAuthFailureWindow is locked out (every request it sends but the health check refused) for
// kAuthLockout, so that guessing credentials, or a misconfigured launcher retrying with a wrong
// token, costs the server one log line per lockout instead of one per request. At most
// kMaxTrackedPeers addresses are remembered (the quietest forgotten first). O(log peers) per call.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace perseus::server {

inline constexpr std::size_t kMaxAuthFailures = 20;
inline constexpr std::chrono::seconds kAuthFailureWindow{10};
inline constexpr std::chrono::seconds kAuthLockout{10};
inline constexpr std::size_t kMaxTrackedPeers = 4096;

class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  // Seconds `peer` stays locked out, or nullopt when it is not ("" is never locked out).
  std::optional<double> locked_for(const std::string& peer, Clock::time_point now) const;
  // Counts a failed authentication of `peer`; true when it locks the peer out.
  bool failed(const std::string& peer, Clock::time_point now);

 private:
  struct Peer {
    Clock::time_point window_start;
    std::size_t failures = 0;
    Clock::time_point locked_until;
  };
  void forget_quiet(Clock::time_point now);

  std::map<std::string, Peer> peers_;
};

}  // namespace perseus::server
