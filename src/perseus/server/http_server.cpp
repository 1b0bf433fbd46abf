#include "perseus/server/http_server.hpp"

#include <cerrno>
#include <cmath>

#include "perseus/server/http_session.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {
namespace {

using namespace http_detail;  // NOLINT: this file is the session's only user

constexpr std::chrono::milliseconds kSweepPeriod{250};  // deadlines are checked this often

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
  if (max_body == 0) throw Error("--max-body must be > 0");
  if (max_inflight_bytes < max_body) throw Error("--max-inflight-bytes must be >= --max-body");
  if (max_inflight_bytes_per_peer < max_body) {
    throw Error("--max-inflight-bytes-per-peer must be >= --max-body");
  }
}

struct HttpServer::Impl {
  Impl(ControlPlane& p, const std::string& address, unsigned short port, HttpLimits limits,
       const TlsFiles& tls_files)
      : shared{p, limits, 0, {}, {}},
        acceptor(io),
        backoff(io),
        sweeper(io),
        signals(io, SIGINT, SIGTERM) {
    limits.validate();
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
    beast::error_code ec;
    tls->use_certificate_chain_file(files.cert, ec);
    if (ec) throw Error("--tls-cert: cannot use " + files.cert + ": " + ec.message());
    tls->use_private_key_file(files.key, asio::ssl::context::pem, ec);
    if (ec) throw Error("--tls-key: cannot use " + files.key + ": " + ec.message());
  }

  // Closes connections past their deadline, a few times a second; forgets closed ones.
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
        socket.set_option(tcp::no_delay(true), ec);
        socket.set_option(asio::socket_base::keep_alive(true), ec);
        if (tls) {
          std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(std::move(socket), shared, *tls)
              ->start();
        } else {
          std::make_shared<Session<tcp::socket>>(std::move(socket), shared)->start();
        }
        return accept();
      }
      if (!out_of_descriptors(ec)) return accept();
      // Out of descriptors: retry later instead of spinning; open connections keep being served.
      if (!starved) log::warn("cannot accept connections: " + ec.message() + "; retrying");
      starved = true;
      backoff.expires_after(std::chrono::milliseconds(100));
      backoff.async_wait([this](beast::error_code) { accept(); });
    });
  }

  asio::io_context io{1};
  std::optional<asio::ssl::context> tls;
  Shared shared;
  tcp::acceptor acceptor;
  asio::steady_timer backoff;
  asio::steady_timer sweeper;
  asio::signal_set signals;
  bool starved = false;
};

HttpServer::HttpServer(ControlPlane& plane, const std::string& address, unsigned short port,
                       HttpLimits limits, const TlsFiles& tls)
    : impl_(std::make_unique<Impl>(plane, address, port, limits, tls)) {
  plane.set_connection_count([shared = &impl_->shared] {
    std::size_t open = 0;
    for (const auto& c : shared->connections) open += !c.expired();
    return open;
  });
}

bool HttpServer::tls() const {
  return impl_->tls.has_value();
}

HttpServer::~HttpServer() {
  impl_->shared.plane.set_connection_count(nullptr);  // the count reads this server's state
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
      log::error(std::string("request handling failed, serving on: ") + e.what());
    }
  }
}

void HttpServer::stop() {
  asio::post(impl_->io, [this] { impl_->io.stop(); });
}

}  // namespace perseus::server
