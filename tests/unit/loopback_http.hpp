// A tiny HTTP responder on 127.0.0.1 for the client tests (Boost.Asio + Beast, one thread, one
// connection at a time): a handler decides each answer, which may also be raw bytes that are not
// HTTP, or no answer at all (the connection is held open until the responder stops). Every
// request is logged.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace perseus::test {

class LoopbackHttp {
 public:
  struct Request {
    std::string method, target, body;
  };
  struct Reply {
    int status = 200;
    std::string body;
    bool hang = false;  // never answer (keep the connection open)
    bool raw = false;   // send `body` as is, without an HTTP status line
    std::vector<std::pair<std::string, std::string>> headers = {};  // extra response headers
  };
  using Handler = std::function<Reply(const Request&)>;

  explicit LoopbackHttp(Handler handler) : handler_(std::move(handler)), acceptor_(ioc_) {
    using boost::asio::ip::tcp;
    tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }

  ~LoopbackHttp() {
    stop_ = true;
    try {  // wake the blocking accept
      boost::asio::io_context ioc;
      boost::asio::ip::tcp::socket s(ioc);
      s.connect({boost::asio::ip::make_address("127.0.0.1"), port_});
    } catch (...) {
    }
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return log_.size();
  }

 private:
  void serve() {
    namespace http = boost::beast::http;
    std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> held;
    while (true) {
      auto socket = std::make_unique<boost::asio::ip::tcp::socket>(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (stop_) return;
      if (ec) continue;
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(*socket, buffer, req, ec);
      if (ec) continue;
      Request r{std::string(req.method_string()), std::string(req.target()), req.body()};
      {
        std::lock_guard lock(mutex_);
        log_.push_back(r);
      }
      Reply reply = handler_(r);
      if (reply.hang) {
        held.push_back(std::move(socket));
        continue;
      }
      if (reply.raw) {
        boost::asio::write(*socket, boost::asio::buffer(reply.body), ec);
      } else {
        http::response<http::string_body> res{static_cast<http::status>(reply.status), 11};
        res.set(http::field::content_type, "application/json");
        for (const auto& [name, value] : reply.headers) res.set(name, value);
        res.body() = reply.body;
        res.prepare_payload();
        http::write(*socket, res, ec);
      }
      socket->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    }
  }

  Handler handler_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<Request> log_;
  std::thread thread_;
};

// A loopback port with nothing listening (bound, then closed).
inline int closed_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  int port = a.local_endpoint().port();
  a.close();
  return port;
}

}  // namespace perseus::test
