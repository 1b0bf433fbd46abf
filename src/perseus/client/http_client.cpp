#include "perseus/client/http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "perseus/client/name_resolver.hpp"
#include "perseus/util/steady_time.hpp"

namespace perseus::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Largest answer accepted (bytes), enforced while reading: a schedule of thousands of
// instructions is tens of KiB.
constexpr std::uint64_t kBodyLimit = 4ULL << 20;

std::string seconds_text(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

void check_timeout(double s, const std::string& what) {
  if (!(s > 0.0) || !std::isfinite(s)) {
    throw Error(what + " must be a positive number of seconds, got " + seconds_text(s));
  }
}

// "<what>: <stage> timed out" or "<what>: <stage> failed: <reason>".
HttpError transport_error(const std::string& what, const std::string& stage,
                          const beast::error_code& ec) {
  bool timed_out = ec == beast::error::timeout;
  return HttpError(
      what + ": " + (timed_out ? stage + " timed out" : stage + " failed: " + ec.message()),
      timed_out);
}

// Runs the io_context until the pending operation completes (the stream's own expiry closes
// the socket on timeout, which completes it with beast::error::timeout).
void run(asio::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

}  // namespace

HttpUrl parse_http_url(const std::string& url) {
  auto bad = [&](const std::string& why) { return Error("server URL '" + url + "': " + why); };
  HttpUrl out;
  out.tls = url.rfind("https://", 0) == 0;
  if (!out.tls && url.rfind("http://", 0) != 0) throw bad("must start with http:// or https://");
  std::string rest = url.substr(out.tls ? 8 : 7);
  std::string authority = rest.substr(0, rest.find('/'));
  if (authority.size() < rest.size()) out.prefix = rest.substr(authority.size());
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  if (out.prefix.find_first_of("?#") != std::string::npos) {
    throw bad("must not have a query or fragment");
  }
  std::string port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) throw bad("unterminated '[' in the host");
    out.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw bad("unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) throw bad("empty port");
    }
  } else {
    auto colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) throw bad("empty port");
    }
  }
  if (out.host.empty()) throw bad("missing host");
  if (out.host.find('@') != std::string::npos) throw bad("user information is not supported");
  if (port.empty()) port = out.tls ? "443" : "80";
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stol(port) < 1 || std::stol(port) > 65535) {
    throw bad("port '" + port + "' is not a number in 1..65535");
  }
  out.port = std::to_string(std::stol(port));
  return out;
}

HttpClient::HttpClient(const std::string& base_url, double connect_timeout_s,
                       const std::string& ca_file)
    : base_url_(base_url),
      url_(parse_http_url(base_url)),
      connect_timeout_s_(connect_timeout_s),
      resolver_(std::make_shared<NameResolver>(url_.host, url_.port)) {
  check_timeout(connect_timeout_s, "HTTP connect timeout");
  if (!url_.tls) return;
  tls_ = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  tls_->set_verify_mode(asio::ssl::verify_peer);
  beast::error_code ec;
  if (ca_file.empty()) {
    tls_->set_default_verify_paths(ec);
  } else {
    tls_->load_verify_file(ca_file, ec);
  }
  if (ec) {
    throw Error("TLS CA file '" + (ca_file.empty() ? "(system default)" : ca_file) +
                "': " + ec.message());
  }
}

std::string HttpClient::url_of(const std::string& target) const {
  bool v6 = url_.host.find(':') != std::string::npos;
  return (url_.tls ? "https://" : "http://") + (v6 ? "[" + url_.host + "]" : url_.host) + ":" +
         url_.port + url_.prefix + target;
}

HttpResponse HttpClient::get(const std::string& target, double timeout_s) {
  return request(false, target, "", timeout_s);
}

HttpResponse HttpClient::post(const std::string& target, const std::string& json_body,
                              double timeout_s) {
  return request(true, target, json_body, timeout_s);
}

