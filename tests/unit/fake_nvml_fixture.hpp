// Shared by the tests that load the fake libnvidia-ml.so.1 through the real dlopen path
// (tests/fake_nvml): environment variables set for one scope, the fake's call log, the Nvml
// fixture (CUDA_VISIBLE_DEVICES unset, a counter that refreshes every millisecond and costs
// nothing to read), the fake's manual clock, the probe of the fake's device 0, and which NVML
// calls change a device.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "perseus/client/gpu_probe.hpp"
#include "test_support.hpp"

namespace perseus::test {

// Sets (or, with nullopt, unsets) environment variables for one scope and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
    for (const auto& [name, value] : vars) set(name, value);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
    }
  }
  void set(const std::string& name, const std::optional<std::string>& value) {
    const char* old = std::getenv(name.c_str());
    if (saved_.count(name) == 0) {
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// Points the fake library's call log at a fresh file for one test and reads it back.
class CallLog {
 public:
  CallLog() : path_(dir_.path() / "calls.log") { setenv("FAKE_NVML_LOG", path_.c_str(), 1); }
  ~CallLog() { unsetenv("FAKE_NVML_LOG"); }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  perseus::test::TempDir dir_;
  std::filesystem::path path_;
};

// Moves the fake's manual clock on by `seconds` (a session opened with FAKE_NVML_MANUAL_CLOCK set):
// through the fake's own control function, in the library the client loaded (a dlopen of a loaded
// library returns it).
inline void advance_fake_clock(double seconds) {
  void* library = dlopen(FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) throw std::runtime_error("the fake NVML library is not loaded");
  auto* advance = reinterpret_cast<void (*)(long long)>(dlsym(library, "fakeNvmlAdvanceClockNs"));
  if (advance != nullptr) advance(std::llround(seconds * 1e9));
  dlclose(library);
  if (advance == nullptr) throw std::runtime_error("the fake NVML library has no manual clock");
}

// Every test starts with CUDA_VISIBLE_DEVICES unset and a fake whose counter reads cost nothing
// and refresh every millisecond (tests that care about timing set their own).
// The probe of the fake's device 0, polling its counter for `seconds`.
inline perseus::client::GpuProbe probe_fake(double seconds) {
  perseus::client::ProbeOptions options;
  options.library = FAKE_NVML_LIBRARY;
  options.duration_s = seconds;
  return perseus::client::probe_gpu(options);
}

class Nvml : public ::testing::Test {
 protected:
  ScopedEnv env_{{"CUDA_VISIBLE_DEVICES", std::nullopt},
                 {"FAKE_NVML_DEVICES", std::nullopt},
                 {"FAKE_NVML_POWER_W", std::nullopt},
                 {"FAKE_NVML_MANUAL_CLOCK", std::nullopt},
                 {"FAKE_NVML_READ_MS", "0"},
                 {"FAKE_NVML_REFRESH_MS", "1"}};
};

// The NVML calls that change a device or the system (none may appear in a read-only run).
inline bool is_mutating_call(const std::string& line) {
  for (const char* prefix : {"nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear", "nvmlSystemSet",
                             "nvmlGpuInstance", "nvmlDeviceCreate"}) {
    if (line.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace perseus::test
