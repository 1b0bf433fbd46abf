// One HTTP/1.1 connection of the control-plane server (internal to http_server.cpp): the
// request/answer loop over a plain socket or TLS, its deadlines, the body budget it shares
// with the other connections, and what the sweeper needs to close it.
#pragma once

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "perseus/server/auth.hpp"
#include "perseus/server/control_plane.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/util/log.hpp"
#include "perseus/util/steady_time.hpp"

namespace perseus::server::http_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint32_t kHeaderLimit = 16u << 10;  // bytes of request line and headers
constexpr double kDrainSeconds = 1.0;  // reading what a refused peer still sends, at most
// At most one connection in this many of a cap (total, per peer) may wait half-closed.
constexpr std::size_t kHalfClosedShare = 8;

// The whole response as bytes: status line, headers, body. Written with one async_write (no
// serializer): a barrier release writes thousands of these in one go.
inline std::string response_bytes(const Reply& reply, bool keep_alive) {
  std::string body = reply.payload();
  auto reason = http::obsolete_reason(static_cast<http::status>(reply.status));
  std::string out;
  out.reserve(160 + body.size());
  out += "HTTP/1.1 " + std::to_string(reply.status) + " ";
  out.append(reason.data(), reason.size());
  out +=
      std::string("\r\nServer: ") + wire::kServerName + "\r\nContent-Type: " + reply.content_type;
  for (const auto& [name, value] : reply.headers) out += "\r\n" + name + ": " + value;
  out += "\r\nContent-Length: " + std::to_string(body.size()) +
         (keep_alive ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
  out += body;
  return out;
}

using Clock = std::chrono::steady_clock;

// A connection as the sweeper sees it.
class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the connection when its deadline has passed.
  virtual void sweep(Clock::time_point now) = 0;
};

// What every connection shares: the control plane, the limits, the body budget, and the
// connections whose deadlines the sweeper checks.
struct Shared {
  // What one peer address holds: open connections and bytes of bodies being read.
  struct PeerUse {
    std::string address;  // as text, for the log and the control plane
    std::size_t connections = 0;
    std::size_t half_closed = 0;  // of them: waiting for an answer after the peer's EOF
    std::uint64_t body_bytes = 0;
  };
  using Peers = std::map<asio::ip::address, PeerUse>;

  ControlPlane& plane;
  HttpLimits limits;
  std::uint64_t inflight_bytes = 0;  // bytes of bodies being read, in all
  std::size_t open = 0;              // open connections, in all
  std::size_t half_closed = 0;       // of them: waiting for an answer after the peer's EOF
  std::size_t max_half_closed = 1;   // ... at most (a share of the connection cap)
  Peers peers;                       // only peers that hold something
  std::vector<std::weak_ptr<Connection>> connections;

  // A new connection from `peer`; its entry stays valid while it holds anything.
  Peers::iterator connect(const asio::ip::address& peer) {
    auto [it, added] = peers.try_emplace(peer);
    if (added) it->second.address = peer.to_string();
    ++it->second.connections;
    ++open;
    return it;
  }
  void disconnect(Peers::iterator it) {
    --open;
    --it->second.connections;
    forget_if_idle(it);
  }
  void release_body(Peers::iterator it, std::uint64_t bytes) {
    inflight_bytes -= bytes;
    it->second.body_bytes -= bytes;
    forget_if_idle(it);
  }
  void forget_if_idle(Peers::iterator it) {
    if (it->second.connections == 0 && it->second.body_bytes == 0) peers.erase(it);
  }
};

// Whether a request target is the health check (which no connection is kept open for).
inline bool health_check(std::string_view target) {
  return target == "/healthz" || target.rfind("/healthz?", 0) == 0;
}

