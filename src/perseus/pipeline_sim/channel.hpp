// The pipeline simulator's transport (perseus/pipeline_sim/rank.hpp): connected stream sockets
// carrying text lines between ranks and the coordinator, and the line protocol's helpers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/util/error.hpp"

namespace perseus::pipeline_sim {

// The peer closed its end (it failed or exited): usually the consequence of another failure.
class PeerClosed : public Error {
 public:
  using Error::Error;
};

// One end of a connected stream socket carrying text lines. Owns the descriptor.
class Channel {
 public:
  Channel() = default;
  Channel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~Channel();
  Channel(Channel&& other) noexcept;
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }
  // Sends one line (no '\n' inside). Throws PeerClosed when the peer is gone.
  void send(const std::string& line);
  // Blocks for the next line. Throws PeerClosed at end of stream.
  std::string receive();
  // For poll() loops: reads what is available once; false at end of stream.
  bool fill();
  // Takes a complete buffered line, if any.
  bool next_line(std::string& line);
  void close();

 private:
  int fd_ = -1;
  std::string peer_;
  std::string buffer_;
};

// A connected pair of channels (socketpair); throws perseus::Error when the OS refuses.
std::pair<Channel, Channel> channel_pair(const std::string& peer_of_first,
                                         const std::string& peer_of_second);

// Exact text form of a double (hexadecimal floating point), so virtual times cross process
// boundaries without rounding.
std::string exact(double v);
// Parse a message field; throw perseus::Error naming `where` on malformed text.
double parse_double(const std::string& text, const std::string& where);
long parse_long(const std::string& text, const std::string& where);
// Splits "KIND a b c" into words (at most `max_words`; the last takes the rest of the line).
std::vector<std::string> words(const std::string& line, std::size_t max_words);
// The first word of a line.
std::string kind_of(const std::string& line);
// "KIND rest" -> rest, checking the kind; throws perseus::Error naming `peer` otherwise.
std::string payload(const std::string& line, const std::string& kind, const std::string& peer);

}  // namespace perseus::pipeline_sim
