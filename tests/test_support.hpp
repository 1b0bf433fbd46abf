// Helpers shared by the unit tests: the path of the shared reference data (tests that need it
// skip with a clear message when it is missing), temporary directories, text files and lines,
// and the message of an expected error.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "perseus/util/error.hpp"

namespace perseus::test {

// ../shared/data next to the source tree, or $PERSEUS_SHARED_DATA when set.
inline std::filesystem::path shared_data() {
  const char* env = std::getenv("PERSEUS_SHARED_DATA");
  return env != nullptr && *env != '\0' ? std::filesystem::path(env)
                                        : std::filesystem::path(PERSEUS_SHARED_DATA);
}

// Skips the current test when the shared data folder (../shared/data) is absent.
#define PERSEUS_REQUIRE_SHARED_DATA()                                                \
  do {                                                                               \
    if (!std::filesystem::exists(::perseus::test::shared_data() / "perseus")) {      \
      GTEST_SKIP() << "shared data not found at " << ::perseus::test::shared_data(); \
    }                                                                                \
  } while (0)

// A fresh temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("perseus-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

// Writes `text` to `path` as is (a test's input file).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// The whole file at `path` ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The lines of `text`, without their line ends.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `lines`, each ended by "\n".
inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The message of the perseus::Error that `f` throws ("" and a failure if none). Any other
// exception type escapes and fails the test.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ::perseus::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no perseus::Error thrown";
  return "";
}

}  // namespace perseus::test

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)
