// A small synchronous HTTP/1.1 client for the control-plane protocol (architecture section 7), on
// Boost.Beast: one connection per request ("Connection: close"), one deadline per request that
// covers resolving the host's name (NameResolver: kept, and never past the deadline), connecting
// (itself at most the connect timeout), sending and reading the answer, and an
// answer size limit (4 MiB) enforced while reading, so no server can hold or fill the caller.
// http and https (Boost.Asio SSL on OpenSSL: the server's certificate and name are verified).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "perseus/util/error.hpp"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}
}  // namespace boost::asio

namespace perseus::client {

class NameResolver;

// "http[s]://host[:port][/prefix]" split into its parts. Hosts may be names, IPv4 addresses or
// bracketed IPv6 addresses ("[::1]"); the port defaults to 80 (443 for https).
struct HttpUrl {
  bool tls = false;    // https://
  std::string host;    // without brackets
  std::string port;    // decimal
  std::string prefix;  // path prefix without a trailing '/' ("" for none)
};

// Throws perseus::Error naming the URL and what is wrong with it.
HttpUrl parse_http_url(const std::string& url);

// A transport failure: the server could not be reached, the connection broke, a timeout passed,
// or the answer was not HTTP. The message names the request ("POST http://h:p/path: ...").
class HttpError : public Error {
 public:
  HttpError(const std::string& message, bool timed_out) : Error(message), timed_out_(timed_out) {}
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  bool ok() const { return status >= 200 && status < 300; }
  // The value of header `name` (case-insensitive); "" when absent.
  std::string header(const std::string& name) const;
};

class HttpClient {
 public:
  // Throws perseus::Error for a malformed URL, a non-positive timeout or an unusable CA file.
  // https URLs verify the server's certificate against `ca_file` (PEM; empty: the system's
  // trusted certificates) and its name against the URL's host.
  explicit HttpClient(const std::string& base_url, double connect_timeout_s = 5.0,
                      const std::string& ca_file = "");

  // `target` is the path and query ("/schedule/x?rank=0"), appended to the URL's prefix.
  // `timeout_s` bounds the whole exchange: connecting, sending and reading the answer.
  // Returns any HTTP answer (also 4xx/5xx); throws HttpError for transport failures.
  HttpResponse get(const std::string& target, double timeout_s);
  HttpResponse post(const std::string& target, const std::string& json_body, double timeout_s);

  const std::string& base_url() const { return base_url_; }
  // Sends `name: value` with every later request (an empty value removes it).
  void set_header(const std::string& name, const std::string& value);
  // "http://host:port" + prefix + target, as used in messages.
  std::string url_of(const std::string& target) const;

 private:
  HttpResponse request(bool post, const std::string& target, const std::string& body,
                       double timeout_s);
  template <class Stream>
  HttpResponse exchange(Stream& stream, boost::asio::io_context& ioc, bool post,
                        const std::string& target, const std::string& body,
                        std::chrono::steady_clock::time_point deadline, const std::string& what,
                        double timeout_s);

  std::string base_url_;
  HttpUrl url_;
  double connect_timeout_s_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // https only
  std::shared_ptr<NameResolver> resolver_;          // the host's addresses, kept
};

}  // namespace perseus::client
