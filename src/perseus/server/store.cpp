#include "perseus/server/store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {

// Writers wait this long for a lock; with the store locked to one server, only a stray process
// (a backup tool, an sqlite3 shell) can hold one.
constexpr int kBusyTimeoutMs = 200;
namespace {

constexpr const char* kFormat = "perseus.store/1";

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL UNIQUE, info TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '', active_at REAL NOT NULL DEFAULT 0,
  compacted TEXT NOT NULL DEFAULT '', measured TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS ranks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, rank INTEGER NOT NULL,
  body TEXT NOT NULL, UNIQUE (job_id, rank));
CREATE TABLE IF NOT EXISTS rounds (
  job_id TEXT NOT NULL, round INTEGER NOT NULL, plans TEXT NOT NULL,
  released INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job_id, round));
CREATE TABLE IF NOT EXISTS results (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, round INTEGER NOT NULL,
  rank INTEGER NOT NULL, body TEXT NOT NULL, UNIQUE (job_id, round, rank));
CREATE TABLE IF NOT EXISTS stragglers (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, round INTEGER NOT NULL,
  body TEXT NOT NULL);
)sql";

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int index, const std::string& text) {
    sqlite3_bind_text(stmt_, index, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void bind(int index, long value) { sqlite3_bind_int64(stmt_, index, value); }
  // True while a row is available.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail("step");
    return false;
  }
  std::string text(int column) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))) : "";
  }
  long integer(int column) const { return static_cast<long>(sqlite3_column_int64(stmt_, column)); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw Error("store " + path_ + ": " + what + " failed: " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string path_;
};

nlohmann::json parse_stored(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("store " + path + ": corrupt JSON in a stored row: " + e.what());
  }
}

}  // namespace

Store::Store(const std::string& path, Access access) : path_(path) {
  try {
    open(access);
  } catch (...) {
    close();
    throw;
  }
}

Store::~Store() {
  close();
}

void Store::open(Access access) {
  const bool file = path_ != ":memory:" && !path_.empty();
  if (file) check_not_empty();
  if (file && access == Access::exclusive) lock();
  if (file) check_not_truncated();
  if (sqlite3_open(path_.c_str(), &db_) != SQLITE_OK) {
    throw Error("cannot open store " + path_ + ": " +
                (db_ ? sqlite3_errmsg(db_) : "out of memory"));
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, kMaxStoredValueBytes);
  quick_check();
  exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  exec(kSchema);
  add_missing_columns();
  Statement get(db_, "SELECT value FROM meta WHERE key = 'format'", path_);
  if (!get.step()) {
    write("INSERT INTO meta (key, value) VALUES ('format', ?1)", {kFormat}, {});
  } else if (get.text(0) != kFormat) {
    throw Error("store " + path_ + " has format '" + get.text(0) + "', expected " + kFormat);
  }
}

// Releases everything open() took, also after it failed half-way.
void Store::close() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  statements_.clear();
  sqlite3_close(db_);
  db_ = nullptr;
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

// The database file itself, held with flock for the process's life: a second name for it (a
// symlink, a hard link) reaches the same inode, so the same lock. (flock and the POSIX locks
// SQLite takes do not meet on Linux; the descriptor stays open until SQLite has closed the
// file, so closing it cannot drop SQLite's locks.) Who holds it is noted in
// `<resolved path>.lock`, for the message.
void Store::lock() {
  lock_fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw Error("cannot open store " + path_ + ": " + std::strerror(errno));
  char* resolved = ::realpath(path_.c_str(), nullptr);
  const std::string note_path = std::string(resolved ? resolved : path_.c_str()) + ".lock";
  std::free(resolved);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string who = "unknown";
    if (std::ifstream note(note_path); note && std::getline(note, who) && who.empty()) {
      who = "unknown";
    }
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw Error("store " + path_ + " is in use by another server (" + who +
                "); stop it or use another --store");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // The note is only for the message naming the holder: the lock holds without it.
  std::ofstream(note_path, std::ios::trunc) << "pid " << ::getpid() << " on " << host << "\n";
}

// An existing, empty store file with no write-ahead log to replay: SQLite would start it empty,
// silently losing every job it held.
void Store::check_not_empty() const {
  struct stat db {
  }, wal{};
  const std::string wal_path = path_ + "-wal";
  if (::stat(path_.c_str(), &db) == 0 && db.st_size == 0 &&
      (::stat(wal_path.c_str(), &wal) != 0 || wal.st_size == 0)) {
    throw Error("store " + path_ +
                " is an empty file: a store that lost its contents (restore it from a backup), "
                "or not a store; remove it to start a new store there");
  }
}