// One client connection: wait for a request (idle deadline), read its header (header deadline)
// and body (body deadline, within the shared budget), hand it to the control plane, write the
// answer (write deadline), repeat; its first request with credentials (not the health check) must
// be in within the first-request deadline of the connection's start. The credentials of a
// request with a body are checked on its header, before room for the body is reserved (within
// the total and its peer address's share). Deadlines are time points checked by a sweep of all
// sessions a few times a second, so setting one costs no timer operation. While an answer waits
// (the schedule barrier) the connection keeps reading: a peer that hangs up is closed at once,
// and a request pipelined behind the waiting one is dropped and the connection closed after the
// answer (drop_pipelined), so a waiting connection holds no more than one read buffer. A peer
// that only shut down its sending side after its request (a half-close: end of stream, no more
// bytes) may still read the answer: while few connections do so (keep_half_closed), the
// connection waits for it, for at most the body deadline.
//
// `Stream` is the plain socket or a TLS stream over it (handshake first, under the header
// deadline).
template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  template <class... TlsContext>
  Session(tcp::socket socket, const asio::ip::address& peer, Shared& shared, TlsContext&... tls)
      : stream_(std::move(socket), tls...),
        shared_(shared),
        peer_(shared.connect(peer)),
        first_deadline_(Clock::now() + steady_duration(shared.limits.first_request_timeout_s)) {}
  ~Session() override { uncount(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() {
    beast::error_code ignored;
    socket().non_blocking(true, ignored);
    shared_.connections.push_back(this->weak_from_this());
    if constexpr (kTls) {
      arm(shared_.limits.header_timeout_s);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->close_now();
                                self->wait_request();
                              });
    } else {
      wait_request();
    }
  }

  void sweep(Clock::time_point now) override {
    if (now < deadline_) return;
    log::debug("closing a connection past its deadline");
    close_now();
  }

 private:
  // ---- reading a request ----

  void wait_request() {
    if (buffer_.size() > 0) return read_header();
    arm(shared_.limits.idle_timeout_s);
    if (!reading_) read_more();
  }

  // The connection's one outstanding read between requests.
  void read_more() {
    reading_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](
                                                       beast::error_code ec, std::size_t n) {
      self->reading_ = false;
      if (ec) {
        if (self->pending_ && ec == asio::error::eof && self->keep_half_closed()) {
          return;  // its answer is written when it comes
        }
        self->gone_ = self->pending_;
        return self->close_now();
      }
      self->buffer_.commit(n);
      if (self->draining_ || self->pending_) {
        if (self->pending_) {
          self->drop_pipelined();
        } else {
          self->buffer_.consume(self->buffer_.size());
        }
        return self->read_more();
      }
      self->read_header();
    });
  }

  // Bytes that arrive while an answer waits are a pipelined request: it is not answered (the
  // answer says "Connection: close", after which a client retries what was not answered), and
  // reading goes on, dropping them, so that a hang-up is still seen and nothing accumulates.
  void drop_pipelined() {
    keep_alive_ = false;
    pipelined_ = true;
    buffer_.consume(buffer_.size());
  }

  // Whether a peer whose stream ended while its answer waits may still read it: a plain
  // connection that sent nothing after its request (a peer that sent more and hung up is gone),
  // while fewer than 1 in kHalfClosedShare connections of the server and of its peer address
  // wait so (a hang-up and a half-close look alike: the share bounds what hang-ups hold). The
  // connection then waits, for at most the body deadline, and closes after the answer.
  bool keep_half_closed() {
    Shared::PeerUse& use = peer_->second;
    const std::size_t per_peer =
        std::max<std::size_t>(1, shared_.limits.max_connections_per_peer / kHalfClosedShare);
    if (pipelined_ || shared_.half_closed >= shared_.max_half_closed ||
        use.half_closed >= per_peer) {
      return false;
    }
    half_closed_ = true;
    ++shared_.half_closed;
    ++use.half_closed;
    keep_alive_ = false;
    arm(shared_.limits.body_timeout_s);
    return true;
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    arm(shared_.limits.header_timeout_s);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              self->on_header(ec);
                            });
  }
  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& request = parser_->get();
    std::string target(request.target());
    health_ = health_check(target);
    std::uint64_t limit = body_limit(target);
    auto length = parser_->content_length();
    if (length && *length > limit) {
      return refuse(payload_too_large("request body of " + std::to_string(*length) +
                                      " bytes is above the " + std::to_string(limit) +
                                      "-byte limit for " + std::string(request.method_string()) +
                                      " " + target));
    }
    std::uint64_t reserve = parser_->chunked() ? limit : length.value_or(0);
    // Credentials before a body: a peer without them reserves no room for it. (A request without
    // a body has them checked once, with the request.)
    checked_ = reserve > 0;
    if (checked_) {
      const Request header{std::string(request.method_string()),
                           target,
                           "",
                           std::string(request[http::field::authorization]),
                           std::string(request[kJobSecretHeader]),
                           peer_->second.address};
      if (auto refused = shared_.plane.refuse_on_header(header)) return refuse(*refused);
    }
    std::uint64_t& peer_bytes = peer_->second.body_bytes;
    const bool total_spent = shared_.inflight_bytes + reserve > shared_.limits.max_inflight_bytes;
    if (total_spent || peer_bytes + reserve > shared_.limits.max_inflight_bytes_per_peer) {
      const std::uint64_t held = total_spent ? shared_.inflight_bytes : peer_bytes;
      log::warn(
          "refused a request body: " + std::to_string(held) + " bytes already being read" +
          (total_spent
               ? " (--max-inflight-bytes " + std::to_string(shared_.limits.max_inflight_bytes) + ")"
               : " from " + peer_->second.address + " (--max-inflight-bytes-per-peer " +
                     std::to_string(shared_.limits.max_inflight_bytes_per_peer) + ")"));
      return refuse(
          service_unavailable("the server is reading too many request bodies at "
                              "once; retry later"));
    }
    shared_.inflight_bytes += reserve;
    peer_bytes += reserve;
    parser_->body_limit(limit);
    arm(shared_.limits.body_timeout_s);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this(), reserve](beast::error_code ec, std::size_t) {
                       self->shared_.release_body(self->peer_, reserve);
                       self->on_body(ec);
                     });
  }

  std::uint64_t body_limit(std::string_view target) const {
    const auto& l = shared_.limits;
    bool large = target.rfind(wire::kResultPath, 0) == 0 || target.rfind("/straggler/", 0) == 0;
    return large ? l.max_body : std::min(l.max_body, l.max_small_body);
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      std::uint64_t limit = body_limit(std::string(parser_->get().target()));
      return refuse(
          payload_too_large("request body is above the " + std::to_string(limit) + "-byte limit"));
    }
    if (ec.category() == beast::error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return refuse(bad_request("bad HTTP request: " + ec.message()));
    }
    close_now();  // the peer went away, or a deadline closed the socket
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    disarm();
    auto request = parser_->release();
    keep_alive_ = request.keep_alive();
    pending_ = true;
    Request r{std::string(request.method_string()),
              std::string(request.target()),
              std::move(request.body()),
              std::string(request[http::field::authorization]),
              std::string(request[kJobSecretHeader]),
              peer_->second.address,
              checked_};
    shared_.plane.handle(
        r, [self = this->shared_from_this()](const Reply& reply) { self->answer(reply); });
    if (!pending_) return;
    if (buffer_.size() > 0) drop_pipelined();
    if (!reading_) read_more();  // notices a hang-up
  }

  // ---- answering ----

  void refuse(const Reply& reply) {
    keep_alive_ = false;
    pending_ = true;
    answer(reply);
  }

  // Writes what the socket takes at once; only an answer the peer is slow to take costs an
  // asynchronous write (under the write deadline).
  void answer(const Reply& reply) {
    if (!pending_) return;
    pending_ = false;
    // The first request with credentials admits the connection (the idle deadline from then on).
    if (!health_ && reply.status != 401 && reply.status != 403 && reply.status != 429) {
      admitted_ = true;
    }
    if (gone_) return;
    out_ = response_bytes(reply, keep_alive_);
    beast::error_code ec;
    std::size_t sent = 0;
    if constexpr (!kTls) sent = socket().write_some(asio::buffer(out_), ec);
    if (ec && ec != asio::error::would_block) return close_now();
    if (sent == out_.size()) return after_answer();
    arm(shared_.limits.body_timeout_s);
    asio::async_write(stream_, asio::buffer(out_.data() + sent, out_.size() - sent),
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return self->close_now();
                        self->after_answer();
                      });
  }

  void after_answer() {
    out_.clear();
    if (!keep_alive_) return drain_and_close();
    wait_request();
  }

  // Closes after an answer with "Connection: close": stops sending (over TLS after a
  // close_notify), then reads and drops what
  // the peer still sends (for at most kDrainSeconds) so closing does not reset the connection
  // before the peer has read the answer.
  void drain_and_close() {
    beast::error_code ignored;
    if constexpr (kTls) stream_.send_close_notify();
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    draining_ = true;
    buffer_.consume(buffer_.size());
    arm(kDrainSeconds);
    if (!reading_) read_more();
  }

  void close_now() {
    disarm();
    beast::error_code ignored;
    socket().close(ignored);  // pending reads and writes end with an error
    uncount();
  }

  // The connection no longer counts as open (its socket is closed; a barrier may still hold the
  // session for its answer).
  void uncount() {
    if (!counted_) return;
    counted_ = false;
    if (half_closed_) {
      --shared_.half_closed;
      --peer_->second.half_closed;
    }
    shared_.disconnect(peer_);
  }

  // Until a request with credentials was admitted, no deadline passes the first request's.
  void arm(double s) {
    deadline_ = Clock::now() + steady_duration(s);
    if (!admitted_) deadline_ = std::min(deadline_, first_deadline_);
  }
  void disarm() { deadline_ = Clock::time_point::max(); }

  tcp::socket& socket() { return beast::get_lowest_layer(stream_); }

  Stream stream_;
  Shared& shared_;
  // The peer's address and what it holds (valid while this connection is counted or reads a
  // body).
  Shared::Peers::iterator peer_;
  Clock::time_point first_deadline_;  // for the first request with credentials, until admitted_
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string out_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool counted_ = true;    // in Shared::open (until uncount)
  bool admitted_ = false;  // a request with credentials (not /healthz) was answered
  bool health_ = false;    // the request being handled is the health check
  bool checked_ = false;   // its credentials were checked on its header
  bool keep_alive_ = true;
  bool pending_ = false;      // a request is waiting for its answer
  bool reading_ = false;      // read_more's read is outstanding
  bool gone_ = false;         // the peer hung up while its answer waited
  bool pipelined_ = false;    // bytes came after the request whose answer waits
  bool half_closed_ = false;  // the peer's stream ended; its answer is still written
  bool draining_ = false;     // answered with "Connection: close"; dropping what still arrives
};

}  // namespace perseus::server::http_detail
