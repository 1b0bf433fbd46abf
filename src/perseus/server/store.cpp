#include "perseus/server/store.hpp"

#include <sqlite3.h>

#include <map>

#include "perseus/util/error.hpp"

namespace perseus::server {
namespace {

constexpr const char* kFormat = "perseus.store/1";

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL UNIQUE, info TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '');
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

Store::Store(const std::string& path) : path_(path) {
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error("cannot open store " + path + ": " + message);
  }
  try {
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    exec(kSchema);
    Statement get(db_, "SELECT value FROM meta WHERE key = 'format'", path_);
    if (!get.step()) {
      write("INSERT INTO meta (key, value) VALUES ('format', ?1)", {kFormat}, {});
    } else if (get.text(0) != kFormat) {
      throw Error("store " + path + " has format '" + get.text(0) + "', expected " + kFormat);
    }
  } catch (...) {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
    throw;
  }
}

Store::~Store() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
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
  auto& stmt = statements_[sql];
  if (!stmt && sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    throw Error("store " + path_ + ": prepare failed: " + sqlite3_errmsg(db_));
  }
  int index = 1;
  for (const auto& t : text) {
    sqlite3_bind_text(stmt, index++, t.c_str(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
  }
  for (long v : ints) sqlite3_bind_int64(stmt, index++, v);
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_DONE) {
    throw StoreError("store " + path_ + ": write failed: " + sqlite3_errmsg(db_));
  }
}

void Store::add_job(const std::string& job_id, const nlohmann::json& info) {
  write("INSERT INTO jobs (job_id, info) VALUES (?1, ?2)", {job_id, info.dump()}, {});
}

void Store::add_rank(const std::string& job_id, int rank, const nlohmann::json& body) {
  write("INSERT INTO ranks (job_id, body, rank) VALUES (?1, ?2, ?3)", {job_id, body.dump()},
        {rank});
}

void Store::add_round(const std::string& job_id, int round, const nlohmann::json& plans) {
  write("INSERT INTO rounds (job_id, plans, round) VALUES (?1, ?2, ?3)", {job_id, plans.dump()},
        {round});
}

void Store::mark_released(const std::string& job_id, int round) {
  write("UPDATE rounds SET released = 1 WHERE job_id = ?1 AND round = ?2", {job_id}, {round});
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
  write("UPDATE jobs SET error = ?2 WHERE job_id = ?1", {job_id, error}, {});
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

// Every job (job_id empty) or one job, with its rows in order.
std::vector<StoredJob> Store::load_where(const std::string& job_id) const {
  const std::string filter = " WHERE (?1 = '' OR job_id = ?1) ORDER BY ";
  std::vector<StoredJob> jobs;
  std::map<std::string, std::size_t> index;
  auto query = [&](const std::string& sql, auto&& row) {
    Statement s(db_, sql.c_str(), path_);
    s.bind(1, job_id);
    while (s.step()) {
      auto it = index.find(s.text(0));
      if (it != index.end()) row(s, jobs[it->second]);
    }
  };
  {
    Statement s(db_, ("SELECT job_id, info, error FROM jobs" + filter + "seq").c_str(), path_);
    s.bind(1, job_id);
    while (s.step()) {
      index[s.text(0)] = jobs.size();
      jobs.push_back({s.text(0), parse_stored(s.text(1), path_), {}, {}, {}, {}, {}, s.text(2)});
    }
  }
  query("SELECT job_id, body FROM ranks" + filter + "seq",
        [&](Statement& s, StoredJob& job) { job.ranks.push_back(parse_stored(s.text(1), path_)); });
  query("SELECT job_id, plans, released FROM rounds" + filter + "round",
        [&](Statement& s, StoredJob& job) {
          job.rounds.push_back(parse_stored(s.text(1), path_));
          job.released.push_back(s.integer(2) != 0);
        });
  query("SELECT job_id, body, round FROM results" + filter + "seq",
        [&](Statement& s, StoredJob& job) {
          auto round = static_cast<std::size_t>(s.integer(2));
          if (job.results.size() <= round) job.results.resize(round + 1);
          job.results[round].push_back(parse_stored(s.text(1), path_));
        });
  query("SELECT job_id, body, round FROM stragglers" + filter + "seq", [&](Statement& s,
                                                                           StoredJob& job) {
    job.stragglers.emplace_back(static_cast<int>(s.integer(2)), parse_stored(s.text(1), path_));
  });
  return jobs;
}

}  // namespace perseus::server