// See kPresenceCheckPeriod.
void Store::check_present() {
  if (!lost_.empty()) throw StoreError(lost_);
  if (lock_fd_ < 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_presence_check_) return;
  next_presence_check_ = now + kPresenceCheckPeriod;
  struct stat opened {
  }, named{}, wal{};
  const std::string wal_path = path_ + "-wal";
  std::string why;
  if (::fstat(lock_fd_, &opened) != 0 || opened.st_nlink == 0 ||
      ::stat(path_.c_str(), &named) != 0 || named.st_ino != opened.st_ino ||
      named.st_dev != opened.st_dev) {
    why = "its database file was removed or replaced";
  } else if (::stat(wal_path.c_str(), &wal) == 0) {
    if (wal_inode_ != 0 && wal.st_ino != wal_inode_) why = "its write-ahead log was replaced";
    wal_inode_ = wal.st_ino;
  } else if (wal_inode_ != 0) {
    why = "its write-ahead log " + wal_path + " was removed";
  }
  if (why.empty()) return;
  lost_ = "store " + path_ + ": " + why +
          " while serving; nothing more is acknowledged: stop the server, restore the store, "
          "start it again";
  log::error(lost_);
  throw StoreError(lost_);
}

void Store::check_not_truncated() const {
  struct stat db {
  }, wal{};
  const std::string wal_path = path_ + "-wal";
  if (::stat(path_.c_str(), &db) == 0 && db.st_size == 0 && ::stat(wal_path.c_str(), &wal) == 0 &&
      wal.st_size > 0) {
    throw Error("store " + path_ + " is an empty file but " + wal_path + " holds " +
                std::to_string(wal.st_size) +
                " bytes: the database file was truncated or lost; restore it from a backup, "
                "or move both files away to start an empty store");
  }
}

// Stores made before a column of the jobs table existed get it, with its default.
void Store::add_missing_columns() {
  for (auto [name, definition] : {std::pair{"active_at", "REAL NOT NULL DEFAULT 0"},
                                  std::pair{"compacted", "TEXT NOT NULL DEFAULT ''"},
                                  std::pair{"measured", "TEXT NOT NULL DEFAULT ''"}}) {
    Statement column(db_, "SELECT 1 FROM pragma_table_info('jobs') WHERE name = ?1", path_);
    column.bind(1, std::string(name));
    if (!column.step()) {
      exec(std::string("ALTER TABLE jobs ADD COLUMN ") + name + " " + definition);
    }
  }
}

// One line: SQLite's first problem and how many more it found.
void Store::quick_check() const {
  Statement check(db_, "PRAGMA quick_check", path_);
  std::vector<std::string> problems;
  while (check.step()) {
    std::istringstream rows(check.text(0));
    for (std::string line; std::getline(rows, line);) {
      if (line != "ok" && line.rfind("***", 0) != 0 && !line.empty()) problems.push_back(line);
    }
  }
  if (problems.empty()) return;
  throw Error(
      "store " + path_ + " fails SQLite's quick_check: " + problems.front() +
      (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : ""));
}

void Store::exec(const std::string& sql) const {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw Error("store " + path_ + " is not a usable Perseus store: " + text);
  }
}

// Binds the text parameters first (?1, ?2, ...), then the integers, and runs the statement.
// Statements are prepared once and reused (writes are the server's hot path).
void Store::write(const char* sql, const std::vector<std::string>& text,
                  const std::vector<long>& ints) {
  check_present();
  auto& stmt = statements_[sql];
  if (!stmt && sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    throw StoreError("store " + path_ + ": prepare failed: " + sqlite3_errmsg(db_));
  }
  // Every bind is checked: a refused one leaves its parameter NULL, and the row would be stored
  // without it.
  int index = 1;
  auto bound = [&](int rc, std::size_t bytes) {
    if (rc == SQLITE_OK) return;
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    throw StoreError("store " + path_ + ": a value of " + std::to_string(bytes) +
                     " bytes cannot be stored (" + sqlite3_errstr(rc) + "; at most " +
                     std::to_string(kMaxStoredValueBytes) + " bytes)");
  };
  for (const auto& t : text) {
    const int size = t.size() > static_cast<std::size_t>(kMaxStoredValueBytes)
                         ? kMaxStoredValueBytes + 1
                         : static_cast<int>(t.size());
    bound(sqlite3_bind_text(stmt, index++, t.c_str(), size, SQLITE_TRANSIENT), t.size());
  }
  for (long v : ints) bound(sqlite3_bind_int64(stmt, index++, v), sizeof v);
  auto start = std::chrono::steady_clock::now();
  int rc = sqlite3_step(stmt);
  write_seconds_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_DONE) {
    throw StoreError("store " + path_ + ": write failed: " + sqlite3_errmsg(db_));
  }
}

