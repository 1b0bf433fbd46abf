// The standard error of a simulated job's rank processes, as one readable stream: each child
// writes its warnings ("perseus: warning: rank N: MESSAGE") into a pipe, and a thread of the
// parent forwards them, collated. Warnings that arrive together (within kQuietSeconds of each
// other) are grouped by message, each group printed once for all its ranks ("ranks 1-3: ...")
// and the groups in order of their lowest rank, so the rank whose failure caused the others'
// comes first (rank 0 registers the job: "rank 0: HTTP 401 ..." before "ranks 1-3: rank 0 did not
// register the job"). Any other line is forwarded as it comes.
#pragma once

#include <string>
#include <thread>
#include <vector>

namespace perseus::pipeline_sim {

// Groups "perseus: warning: rank N: MESSAGE" lines; returns the lines to print.
class WarningGroups {
 public:
  // Takes one line (without its newline); a line that is not a rank's warning is returned at
  // once, after what was held (to keep the order), else held until flush().
  std::vector<std::string> add(const std::string& line);
  // What is held, grouped: one line per message, in order of its lowest rank.
  std::vector<std::string> flush();
  bool holding() const { return !held_.empty(); }

 private:
  struct Held {
    std::string message;
    std::vector<int> ranks;
  };
  std::vector<Held> held_;
};

class RankLog {
 public:
  // Seconds without a new warning after which the held ones are printed.
  static constexpr double kQuietSeconds = 0.3;

  // Makes the pipe; throws perseus::Error when it cannot.
  RankLog();
  ~RankLog();  // closes the ends, waits for the forwarding thread
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  // In a child: its standard error becomes the pipe.
  void redirect_child() const;
  // In the parent, once every child was spawned: starts forwarding (stderr), until every child
  // closed its end.
  void start();
  // Waits until every child closed its end and everything was printed.
  void finish();

 private:
  void forward();
  int read_end_ = -1, write_end_ = -1;
  std::thread thread_;
};

}  // namespace perseus::pipeline_sim
