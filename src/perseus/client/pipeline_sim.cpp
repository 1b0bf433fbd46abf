#include "perseus/client/pipeline_sim.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "perseus/client/sim_gpu.hpp"

namespace perseus::client::pipeline {

namespace {

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

const char* name_of(schedule::InstructionType type) {
  return type == schedule::InstructionType::kForward ? "forward" : "backward";
}

}  // namespace

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

// ---- one rank ----

RankSpec rank_spec(int rank, const schedule::Schedule& schedule, int num_pipelines,
                   const profile::Profile& profile, double blocking_power_w,
                   const OptimizerOptions& optimizer) {
  RankSpec spec;
  spec.stage = rank % schedule.num_stages;
  spec.pipeline = rank / schedule.num_stages;
  spec.num_stages = schedule.num_stages;
  spec.num_pipelines = num_pipelines;
  spec.instructions = schedule.stages[static_cast<std::size_t>(spec.stage)];
  spec.profile = profile;
  spec.blocking_power_w = blocking_power_w;
  spec.optimizer = optimizer;
  return spec;
}

void run_rank(const RankSpec& spec, RankLinks& links) {
  const int S = spec.num_stages;
  auto owned_gpu = std::make_unique<SimGpu>(
      spec.profile, SimGpuOptions{spec.stage, spec.blocking_power_w, false, 1.0});
  SimGpu* gpu = owned_gpu.get();

  OptimizerOptions o = spec.optimizer;
  o.rank = spec.rank();
  o.pp_rank = spec.stage;
  o.dp_rank = spec.pipeline;
  o.tp_rank = 0;
  o.pp_degree = S;
  o.dp_degree = spec.num_pipelines;
  o.tp_degree = 1;
  o.world_size = S * spec.num_pipelines;
  if (!o.share_job_id) {
    o.share_job_id = [&links](const std::string& id) {
      links.coordinator.send("JOB " + id);
      return payload(links.coordinator.receive(), "JOB", links.coordinator.peer());
    };
  }
  PipelineFrequencyOptimizer optimizer(std::move(o), std::move(owned_gpu));
  links.coordinator.send("READY " + optimizer.job_id());

  for (long i = 0;; ++i) {
    const bool final = optimizer.done();
    const int round = optimizer.round();
    optimizer.on_step_begin();
    for (const auto& inst : spec.instructions) {
      const bool forward = inst.type == schedule::InstructionType::kForward;
      Channel* input = forward ? (spec.stage > 0 ? &links.prev : nullptr)
                               : (spec.stage < S - 1 ? &links.next : nullptr);
      if (input != nullptr) {
        const std::string line = input->receive();
        auto w = words(line, 3);
        const std::string where = "message '" + line + "' from " + input->peer();
        if (w.size() != 3 || w[0] != (forward ? "F" : "B")) {
          throw Error("protocol error: expected the " + std::string(name_of(inst.type)) +
                      " of microbatch " + std::to_string(inst.microbatch) + " from " +
                      input->peer() + ", got '" + line + "'");
        }
        if (parse_long(w[1], where) != inst.microbatch) {
          throw Error("protocol error: expected microbatch " + std::to_string(inst.microbatch) +
                      " from " + input->peer() + ", got '" + line + "'");
        }
        gpu->wait_until(parse_double(w[2], where));
      }
      optimizer.on_instruction_begin(name_of(inst.type));
      optimizer.on_instruction_end(name_of(inst.type));
      Channel* output = forward ? (spec.stage < S - 1 ? &links.next : nullptr)
                                : (spec.stage > 0 ? &links.prev : nullptr);
      if (output != nullptr) {
        output->send(std::string(forward ? "F " : "B ") + std::to_string(inst.microbatch) + " " +
                     exact(gpu->now_s()));
      }
    }
    links.coordinator.send("END " + std::to_string(i) + " " + exact(gpu->now_s()));
    const std::string go = payload(links.coordinator.receive(), "GO", links.coordinator.peer());
    gpu->wait_until(parse_double(go, "GO from " + links.coordinator.peer()));
    optimizer.on_step_end();
    const IterationMeasurement& m = optimizer.iterations().back();
    links.coordinator.send("ITER " + std::to_string(i) + " " + exact(m.time_s) + " " +
                           exact(m.energy_j) + " " + std::to_string(round) + " " +
                           (final ? "1" : "0") + " " + (optimizer.degraded() ? "1" : "0") + " " +
                           optimizer.job_id());
    const std::string next = payload(links.coordinator.receive(), "NEXT", links.coordinator.peer());
    if (next == "0") break;
    if (next != "1") throw Error("protocol error: bad NEXT '" + next + "'");
  }
}

// ---- the coordinator ----

namespace {

struct Failure {
  int rank = -1;
  std::string message;
  int priority = 0;  // 3: the rank's own error, 2: exited silently, 1: peer closed
};

class Coordinator {
 public:
  Coordinator(std::vector<Channel>& ranks, const StopRule& stop, double timeout_s)
      : ranks_(ranks), stop_(stop), n_(static_cast<int>(ranks.size())) {
    start_ = std::chrono::steady_clock::now();
    if (timeout_s > 0.0) {
      deadline_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(timeout_s));
    }
    timeout_s_ = timeout_s;
    closed_.assign(ranks.size(), false);
    stopped_.assign(ranks.size(), false);
    job_shares_.assign(ranks.size(), std::nullopt);
    end_times_.assign(ranks.size(), std::nullopt);
    iter_.assign(ranks.size(), std::nullopt);
  }