namespace {

// Now as the store keeps activity times: seconds since the Unix epoch, to the millisecond.
long now_ms() {
  using namespace std::chrono;
  return static_cast<long>(
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

}  // namespace

void Store::touch(const std::string& job_id) {
  write("UPDATE jobs SET active_at = ?2 / 1000.0 WHERE job_id = ?1", {job_id}, {now_ms()});
}

void Store::add_job(const std::string& job_id, const nlohmann::json& info) {
  write("INSERT INTO jobs (job_id, info, active_at) VALUES (?1, ?2, ?3 / 1000.0)",
        {job_id, info.dump()}, {now_ms()});
}

void Store::add_rank(const std::string& job_id, int rank, const nlohmann::json& body) {
  write("INSERT INTO ranks (job_id, body, rank) VALUES (?1, ?2, ?3)", {job_id, body.dump()},
        {rank});
}

void Store::add_round(const std::string& job_id, int round, const std::string& plans) {
  write("INSERT INTO rounds (job_id, plans, round) VALUES (?1, ?2, ?3)", {job_id, plans}, {round});
}

void Store::mark_released(const std::string& job_id, int round) {
  write("UPDATE rounds SET released = 1 WHERE job_id = ?1 AND round = ?2", {job_id}, {round});
  touch(job_id);
}

void Store::transaction(const std::function<void()>& writes) {
  write("BEGIN IMMEDIATE", {}, {});
  try {
    writes();
    write("COMMIT", {}, {});
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // the failure is what it says
    throw;
  }
}

void Store::delete_job(const std::string& job_id) {
  transaction([&] {
    for (const char* sql :
         {"DELETE FROM results WHERE job_id = ?1", "DELETE FROM stragglers WHERE job_id = ?1",
          "DELETE FROM rounds WHERE job_id = ?1", "DELETE FROM ranks WHERE job_id = ?1",
          "DELETE FROM jobs WHERE job_id = ?1"}) {
      write(sql, {job_id}, {});
    }
  });
}

void Store::compact(const std::string& job_id, int first_round,
                    const nlohmann::json& measurements) {
  const nlohmann::json compacted = {{"first_round", first_round}};
  transaction([&] {
    write("DELETE FROM results WHERE job_id = ?1 AND round < ?2", {job_id}, {first_round});
    write("DELETE FROM rounds WHERE job_id = ?1 AND round < ?2", {job_id}, {first_round});
    write("UPDATE jobs SET compacted = ?2, measured = ?3 WHERE job_id = ?1",
          {job_id, compacted.dump(), measurements.dump()}, {});
  });
}

void Store::set_measurements(const std::string& job_id, const nlohmann::json& measurements) {
  write("UPDATE jobs SET measured = ?2 WHERE job_id = ?1", {job_id, measurements.dump()}, {});
}

void Store::add_result(const std::string& job_id, int round, int rank, const nlohmann::json& body) {
  write("INSERT INTO results (job_id, body, round, rank) VALUES (?1, ?2, ?3, ?4)",
        {job_id, body.dump()}, {round, rank});
}

void Store::add_straggler(const std::string& job_id, int round, const nlohmann::json& body) {
  write("INSERT INTO stragglers (job_id, body, round) VALUES (?1, ?2, ?3)", {job_id, body.dump()},
        {round});
}

void Store::set_error(const std::string& job_id, const std::string& error) {
  write("UPDATE jobs SET error = ?2, active_at = ?3 / 1000.0 WHERE job_id = ?1", {job_id, error},
        {now_ms()});
}

bool Store::has_job(const std::string& job_id) const {
  Statement s(db_, "SELECT 1 FROM jobs WHERE job_id = ?1", path_);
  s.bind(1, job_id);
  return s.step();
}

std::vector<StoredJob> Store::load() const {
  return load_where("");
}

StoredJob Store::load(const std::string& job_id) const {
  auto jobs = load_where(job_id);
  if (jobs.empty()) throw Error("store " + path_ + " has no job '" + job_id + "'");
  return jobs.front();
}

namespace {

// Reads every stored job (job_id empty) or one, then their rows table by table, in order. A row
// that cannot be read marks its job unreadable (with the first reason) instead of stopping the
// load.
class JobLoader {
 public:
  JobLoader(sqlite3* db, const std::string& path, const std::string& job_id)
      : db_(db), path_(path), job_id_(job_id) {}

  void read_jobs() {
    Statement s(
        db_, select("job_id, info, error, active_at, compacted, measured FROM jobs", "seq").c_str(),
        path_);
    s.bind(1, job_id_);
    while (s.step()) {
      index_[s.text(0)] = jobs_.size();
      StoredJob job;
      job.job_id = s.text(0);
      job.error = s.text(2);
      job.active_at = s.real(3);
      try {
        job.info = parse_stored(s.text(1), path_);
        if (!s.text(4).empty()) {
          const nlohmann::json compacted = parse_stored(s.text(4), path_);
          compacted.at("first_round").get_to(job.first_round);
          // stores written before the measurements had a column of their own
          if (compacted.contains("measurements")) job.measurements = compacted["measurements"];
        }
        if (!s.text(5).empty()) job.measurements = parse_stored(s.text(5), path_);
      } catch (const std::exception& e) {
        job.unreadable = std::string("jobs row: ") + e.what();
      }
      jobs_.push_back(std::move(job));
    }
  }

  // Runs `row` on every row of `table` that belongs to a loaded job.
  template <typename Row>
  void read_rows(const std::string& table, const std::string& columns, const char* order,
                 Row&& row) {
    Statement s(db_, select("job_id, " + columns + " FROM " + table, order).c_str(), path_);
    s.bind(1, job_id_);
    while (s.step()) {
      auto it = index_.find(s.text(0));
      if (it == index_.end()) continue;
      StoredJob& job = jobs_[it->second];
      try {
        row(s, job);
      } catch (const std::exception& e) {
        if (job.unreadable.empty()) job.unreadable = table + " row: " + e.what();
      }
    }
  }

  nlohmann::json body(const Statement& s) const { return parse_stored(s.text(1), path_); }
  std::vector<StoredJob> take() { return std::move(jobs_); }

 private:
  // The query of `what` (columns FROM table) for the loaded jobs; ?1 is the job id or ''.
  static std::string select(const std::string& what, const char* order) {
    return "SELECT " + what + " WHERE (?1 = '' OR job_id = ?1) ORDER BY " + order;
  }

  sqlite3* db_;
  const std::string& path_;
  const std::string& job_id_;
  std::vector<StoredJob> jobs_;
  std::map<std::string, std::size_t> index_;
};

// The round (column 2) a result or straggler report belongs to; a result's must be stored (a
// straggler report's may be before the stored ones).
long round_of(Statement& s, const StoredJob& job, bool stored) {
  long round = s.integer(2);
  const long last = job.first_round + static_cast<long>(job.rounds.size()) - 1;
  if (round < (stored ? job.first_round : 0) || round > last) {
    throw Error("round " + std::to_string(round) + " is not a stored round (" +
                std::to_string(job.first_round) + ".." + std::to_string(last) + ")");
  }
  return round;
}

}  // namespace

// Every job (job_id empty) or one job, with its rows in order.
std::vector<StoredJob> Store::load_where(const std::string& job_id) const {
  JobLoader load(db_, path_, job_id);
  load.read_jobs();
  load.read_rows("ranks", "body", "seq",
                 [&](Statement& s, StoredJob& job) { job.ranks.push_back(load.body(s)); });
  load.read_rows("rounds", "plans, released, round", "round", [&](Statement& s, StoredJob& job) {
    const long expected = job.first_round + static_cast<long>(job.rounds.size());
    if (s.integer(3) != expected) {
      throw Error("round " + std::to_string(s.integer(3)) + " where round " +
                  std::to_string(expected) + " was expected");
    }
    job.rounds.push_back(load.body(s));
    job.released.push_back(s.integer(2) != 0);
  });
  load.read_rows("results", "body, round", "seq", [&](Statement& s, StoredJob& job) {
    const auto index = static_cast<std::size_t>(round_of(s, job, true) - job.first_round);
    if (job.results.size() <= index) job.results.resize(index + 1);
    job.results[index].push_back(load.body(s));
  });
  load.read_rows("stragglers", "body, round", "seq", [&](Statement& s, StoredJob& job) {
    const auto round = round_of(s, job, false);
    job.stragglers.emplace_back(static_cast<int>(round), load.body(s));
  });
  return load.take();
}

}  // namespace perseus::server
