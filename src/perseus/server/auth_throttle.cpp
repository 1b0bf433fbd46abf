#include "perseus/server/auth_throttle.hpp"

namespace perseus::server {

std::optional<double> AuthThrottle::locked_for(const std::string& peer,
                                               Clock::time_point now) const {
  auto it = peers_.find(peer);
  if (peer.empty() || it == peers_.end() || now >= it->second.locked_until) return std::nullopt;
  return std::chrono::duration<double>(it->second.locked_until - now).count();
}

bool AuthThrottle::failed(const std::string& peer, Clock::time_point now) {
  if (peer.empty()) return false;
  if (peers_.size() >= kMaxTrackedPeers && !peers_.count(peer)) forget_quiet(now);
  Peer& p = peers_[peer];
  if (now - p.window_start >= kAuthFailureWindow) {
    p.window_start = now;
    p.failures = 0;
  }
  if (++p.failures <= kMaxAuthFailures) return false;
  p.locked_until = now + kAuthLockout;
  p.window_start = p.locked_until;  // counting starts again once the lockout ends
  p.failures = 0;
  return true;
}

// Forgets the peers neither locked out nor in a counting window; if that frees nothing, one
// that is not locked out (the locked-out ones stay, unless every peer is).
void AuthThrottle::forget_quiet(Clock::time_point now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    const bool quiet =
        now >= it->second.locked_until && now - it->second.window_start >= kAuthFailureWindow;
    it = quiet ? peers_.erase(it) : std::next(it);
  }
  if (peers_.size() < kMaxTrackedPeers) return;
  for (auto it = peers_.begin(); it != peers_.end(); ++it) {
    if (now >= it->second.locked_until) {
      peers_.erase(it);
      return;
    }
  }
  peers_.erase(peers_.begin());
}

}  // namespace perseus::server
