#include "perseus/server/http_server.hpp"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <cmath>

#include "perseus/server/http_session.hpp"
#include "perseus/server/tls_socket.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {
namespace {

using namespace http_detail;  // NOLINT: this file is the session's only user

constexpr std::chrono::milliseconds kSweepPeriod{250};  // deadlines are checked this often

// How long the first connection accepted at a connection cap waits for one to end before it is
// refused.
constexpr std::chrono::milliseconds kCapWait{50};

// Descriptors kept for what is not a connection (the store, its journal, files read and written,
// the listening socket) when --max-connections follows the open-file limit: a quarter of it, at
// most kReservedDescriptors.
constexpr std::size_t kReservedDescriptors = 64;

// The default --max-connections: the open-file limit less what is kept for the rest.
std::size_t descriptor_budget() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1u << 20;
  const auto open_files = static_cast<std::size_t>(limit.rlim_cur);
  return std::max<std::size_t>(1, open_files - std::min(kReservedDescriptors, open_files / 4));
}

bool out_of_descriptors(const beast::error_code& ec) {
  int v = ec.value();
  return ec.category() == asio::error::get_system_category() &&
         (v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM);
}

}  // namespace

void HttpLimits::validate() const {
  auto positive = [](double v, const char* name) {
    if (!(std::isfinite(v) && v > 0.0)) throw Error(std::string(name) + " must be a number > 0");
  };
  positive(header_timeout_s, "--header-timeout");
  positive(body_timeout_s, "--body-timeout");
  positive(idle_timeout_s, "--idle-timeout");
  positive(first_request_timeout_s, "--first-request-timeout");
  if (max_connections_per_peer == 0) throw Error("--max-connections-per-peer must be > 0");
  if (max_body == 0) throw Error("--max-body must be > 0");
  if (max_inflight_bytes < max_body) throw Error("--max-inflight-bytes must be >= --max-body");
  if (max_inflight_bytes_per_peer < max_body) {
    throw Error("--max-inflight-bytes-per-peer must be >= --max-body");
  }
}

struct HttpServer::Impl {
  Impl(ControlPlane& p, const std::string& address, unsigned short port, HttpLimits limits,
       const TlsFiles& tls_files)
      : shared{p, limits, 0, 0, 0, 1, {}, {}},
        acceptor(io),
        backoff(io),
        sweeper(io),
        signals(io, SIGINT, SIGTERM) {
    limits.validate();
    max_connections = limits.max_connections ? limits.max_connections : descriptor_budget();
    shared.max_half_closed = std::max<std::size_t>(1, max_connections / kHalfClosedShare);
    log::info("connections: at most " + std::to_string(max_connections) + ", " +
              std::to_string(limits.max_connections_per_peer) + " per peer address");
    if (!tls_files.cert.empty() || !tls_files.key.empty()) load_tls(tls_files);
    beast::error_code ec;
    auto ip = asio::ip::make_address(address, ec);
    if (ec) throw Error("--address: '" + address + "' is not an IP address");
    tcp::endpoint endpoint(ip, port);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error("cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message());
    }
    signals.async_wait([this](beast::error_code, int) { io.stop(); });
    // Named so that `top -H` (and a test) tells the renderer's work from the event loop's.
    asio::post(renderer, [] { pthread_setname_np(pthread_self(), "perseus-render"); });
    accept();
    sweep();
  }

  void load_tls(const TlsFiles& files) {
    if (files.cert.empty() || files.key.empty()) {
      throw Error("--tls-cert and --tls-key go together: give both or neither");
    }
    tls.emplace(asio::ssl::context::tls_server);
    tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    prepare_server_context(*tls);
    beast::error_code ec;
    tls->use_certificate_chain_file(files.cert, ec);
    if (ec) throw Error("--tls-cert: cannot use " + files.cert + ": " + ec.message());
    tls->use_private_key_file(files.key, asio::ssl::context::pem, ec);
    if (ec) throw Error("--tls-key: cannot use " + files.key + ": " + ec.message());
  }

  // Runs `render` on the renderer thread and hands its answer to `respond` on the event loop; at
  // most kMaxRendering at once (more: 503), so a peer that asks again and again for a large
  // answer, or registers again and again, holds a bounded number of copies.
  void render_off_loop(std::function<Reply()> render, Responder respond) {
    if (rendering >= kMaxRendering) {
      return respond(service_unavailable("the server is busy with " + std::to_string(rendering) +
                                         " requests it handles off its event loop (large "
                                         "answers, registrations); retry later"));
    }
    ++rendering;
    asio::post(renderer, [this, render = std::move(render), respond = std::move(respond)] {
      Reply reply;
      try {
        reply = render();
      } catch (const std::exception& e) {
        reply = internal_error(std::string("internal error: ") + reason_of(e));
      }
      asio::post(io, [this, reply = std::move(reply), respond = std::move(respond)] {
        --rendering;
        respond(reply);
      });
    });
  }