HttpResponse HttpClient::request(bool post, const std::string& target, const std::string& body,
                                 double timeout_s) {
  check_timeout(timeout_s, "HTTP request timeout");
  const std::string what = std::string(post ? "POST " : "GET ") + url_of(target);

  // One deadline for the whole exchange: connecting, sending, reading the answer.
  const auto deadline = std::chrono::steady_clock::now() + steady_duration(timeout_s);
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;

  const NameResolver::Endpoints endpoints = resolver_->resolve(deadline, what);

  const double connect_s = std::min(connect_timeout_s_, timeout_s);
  stream.expires_after(steady_duration(connect_s));
  stream.async_connect(endpoints,
                       [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
  run(ioc);
  if (ec) {
    throw HttpError(what + ": " +
                        (ec == beast::error::timeout
                             ? "connecting timed out after " + seconds_text(connect_s) + " s"
                             : "cannot connect: " + ec.message() +
                                   (ec == asio::error::connection_refused
                                        ? " (is `perseus serve` running at that address?)"
                                        : "")),
                    ec == beast::error::timeout);
  }

  if (!url_.tls) return exchange(stream, ioc, post, target, body, deadline, what, timeout_s);
  beast::ssl_stream<beast::tcp_stream> tls_stream(std::move(stream), *tls_);
  // SNI and the certificate's host name (or IP address) are checked against the URL's host.
  if (!SSL_set_tlsext_host_name(tls_stream.native_handle(), url_.host.c_str())) {
    throw HttpError(what + ": cannot set the TLS server name", false);
  }
  tls_stream.set_verify_callback(asio::ssl::host_name_verification(url_.host));
  beast::get_lowest_layer(tls_stream).expires_at(deadline);
  tls_stream.async_handshake(asio::ssl::stream_base::client,
                             [&](const beast::error_code& e) { ec = e; });
  run(ioc);
  if (ec == beast::error::timeout) {
    throw HttpError(what + ": TLS handshake timed out after " + seconds_text(timeout_s) + " s",
                    true);
  }
  if (ec) throw HttpError(what + ": TLS handshake failed: " + ec.message(), false);
  return exchange(tls_stream, ioc, post, target, body, deadline, what, timeout_s);
}

// Sends the request and reads the answer on a connected (and, for TLS, handshaken) stream.
template <class Stream>
HttpResponse HttpClient::exchange(Stream& stream, asio::io_context& ioc, bool post,
                                  const std::string& target, const std::string& body,
                                  std::chrono::steady_clock::time_point deadline,
                                  const std::string& what, double timeout_s) {
  beast::error_code ec;
  http::request<http::string_body> req{post ? http::verb::post : http::verb::get,
                                       url_.prefix + target, 11};
  req.set(http::field::host, url_.host + ":" + url_.port);
  req.set(http::field::user_agent, "perseus-client");
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : headers_) req.set(name, value);
  if (post) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();

  beast::get_lowest_layer(stream).expires_at(deadline);
  http::async_write(stream, req, [&](const beast::error_code& e, std::size_t) { ec = e; });
  run(ioc);
  if (ec) throw transport_error(what, "sending the request", ec);

  // Piece by piece, header included: the size limit and the deadline are checked here after
  // every piece. (Boost 1.74's parser can let a Content-Length above its body_limit through, and
  // a peer that always has more bytes ready can starve the stream's own timer.)
  beast::flat_buffer buffer(kBodyLimit + 64 * 1024);
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  auto timed_out = [&] {
    throw HttpError(what + ": no answer within " + seconds_text(timeout_s) + " s", true);
  };
  auto too_large = [&] {
    throw HttpError(what + ": the answer is larger than the client's limit of " +
                        std::to_string(kBodyLimit) + " bytes",
                    false);
  };
  while (!parser.is_done()) {
    if (std::chrono::steady_clock::now() >= deadline) timed_out();
    http::async_read_some(stream, buffer, parser,
                          [&](const beast::error_code& e, std::size_t) { ec = e; });
    run(ioc);
    if (ec == beast::error::timeout) timed_out();
    if (ec == http::error::body_limit) too_large();
    if (ec) throw transport_error(what, "reading the answer", ec);
    if (!parser.is_header_done()) continue;
    auto length = parser.content_length();
    if ((length && *length > kBodyLimit) || parser.get().body().size() > kBodyLimit) too_large();
  }

  beast::error_code ignored;
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
  HttpResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  response.body = std::move(parser.get().body());
  for (const auto& field : parser.get()) {
    response.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return response;
}

std::string HttpResponse::header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (beast::iequals(key, name)) return value;
  }
  return "";
}

void HttpClient::set_header(const std::string& name, const std::string& value) {
  std::erase_if(headers_, [&](const auto& h) { return beast::iequals(h.first, name); });
  if (!value.empty()) headers_.emplace_back(name, value);
}

}  // namespace perseus::client
