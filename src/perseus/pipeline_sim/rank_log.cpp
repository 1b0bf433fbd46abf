#include "perseus/pipeline_sim/rank_log.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "perseus/util/error.hpp"

namespace perseus::pipeline_sim {

namespace {

constexpr const char* kPrefix = "perseus: warning: rank ";

// "1-3, 5" for ranks 1, 2, 3 and 5 (sorted).
std::string ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

void print(const std::vector<std::string>& lines) {
  for (const auto& line : lines) std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

std::vector<std::string> WarningGroups::add(const std::string& line) {
  const std::size_t prefix = std::strlen(kPrefix);
  std::size_t colon = line.find(": ", prefix);
  int rank = -1;
  if (line.compare(0, prefix, kPrefix) == 0 && colon != std::string::npos && colon > prefix &&
      std::all_of(line.begin() + static_cast<long>(prefix), line.begin() + static_cast<long>(colon),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    rank = std::atoi(line.c_str() + prefix);
  }
  if (rank < 0) {
    std::vector<std::string> out = flush();
    out.push_back(line);
    return out;
  }
  std::string message = line.substr(colon + 2);
  auto it =
      std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.message == message; });
  if (it == held_.end()) {
    held_.push_back({std::move(message), {rank}});
  } else {
    it->ranks.push_back(rank);
  }
  return {};
}

std::vector<std::string> WarningGroups::flush() {
  std::stable_sort(held_.begin(), held_.end(), [](const Held& a, const Held& b) {
    return *std::min_element(a.ranks.begin(), a.ranks.end()) <
           *std::min_element(b.ranks.begin(), b.ranks.end());
  });
  std::vector<std::string> out;
  for (const auto& h : held_) {
    out.push_back(std::string("perseus: warning: rank") + (h.ranks.size() > 1 ? "s " : " ") +
                  ranges(h.ranks) + ": " + h.message);
  }
  held_.clear();
  return out;
}

RankLog::RankLog() {
  int fds[2];
  if (pipe(fds) != 0) {
    throw Error(std::string("cannot make a pipe for the ranks' warnings: ") + std::strerror(errno));
  }
  read_end_ = fds[0];
  write_end_ = fds[1];
}

RankLog::~RankLog() {
  finish();
}

void RankLog::redirect_child() const {
  dup2(write_end_, STDERR_FILENO);
  close(write_end_);
  close(read_end_);
}

void RankLog::start() {
  close(write_end_);  // the children hold it now: end of stream once they all exited
  write_end_ = -1;
  thread_ = std::thread([this] { forward(); });
}

void RankLog::finish() {
  if (write_end_ >= 0) {
    close(write_end_);
    write_end_ = -1;
  }
  if (thread_.joinable()) thread_.join();
  if (read_end_ >= 0) {
    close(read_end_);
    read_end_ = -1;
  }
}

void RankLog::forward() {
  WarningGroups groups;
  std::string pending;
  char buffer[4096];
  for (;;) {
    pollfd p{read_end_, POLLIN, 0};
    const int timeout_ms = groups.holding() ? static_cast<int>(kQuietSeconds * 1000) : -1;
    const int ready = poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      print(groups.flush());
      continue;
    }
    const ssize_t n = read(read_end_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
      print(groups.add(pending.substr(0, end)));
      pending.erase(0, end + 1);
    }
  }
  if (!pending.empty()) print(groups.add(pending));
  print(groups.flush());
}

}  // namespace perseus::pipeline_sim