  // Closes connections past their deadline, a few times a second; forgets closed ones; lets the
  // control plane do its periodic work (ControlPlane::tick).
  void sweep() {
    auto now = Clock::now();
    auto& all = shared.connections;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      auto session = all[i].lock();
      if (!session) continue;
      session->sweep(now);
      if (kept != i) all[kept] = std::move(all[i]);  // a weak_ptr moved onto itself empties
      ++kept;
    }
    all.resize(kept);
    shared.plane.tick();
    sweeper.expires_after(kSweepPeriod);
    sweeper.async_wait([this](beast::error_code ec) {
      if (!ec) sweep();
    });
  }

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (!ec) {
        if (starved) log::info("accepting connections again");
        starved = false;
        const asio::ip::address peer = socket.remote_endpoint(ec).address();
        if (ec) return accept();  // gone already
        if (!at_cap(peer)) {
          refusing = false;
          serve(std::move(socket), peer);
          return accept();
        }
        if (refusing) {
          refuse_connection(socket, peer);
          return accept();
        }
        // At a cap: connections that were just closed may not have ended yet; accepting pauses
        // for kCapWait once, then this connection and, while the cap holds, every next one is
        // refused at once.
        held = std::make_shared<tcp::socket>(std::move(socket));
        backoff.expires_after(kCapWait);
        backoff.async_wait([this, peer](beast::error_code) {
          refusing = at_cap(peer);
          if (refusing) {
            refuse_connection(*held, peer);
          } else {
            serve(std::move(*held), peer);
          }
          held.reset();
          accept();
        });
        return;
      }
      if (!out_of_descriptors(ec)) return accept();
      // Out of descriptors: retry later instead of spinning; open connections keep being served.
      if (!starved) log::warn("cannot accept connections: " + ec.message() + "; retrying");
      starved = true;
      backoff.expires_after(std::chrono::milliseconds(100));
      backoff.async_wait([this](beast::error_code) { accept(); });
    });
  }

  void serve(tcp::socket socket, const asio::ip::address& peer) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    socket.set_option(asio::socket_base::keep_alive(true), ignored);
    if (tls) {
      std::make_shared<Session<TlsSocket>>(std::move(socket), peer, shared, *tls)->start();
    } else {
      std::make_shared<Session<tcp::socket>>(std::move(socket), peer, shared)->start();
    }
  }

  bool at_cap(const asio::ip::address& peer) const {
    auto it = shared.peers.find(peer);
    const std::size_t from_peer = it == shared.peers.end() ? 0 : it->second.connections;
    return shared.open >= max_connections || from_peer >= shared.limits.max_connections_per_peer;
  }

  // Closes a connection past a cap at once (a plain one after a 503 written if the socket takes
  // it now); says so at most once a second, with how many more were refused meanwhile.
  void refuse_connection(tcp::socket& socket, const asio::ip::address& peer) {
    ++refused_connections;
    beast::error_code ignored;
    if (!tls) {
      static const std::string kBusy = response_bytes(
          service_unavailable("too many connections; retry later on a new one"), false);
      socket.non_blocking(true, ignored);
      socket.write_some(asio::buffer(kBusy), ignored);
    }
    socket.close(ignored);
    const auto now = Clock::now();
    if (now < next_refusal_log) {
      ++unlogged_refusals;
      return;
    }
    log::warn("refused a connection from " + peer.to_string() + ": " + std::to_string(shared.open) +
              " open (--max-connections " + std::to_string(max_connections) +
              ", --max-connections-per-peer " +
              std::to_string(shared.limits.max_connections_per_peer) + ")" +
              (unlogged_refusals ? "; " + std::to_string(unlogged_refusals) +
                                       " more refused since the last such line"
                                 : ""));
    unlogged_refusals = 0;
    next_refusal_log = now + std::chrono::seconds(1);
  }

  asio::io_context io{1};
  // Builds large answers and checks registrations (ControlPlane::set_offload); destroyed
  // (joined) before `io`.
  asio::thread_pool renderer{1};
  std::size_t rendering = 0;  // answers being built
  static constexpr std::size_t kMaxRendering = 16;
  std::optional<asio::ssl::context> tls;
  Shared shared;
  tcp::acceptor acceptor;
  asio::steady_timer backoff;
  asio::steady_timer sweeper;
  asio::signal_set signals;
  bool starved = false;
  std::shared_ptr<tcp::socket> held;  // accepted at a cap, waiting kCapWait
  bool refusing = false;              // at a cap after kCapWait: refusing at once
  std::size_t max_connections = 0;    // --max-connections, resolved
  std::uint64_t refused_connections = 0;
  std::uint64_t unlogged_refusals = 0;
  Clock::time_point next_refusal_log{};
};

HttpServer::HttpServer(ControlPlane& plane, const std::string& address, unsigned short port,
                       HttpLimits limits, const TlsFiles& tls)
    : impl_(std::make_unique<Impl>(plane, address, port, limits, tls)) {
  plane.set_connection_stats([impl = impl_.get()] {
    return ConnectionStats{impl->shared.open, impl->max_connections,
                           impl->shared.limits.max_connections_per_peer, impl->refused_connections};
  });
  plane.set_offload([impl = impl_.get()](std::function<Reply()> render, Responder respond) {
    impl->render_off_loop(std::move(render), std::move(respond));
  });
}

bool HttpServer::tls() const {
  return impl_->tls.has_value();
}

HttpServer::~HttpServer() {
  impl_->shared.plane.set_connection_stats(nullptr);  // they read this server's state
  impl_->shared.plane.set_offload(nullptr);
}

unsigned short HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  for (;;) {
    try {
      impl_->io.run();
      return;
    } catch (const std::exception& e) {
      log::error(std::string("request handling failed, serving on: ") + reason_of(e));
    }
  }
}

void HttpServer::stop() {
  asio::post(impl_->io, [this] { impl_->io.stop(); });
}

}  // namespace perseus::server
