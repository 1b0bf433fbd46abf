#include "perseus/pipeline_sim/coordinator.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "perseus/util/steady_time.hpp"

namespace perseus::pipeline_sim {

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
      deadline_ = start_ + steady_duration(timeout_s);
    }
    timeout_s_ = timeout_s;
    closed_.assign(ranks.size(), false);
    stopped_.assign(ranks.size(), false);
    job_shares_.assign(ranks.size(), std::nullopt);
    end_times_.assign(ranks.size(), std::nullopt);
    iter_.assign(ranks.size(), std::nullopt);
    measured_.resize(ranks.size());
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
    add_measured_energy();
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
      } else if (kind == "MEASURED") {
        record_measured(r, line, where);
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

  // "MEASURED first J..." ("-": not measured): rank r's counter-measured iteration energies.
  void record_measured(int r, const std::string& line, const std::string& where) {
    const auto w = words(line, std::string::npos);
    if (w.size() < 3) throw Error("protocol error in " + where);
    const auto first = static_cast<std::size_t>(parse_long(w[1], where));
    auto& energies = measured_[static_cast<std::size_t>(r)];
    if (first != energies.size()) throw Error("protocol error (iterations skipped) in " + where);
    for (std::size_t i = 2; i < w.size(); ++i) {
      energies.push_back(w[i] == "-" ? std::nullopt
                                     : std::optional<double>(parse_double(w[i], where)));
    }
  }

  // Each iteration's energy as every rank's counter measured it, where all did.
  void add_measured_energy() {
    for (std::size_t i = 0; i < result_.iterations.size(); ++i) {
      double sum = 0.0;
      bool all = true;
      for (const auto& energies : measured_) {
        all = all && i < energies.size() && energies[i];
        if (all) sum += *energies[i];
      }
      if (all) result_.iterations[i].measured_energy_j = sum;
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
  std::vector<std::vector<std::optional<double>>> measured_;  // per rank, per iteration
  std::set<int> errored_;
  std::optional<Failure> failure_;
  long final_run_ = 0, degraded_run_ = 0;
  RunResult result_;
};

}  // namespace

RunResult coordinate(std::vector<Channel>& ranks, const StopRule& stop, double timeout_s) {
  if (stop.iterations < 1 || stop.final_window < 1 || stop.max_iterations < 1) {
    throw Error("simulation stop rule: iteration counts must be >= 1");
  }
  return Coordinator(ranks, stop, timeout_s).run();
}

}  // namespace perseus::pipeline_sim