  RunResult run() {
    if (n_ == 0) return result_;
    while (stopped_count_ < n_ || failure_) {
      if (failure_ && std::chrono::steady_clock::now() >= grace_end_) break;
      poll_once();
    }
    if (failure_) {
      throw RankFailure(failure_->rank, failure_->message, failure_->priority == 2);
    }
    return result_;
  }

 private:
  struct IterReport {
    double time_s, energy_j;
    int round;
    bool final, degraded;
  };

  void poll_once() {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int r = 0; r < n_; ++r) {
      if (closed_[r] || !ranks_[r].open()) continue;
      fds.push_back({ranks_[r].fd(), POLLIN, 0});
      which.push_back(r);
    }
    if (fds.empty()) {
      if (!failure_) fail(0, "every rank closed its channel before the run ended", 2);
      grace_end_ = std::chrono::steady_clock::now();
      return;
    }
    int wait_ms = -1;
    std::optional<std::chrono::steady_clock::time_point> until = deadline_;
    if (failure_) until = grace_end_;
    if (until) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      *until - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) {
        if (!failure_) timed_out();
        return;
      }
      wait_ms = static_cast<int>(std::min<long long>(left + 1, 60000));
    }
    int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR) return;
    if (ready < 0) throw Error(std::string("poll failed: ") + std::strerror(errno));
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const int r = which[k];
      bool more = ranks_[r].fill();
      std::string line;
      while (ranks_[r].next_line(line)) handle(r, line);
      if (!more) {
        closed_[r] = true;
        if (!stopped_[r] && errored_.count(r) == 0) fail(r, "exited before the run ended", 2);
      }
    }
  }

  std::string label(int r) const { return "rank " + std::to_string(r); }

  void fail(int r, const std::string& message, int priority) {
    if (!failure_) {
      grace_end_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    }
    // The most telling failure wins: a rank's own error over a silent exit over a consequence;
    // among equals the lowest rank (rank 0 registers the job: others fail because it did).
    if (!failure_ || priority > failure_->priority ||
        (priority == failure_->priority && r < failure_->rank)) {
      failure_ = Failure{r, message, priority};
    }
  }

  [[noreturn]] void timed_out() {
    std::string waiting;
    for (int r = 0; r < n_; ++r) {
      bool waiting_on =
          !stopped_[r] && !closed_[r] && !end_times_[r] && !iter_[r] && !job_shares_[r];
      if (waiting_on) waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
    }
    std::ostringstream out;
    out << "timed out after " << timeout_s_ << " s at iteration " << result_.iterations.size()
        << (waiting.empty() ? "" : " (waiting for ranks " + waiting + ")");
    throw Error(out.str());
  }

  void broadcast(const std::string& line) {
    for (int r = 0; r < n_; ++r) {
      if (closed_[r]) continue;
      try {
        ranks_[r].send(line);
      } catch (const Error& e) {
        fail(r, e.what(), 1);
      }
    }
  }

  template <typename T>
  static bool all(const std::vector<std::optional<T>>& v) {
    return std::all_of(v.begin(), v.end(), [](const auto& x) { return x.has_value(); });
  }

  void handle(int r, const std::string& line) {
    if (failure_) {
      if (kind_of(line) == "ERR") record_error(r, line);
      return;
    }
    const std::string kind = kind_of(line);
    const std::string where = "message '" + line + "' from " + label(r);
    try {
      if (kind == "ERR") {
        record_error(r, line);
      } else if (kind == "JOB") {
        job_shares_[r] = payload(line, "JOB", label(r));
        if (all(job_shares_)) {
          std::string id = *job_shares_[0];
          job_shares_.assign(ranks_.size(), std::nullopt);
          broadcast("JOB " + id);
        }
      } else if (kind == "READY") {
        if (r == 0) result_.job_id = payload(line, "READY", label(r));
      } else if (kind == "END") {
        auto w = words(line, 3);
        if (w.size() != 3) throw Error("protocol error in " + where);
        end_times_[r] = parse_double(w[2], where);
        if (all(end_times_)) {
          double latest = 0.0;
          for (const auto& t : end_times_) latest = std::max(latest, *t);
          end_times_.assign(ranks_.size(), std::nullopt);
          broadcast("GO " + exact(latest));
        }
      } else if (kind == "ITER") {
        auto w = words(line, 8);
        if (w.size() != 8) throw Error("protocol error in " + where);
        iter_[r] = IterReport{parse_double(w[2], where), parse_double(w[3], where),
                              static_cast<int>(parse_long(w[4], where)), w[5] == "1", w[6] == "1"};
        if (r == 0 && !w[7].empty()) result_.job_id = w[7];
        if (all(iter_)) finish_iteration();
      } else {
        throw Error("protocol error: unknown " + where);
      }
    } catch (const Error& e) {
      fail(r, e.what(), 3);
    }
  }

  void record_error(int r, const std::string& line) {
    errored_.insert(r);
    std::string text = payload(line, "ERR", label(r));
    const std::string peer_tag = "peer-closed ";
    bool consequence = text.rfind(peer_tag, 0) == 0;
    if (consequence) text = text.substr(peer_tag.size());
    fail(r, text, consequence ? 1 : 3);
  }

  void finish_iteration() {
    IterationRecord rec;
    rec.final = true;
    rec.round = iter_[0]->round;
    for (const auto& it : iter_) {
      rec.time_s = std::max(rec.time_s, it->time_s);
      rec.energy_j += it->energy_j;
      rec.final = rec.final && it->final;
      rec.degraded = rec.degraded || it->degraded;
    }
    iter_.assign(ranks_.size(), std::nullopt);
    result_.iterations.push_back(rec);
    const long count = static_cast<long>(result_.iterations.size());
    bool go_on;
    if (stop_.until_done) {
      final_run_ = rec.final ? final_run_ + 1 : 0;
      degraded_run_ = rec.degraded ? degraded_run_ + 1 : 0;
      result_.finished = final_run_ >= stop_.final_window;
      result_.gave_up = !result_.finished && stop_.give_up_degraded > 0 &&
                        degraded_run_ >= stop_.give_up_degraded;
      go_on = !result_.finished && !result_.gave_up && count < stop_.max_iterations;
    } else {
      go_on = count < stop_.iterations;
      result_.finished = !go_on;
    }
    broadcast(go_on ? "NEXT 1" : "NEXT 0");
    if (!go_on) {
      stopped_.assign(ranks_.size(), true);
      stopped_count_ = n_;
    }
  }

  std::vector<Channel>& ranks_;
  StopRule stop_;
  int n_;
  double timeout_s_ = 0.0;
  std::chrono::steady_clock::time_point start_, grace_end_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::vector<bool> closed_, stopped_;
  int stopped_count_ = 0;
  std::vector<std::optional<std::string>> job_shares_;
  std::vector<std::optional<double>> end_times_;
  std::vector<std::optional<IterReport>> iter_;
  std::set<int> errored_;
  std::optional<Failure> failure_;
  long final_run_ = 0, degraded_run_ = 0;
  RunResult result_;
};

}  // namespace

std::string run_rank_reporting(const RankSpec& spec, RankLinks& links) {
  std::string error;
  bool consequence = false;
  try {
    run_rank(spec, links);
    return "";
  } catch (const PeerClosed& e) {
    error = e.what();
    consequence = true;
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::replace(error.begin(), error.end(), '\n', ' ');
  if (error.empty()) error = "unknown error";
  try {
    if (links.coordinator.open()) {
      links.coordinator.send(std::string("ERR ") + (consequence ? "peer-closed " : "") + error);
    }
  } catch (const Error&) {  // the coordinator is gone too; nothing more to tell
  }
  return error;
}

RunResult coordinate(std::vector<Channel>& ranks, const StopRule& stop, double timeout_s) {
  if (stop.iterations < 1 || stop.final_window < 1 || stop.max_iterations < 1) {
    throw Error("simulation stop rule: iteration counts must be >= 1");
  }
  return Coordinator(ranks, stop, timeout_s).run();
}

}  // namespace perseus::client::pipeline
