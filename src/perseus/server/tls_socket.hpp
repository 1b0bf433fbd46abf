// The server side of one TLS connection, as an Asio stream (async_handshake, async_read_some,
// async_write_some, next_layer): OpenSSL reads and writes the TCP socket itself, through a BIO
// that calls recv/send (no SIGPIPE), and the socket's readiness is awaited with async_wait.
// Unlike asio::ssl::stream it keeps no buffers of its own (asio's engine holds two 17 KB buffers
// and a BIO pair of two more per connection), and OpenSSL's record buffers are released while a
// connection is idle (SSL_MODE_RELEASE_BUFFERS, set by prepare_server_context), so an idle TLS
// connection costs about what OpenSSL's per-connection state does.
//
// A peer's close_notify and a TCP end of stream without one both read as asio::error::eof, and
// the connection can still write after either (a half-close: HTTP/1.1 bodies carry their length,
// so a truncated request is still seen by the parser). One read and one write may be in flight
// at once, as with any Asio stream; none after the socket is closed.
#pragma once

#include <openssl/ssl.h>

// clang-format off
#include <utility>  // before Boost.Asio 1.74, which uses std::exchange without including it
// clang-format on

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <type_traits>

namespace perseus::server {

// Sets on a server context what TlsSocket relies on (released idle buffers, partial and moving
// writes, an end of stream without close_notify read as an end of stream).
void prepare_server_context(boost::asio::ssl::context& context);

class TlsSocket {
 public:
  using tcp = boost::asio::ip::tcp;
  using executor_type = tcp::socket::executor_type;
  using next_layer_type = tcp::socket;
  using lowest_layer_type = tcp::socket::lowest_layer_type;

  // Takes the connected socket (made non-blocking); `context` must outlive this stream.
  TlsSocket(tcp::socket socket, boost::asio::ssl::context& context);
  ~TlsSocket();
  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  executor_type get_executor() { return socket_.get_executor(); }
  tcp::socket& next_layer() { return socket_; }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }

  template <class Handler>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type, Handler&& handler) {
    return boost::asio::async_compose<Handler, void(boost::system::error_code)>(
        Op<Handshake>{*this, {}}, handler, socket_);
  }
  template <class Buffers, class Handler>
  auto async_read_some(const Buffers& buffers, Handler&& handler) {
    return boost::asio::async_compose<Handler, void(boost::system::error_code, std::size_t)>(
        Op<Read>{*this, {first(buffers)}}, handler, socket_);
  }
  template <class Buffers, class Handler>
  auto async_write_some(const Buffers& buffers, Handler&& handler) {
    return boost::asio::async_compose<Handler, void(boost::system::error_code, std::size_t)>(
        Op<Write>{*this, {first(buffers)}}, handler, socket_);
  }

  // Sends TLS's close_notify if the socket takes it now (the connection is about to stop
  // sending); reading goes on.
  void send_close_notify();

  // What one call into OpenSSL left: done (with an error or a byte count), or a wait for the
  // socket to be readable or writable before the call is repeated.
  struct Step {
    enum class Wait { none, read, write } wait = Wait::none;
    boost::system::error_code ec;
    std::size_t bytes = 0;
  };
  Step handshake_step();
  Step read_step(boost::asio::mutable_buffer buffer);
  Step write_step(boost::asio::const_buffer buffer);

 private:
  struct Handshake {
    Step operator()(TlsSocket& s) const { return s.handshake_step(); }
  };
  struct Read {
    boost::asio::mutable_buffer buffer;
    Step operator()(TlsSocket& s) const { return s.read_step(buffer); }
  };
  struct Write {
    boost::asio::const_buffer buffer;
    Step operator()(TlsSocket& s) const { return s.write_step(buffer); }
  };

  // One operation: a first call to OpenSSL after a post (an Asio operation never completes
  // inside its initiating call), then one call after each readiness wait.
  template <class Call>
  struct Op {
    TlsSocket& stream;
    Call call;
    bool started = false;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
      if (!started) {
        started = true;
        return boost::asio::post(std::move(self));
      }
      if (!ec && !stream.socket_.is_open()) ec = boost::asio::error::bad_descriptor;
      if (ec) return complete(self, ec, 0);
      const Step step = call(stream);
      using Wait = Step::Wait;
      if (step.wait == Wait::read)
        return stream.socket_.async_wait(tcp::socket::wait_read, std::move(self));
      if (step.wait == Wait::write)
        return stream.socket_.async_wait(tcp::socket::wait_write, std::move(self));
      complete(self, step.ec, step.bytes);
    }
    template <class Self>
    void complete(Self& self, boost::system::error_code ec, std::size_t bytes) {
      if constexpr (std::is_same_v<Call, Handshake>) {
        self.complete(ec);
      } else {
        self.complete(ec, bytes);
      }
    }
  };

  template <class Buffers>
  static auto first(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      if (it->size() > 0) return *it;
    }
    return std::decay_t<decltype(*boost::asio::buffer_sequence_begin(buffers))>();
  }

  // Moves `buffer`'s bytes with SSL_read_ex or SSL_write_ex (`transfer`).
  template <class Buffer, class Transfer>
  Step move_bytes(Buffer buffer, Transfer transfer);
  // The Step of an OpenSSL call: `call` runs with OpenSSL's error queue and errno cleared, and
  // returns what the call returned.
  template <class Call>
  Step step_of(Call call);
  Step after(int result);  // the Step for an OpenSSL call that returned `result`
  // Reads and drops what the peer has sent (at most 64 KB) after a failed handshake, so that
  // closing does not reset the connection before the peer has read OpenSSL's alert.
  void discard_received();

  tcp::socket socket_;
  SSL* ssl_ = nullptr;
};

}  // namespace perseus::server
