#include "perseus/util/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "perseus/util/error.hpp"

namespace perseus::log {
namespace {

Level threshold = Level::info;
int fd = STDERR_FILENO;

const char* name_of(Level level) {
  switch (level) {
    case Level::debug:
      return "debug";
    case Level::info:
      return "info ";
    case Level::warn:
      return "warn ";
    case Level::error:
      return "error";
  }
  return "?";
}

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(ms.count()));
  return text;
}

}  // namespace

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  throw Error("--log-level: unknown level '" + name + "' (expected debug, info, warn or error)");
}

void configure(Level level, const std::string& path) {
  threshold = level;
  if (path.empty()) return;
  int opened = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (opened < 0) throw Error("--log-file: cannot open '" + path + "': " + std::strerror(errno));
  if (fd != STDERR_FILENO) ::close(fd);
  fd = opened;
}

void write(Level level, std::string_view message) {
  if (level < threshold) return;
  std::string line = timestamp() + " " + name_of(level) + " ";
  line.append(message);
  line += '\n';
  for (std::size_t done = 0; done < line.size();) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n <= 0 && errno != EINTR) return;  // nowhere to log to: drop the line, keep serving
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

}  // namespace perseus::log
