#include "perseus/server/http_server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "perseus/util/error.hpp"

namespace perseus::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint64_t kBodyLimit = 64ull << 20;

// The whole response as bytes: status line, headers, body. Written with one async_write (no
// serializer, no timer): a barrier release writes thousands of these in one go.
std::string response_bytes(const HttpAnswer& answer, bool keep_alive) {
  auto reason = http::obsolete_reason(static_cast<http::status>(answer.status));
  std::string out;
  out.reserve(160 + answer.body.size());
  out += "HTTP/1.1 " + std::to_string(answer.status) + " ";
  out.append(reason.data(), reason.size());
  out += "\r\nServer: perseus\r\nContent-Type: " + answer.content_type +
         "\r\nContent-Length: " + std::to_string(answer.body.size()) +
         (keep_alive ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
  out += answer.body;
  return out;
}

// One client connection. No timers: an idle keep-alive connection costs a socket and a few
// hundred bytes; TCP keep-alive lets the kernel notice peers that died.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ControlPlane& plane) : socket_(std::move(socket)), plane_(plane) {}

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream) return close();
    if (ec) {
      if (ec.category() == beast::error_code(http::error::body_limit).category()) {
        keep_alive_ = false;
        return answer({400, "application/json",
                       nlohmann::json{{"detail", "bad HTTP request: " + ec.message()}}.dump()});
      }
      return;  // the peer went away
    }
    auto request = parser_->release();
    keep_alive_ = request.keep_alive();
    plane_.handle(std::string(request.method_string()), std::string(request.target()),
                  request.body(),
                  [self = shared_from_this()](const HttpAnswer& answer) { self->answer(answer); });
  }

  void answer(const HttpAnswer& answer) {
    out_ = response_bytes(answer, keep_alive_);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return;
                        if (!self->keep_alive_) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
  }

  tcp::socket socket_;
  ControlPlane& plane_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string out_;
  bool keep_alive_ = true;
};

}  // namespace

struct HttpServer::Impl {
  Impl(ControlPlane& p, const std::string& address, unsigned short port)
      : plane(p), acceptor(io), signals(io, SIGINT, SIGTERM) {
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
  }

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        socket.set_option(asio::socket_base::keep_alive(true), ec);
        std::make_shared<Session>(std::move(socket), plane)->start();
      }
      if (acceptor.is_open()) accept();
    });
  }

  ControlPlane& plane;
  asio::io_context io{1};
  tcp::acceptor acceptor;
  asio::signal_set signals;
};

HttpServer::HttpServer(ControlPlane& plane, const std::string& address, unsigned short port)
    : impl_(std::make_unique<Impl>(plane, address, port)) {}

HttpServer::~HttpServer() = default;

unsigned short HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  impl_->io.run();
}

void HttpServer::stop() {
  asio::post(impl_->io, [this] { impl_->io.stop(); });
}

}  // namespace perseus::server
