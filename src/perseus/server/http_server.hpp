// The control plane's HTTP/1.1 transport (Boost.Beast on one Asio event loop): keep-alive
// connections, requests handed to the ControlPlane, answers written whenever they are ready. A
// rank waiting on the schedule barrier holds a connection and a few hundred bytes, never a
// thread, so one loop serves thousands of waiting ranks.
//
// Bounded against hostile or broken peers: a header must arrive within `header_timeout_s` of
// its first byte, a body within `body_timeout_s`, an answer be taken within `body_timeout_s`; a
// connection with no request for `idle_timeout_s` is closed (a barrier wait is not idle). A body
// above `max_body` is refused (413) before it is read, and bodies being read at once may not
// exceed `max_inflight_bytes` together (503). A barrier waiter whose peer hangs up is closed at
// once, freeing its descriptor (the rank still counts as having asked). When descriptors run out
// the acceptor backs off instead of spinning, and keeps serving the connections it has. With a
// certificate and key it serves HTTPS only (TLS 1.2 or later, OpenSSL through TlsSocket).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "perseus/server/control_plane.hpp"

namespace perseus::server {

struct HttpLimits {
  std::uint64_t max_body = 1u << 20;              // bytes: results and straggler reports
  std::uint64_t max_small_body = 64u << 10;       // bytes: every other request
  std::uint64_t max_inflight_bytes = 256u << 20;  // bytes of bodies being read, all connections
  std::uint64_t max_inflight_bytes_per_peer = 64u << 20;  // ... from one peer address
  // Connections open at once (0: the open-file limit less kReservedDescriptors) and from one
  // peer address; a connection past either is closed at once.
  std::size_t max_connections = 0;
  std::size_t max_connections_per_peer = 1024;
  // A connection's first request with credentials (not /healthz) must be in by then, from the
  // connection's start; until then no answer renews it.
  double first_request_timeout_s = 10.0;
  double header_timeout_s = 10.0;
  double body_timeout_s = 60.0;
  double idle_timeout_s = 300.0;
  // Throws perseus::Error naming the bad limit.
  void validate() const;
};

// PEM files of the server's certificate (chain) and private key; both empty: plain HTTP.
struct TlsFiles {
  std::string cert, key;
};

class HttpServer {
 public:
  // Binds `address`:`port` (port 0: any free port); serves HTTPS when `tls` names files. Throws
  // perseus::Error when it cannot bind or use the certificate or key.
  HttpServer(ControlPlane& plane, const std::string& address, unsigned short port,
             HttpLimits limits = {}, const TlsFiles& tls = {});
  ~HttpServer();
  unsigned short port() const;
  bool tls() const;
  // Serves until SIGINT/SIGTERM or stop(). An exception escaping a handler is logged and the
  // loop goes on.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::server
