// The server's event log: one line per event ("2026-11-23T10:00:00.123Z warn  what happened"),
// written to stderr or a file, filtered by level. Single-threaded use (the server's event loop);
// a message is written whole with one call, so lines from several processes on one file do not
// interleave.
#pragma once

#include <string>
#include <string_view>

namespace perseus::log {

enum class Level { debug, info, warn, error };

// Throws perseus::Error naming the bad level ("debug", "info", "warn" or "error").
Level parse_level(const std::string& name);
// Sends lines at `level` and above to `path` (appended; "" = stderr). Throws perseus::Error when
// the file cannot be opened.
void configure(Level level, const std::string& path = "");

void write(Level level, std::string_view message);
inline void debug(std::string_view m) {
  write(Level::debug, m);
}
inline void info(std::string_view m) {
  write(Level::info, m);
}
inline void warn(std::string_view m) {
  write(Level::warn, m);
}
inline void error(std::string_view m) {
  write(Level::error, m);
}

}  // namespace perseus::log
