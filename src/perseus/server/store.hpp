// The server's persistent store (architecture section 7): jobs, ranks, rounds (the plans served),
// results and straggler reports in one SQLite file, so a server restarted on the same store
// (even after SIGKILL) loses no job, plan or acknowledged result. Every write is committed before
// the request that caused it is answered (WAL journal: a committed write survives a crash of the
// process).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perseus/server/metrics.hpp"
#include "perseus/util/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace perseus::server {

// A write to the store failed (disk full, I/O error, lock held by another process): nothing of
// the request that caused it was acknowledged, so the peer may retry it.
class StoreError : public Error {
 public:
  using Error::Error;
};

// One job as stored: everything needed to rebuild its state.
struct StoredJob {
  std::string job_id;
  nlohmann::json info;                // wire::JobInfo as JSON (with the effective scheduler)
  std::vector<nlohmann::json> ranks;  // wire::RankInfo bodies, in registration order
  // The rounds before it are no longer stored (Store::compact), only `measurements`.
  int first_round = 0;
  nlohmann::json measurements;         // JobMeasurements as last stored (null: never)
  std::vector<nlohmann::json> rounds;  // per round from first_round: the Round as JSON
  std::vector<bool> released;          // ... its barrier was released to the ranks
  // results[i] = ProfilingResult bodies of round first_round + i, in arrival order
  std::vector<std::vector<nlohmann::json>> results;
  // (round during which it arrived, report body), in arrival order; all of them, also those of
  // rounds before first_round
  std::vector<std::pair<int, nlohmann::json>> stragglers;
  std::string error;  // non-empty: the job failed with this message
  // Non-empty: some of its rows cannot be read (corrupt JSON, a round out of range); says which.
  // The other jobs of the store load as usual.
  std::string unreadable;
  // When the job last made progress the store saw (registered, a round released, failed), in
  // seconds since the Unix epoch; 0 when not known (a store written before it was kept).
  double active_at = 0;
};

// The largest value (a JSON row) the store takes: requests are at most 1 MiB and a served
// schedule 4 MiB, so anything larger is refused as a failed write (StoreError) rather than
// stored (SQLite's own limit, 1 GB, stored such a value as NULL without a word).
inline constexpr int kMaxStoredValueBytes = 64 << 20;
inline constexpr std::chrono::milliseconds kPresenceCheckPeriod{100};

class Store {
 public:
  // Who opens the store: the server holds an exclusive lock on it (`<path>.lock`, released when
  // the process ends, also on SIGKILL), so a second server on the same store refuses to start
  // and names the holder; a reader (export-job) takes no lock.
  enum class Access { exclusive, reader };

  // Opens (creating if needed) the store at `path`; ":memory:" for a throwaway store. Checks it
  // with SQLite's quick_check. Throws perseus::Error naming the file when it cannot be opened,
  // is locked by another server, fails the check, is not a Perseus store, is an empty file
  // (a store that lost its contents: never started empty; a path that does not exist makes a
  // new store), or is missing or empty beside a non-empty write-ahead log. While serving, a
  // write finds out (within kPresenceCheckPeriod) when the database file or its log was removed
  // or replaced, and from then on every write fails (StoreError), so nothing more is
  // acknowledged that a restart would not find.
  explicit Store(const std::string& path, Access access = Access::exclusive);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void add_job(const std::string& job_id, const nlohmann::json& info);
  void add_rank(const std::string& job_id, int rank, const nlohmann::json& body);
  // `plans`: the round as JSON text (round_to_json, dumped).
  void add_round(const std::string& job_id, int round, const std::string& plans);
  void mark_released(const std::string& job_id, int round);
  void add_result(const std::string& job_id, int round, int rank, const nlohmann::json& body);
  void add_straggler(const std::string& job_id, int round, const nlohmann::json& body);
  void set_error(const std::string& job_id, const std::string& error);
  // Removes the job and every row of it, in one transaction.
  void delete_job(const std::string& job_id);
  // Removes the job's rounds before `first_round` and their results, keeping `measurements`
  // (what they measured) in their place, in one transaction; straggler reports stay.
  void compact(const std::string& job_id, int first_round, const nlohmann::json& measurements);
  // What the job measured so far (JobMeasurements as JSON), replacing what was stored before.
  void set_measurements(const std::string& job_id, const nlohmann::json& measurements);

  bool has_job(const std::string& job_id) const;
  // Seconds each write took (the commit included), since the store was opened.
  const Histogram& write_latency() const { return write_seconds_; }
  // Every job, oldest first.
  std::vector<StoredJob> load() const;
  // One job; throws perseus::Error when it is not in the store.
  StoredJob load(const std::string& job_id) const;

 private:
  void exec(const std::string& sql) const;
  void add_missing_columns();
  // Runs `writes` in one transaction (rolled back when one throws).
  void transaction(const std::function<void()>& writes);
  // Records now as the job's activity time (StoredJob::active_at).
  void touch(const std::string& job_id);
  void write(const char* sql, const std::vector<std::string>& text, const std::vector<long>& ints);
  Histogram write_seconds_{latency_bounds()};
  std::vector<StoredJob> load_where(const std::string& job_id) const;
  void open(Access access);
  void close();
  void lock();
  void check_not_truncated() const;
  void check_not_empty() const;
  void check_present();
  void quick_check() const;
  std::string path_;
  int lock_fd_ = -1;  // the database file, as opened (its lock)
  // Whether the database file and its write-ahead log are still the ones opened, checked at most
  // this often; once they are not, `lost_` says so and every write fails.
  std::chrono::steady_clock::time_point next_presence_check_{};
  ino_t wal_inode_ = 0;  // the -wal file, once seen
  std::string lost_;
  sqlite3* db_ = nullptr;
  std::map<const char*, sqlite3_stmt*> statements_;  // prepared writes, by SQL text address
};

}  // namespace perseus::server
