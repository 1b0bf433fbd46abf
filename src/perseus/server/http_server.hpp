// The control plane's HTTP/1.1 transport (Boost.Beast on one Asio event loop): keep-alive
// connections, requests handed to the ControlPlane, answers written whenever they are ready. A
// rank waiting on the schedule barrier holds a connection and a few hundred bytes, never a
// thread, so one loop serves thousands of waiting ranks. Answers are written as prebuilt bytes
// with no per-request timer, which keeps a barrier release of thousands of answers short.
#pragma once

#include <memory>
#include <string>

#include "perseus/server/control_plane.hpp"

namespace perseus::server {

class HttpServer {
 public:
  // Binds `address`:`port` (port 0: any free port). Throws perseus::Error when it cannot bind.
  HttpServer(ControlPlane& plane, const std::string& address, unsigned short port);
  ~HttpServer();
  unsigned short port() const;
  // Serves until SIGINT/SIGTERM or stop().
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::server
