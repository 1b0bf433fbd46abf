#include "perseus/client/name_resolver.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "perseus/client/http_client.hpp"

namespace perseus::client {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct NameResolver::Lookup {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  Endpoints endpoints;
  std::string error;
};

NameResolver::NameResolver(std::string host, std::string port)
    : host_(std::move(host)), port_(std::move(port)) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host_, ec);
  const auto number = std::stoul(port_);
  if (!ec) {
    numeric_ = true;
    endpoints_.emplace_back(address, static_cast<unsigned short>(number));
  }
}

void NameResolver::start_lookup() {
  auto lookup = std::make_shared<Lookup>();
  lookup_ = lookup;
  // Detached: a lookup that outlives its client (or a request's deadline) only ends later.
  std::thread([lookup, host = host_, port = port_] {
    asio::io_context io;
    tcp::resolver resolver(io);
    boost::system::error_code ec;
    const auto results = resolver.resolve(host, port, ec);
    Endpoints found;
    for (const auto& entry : results) found.push_back(entry.endpoint());
    {
      std::lock_guard guard(lookup->mutex);
      lookup->error = ec ? ec.message() : found.empty() ? "no address" : "";
      lookup->endpoints = std::move(found);
      lookup->done = true;
    }
    lookup->finished.notify_all();
  }).detach();
}

bool NameResolver::take_finished(std::string& error) {
  std::lock_guard guard(lookup_->mutex);
  if (!lookup_->done) return false;
  error = lookup_->error;
  if (error.empty()) {
    endpoints_ = std::move(lookup_->endpoints);
    resolved_at_ = std::chrono::steady_clock::now();
  }
  lookup_.reset();
  return true;
}

NameResolver::Endpoints NameResolver::resolve(std::chrono::steady_clock::time_point deadline,
                                              const std::string& what) {
  if (numeric_) return endpoints_;
  std::string error;
  if (!endpoints_.empty()) {  // known: a refresh never makes a request wait
    if (lookup_) {
      take_finished(error);
    } else if (std::chrono::steady_clock::now() - resolved_at_ >= kCacheFor) {
      start_lookup();
    }
    return endpoints_;
  }
  if (!lookup_) start_lookup();
  {
    std::unique_lock lock(lookup_->mutex);
    const bool done =
        lookup_->finished.wait_until(lock, deadline, [this] { return lookup_->done; });
    if (!done) {
      throw HttpError(what + ": resolving " + host_ +
                          " is not done within the request's deadline; it goes on for the next "
                          "request",
                      true);
    }
  }
  take_finished(error);
  if (!error.empty()) throw HttpError(what + ": cannot resolve " + host_ + ": " + error, false);
  return endpoints_;
}

}  // namespace perseus::client
