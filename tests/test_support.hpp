// Helpers shared by the unit tests: the path of the shared reference data (tests that need it
// skip with a clear message when it is missing) and temporary directories.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

namespace perseus::test {

inline std::filesystem::path shared_data() { return PERSEUS_SHARED_DATA; }

// Skips the current test when the shared data folder (../shared/data) is absent.
#define PERSEUS_REQUIRE_SHARED_DATA()                                                   \
  do {                                                                                   \
    if (!std::filesystem::exists(::perseus::test::shared_data() / "perseus")) {          \
      GTEST_SKIP() << "shared data not found at " << ::perseus::test::shared_data();     \
    }                                                                                    \
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

}  // namespace perseus::test
