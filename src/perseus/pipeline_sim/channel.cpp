#include "perseus/pipeline_sim/channel.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace perseus::pipeline_sim {

// Exact text form of a double (hexadecimal floating point), so virtual times cross process
// boundaries without rounding.
std::string exact(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", v);
  return text;
}

double parse_double(const std::string& text, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw Error(where + ": bad number '" + text + "'");
  }
  return v;
}

long parse_long(const std::string& text, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw Error(where + ": bad integer '" + text + "'");
  }
  return v;
}

// Splits "KIND a b c" into words (at most `max_words`; the last takes the rest of the line).
std::vector<std::string> words(const std::string& line, std::size_t max_words) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (out.size() + 1 < max_words) {
    std::size_t space = line.find(' ', pos);
    if (space == std::string::npos) break;
    out.push_back(line.substr(pos, space - pos));
    pos = space + 1;
  }
  out.push_back(line.substr(pos));
  return out;
}

std::string kind_of(const std::string& line) {
  return line.substr(0, line.find(' '));
}

// "KIND rest" -> rest, checking the kind.
std::string payload(const std::string& line, const std::string& kind, const std::string& peer) {
  if (line.rfind(kind, 0) != 0 || (line.size() > kind.size() && line[kind.size()] != ' ')) {
    throw Error("protocol error: expected '" + kind + "' from " + peer + ", got '" + line + "'");
  }
  return line.size() > kind.size() ? line.substr(kind.size() + 1) : "";
}

// ---- Channel ----

Channel::~Channel() {
  close();
}

Channel::Channel(Channel&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      peer_(std::move(other.peer_)),
      buffer_(std::move(other.buffer_)) {}

Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    peer_ = std::move(other.peer_);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void Channel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Channel::send(const std::string& line) {
  if (fd_ < 0) throw Error("no channel to " + peer_);
  std::string data = line + "\n";
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == EPIPE || errno == ECONNRESET) throw PeerClosed(peer_ + " closed the connection");
      throw Error("sending to " + peer_ + " failed: " + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
}

bool Channel::fill() {
  if (fd_ < 0) return false;
  char chunk[4096];
  while (true) {
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ECONNRESET) return false;
    if (n < 0) throw Error("reading from " + peer_ + " failed: " + std::strerror(errno));
    if (n == 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
}

bool Channel::next_line(std::string& line) {
  auto newline = buffer_.find('\n');
  if (newline == std::string::npos) return false;
  line = buffer_.substr(0, newline);
  buffer_.erase(0, newline + 1);
  return true;
}

std::string Channel::receive() {
  std::string line;
  while (!next_line(line)) {
    if (!fill()) throw PeerClosed(peer_ + " closed the connection");
  }
  return line;
}

std::pair<Channel, Channel> channel_pair(const std::string& peer_of_first,
                                         const std::string& peer_of_second) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(std::string("cannot create a socket pair: ") + std::strerror(errno));
  }
  return {Channel(fds[0], peer_of_first), Channel(fds[1], peer_of_second)};
}

}  // namespace perseus::pipeline_sim
