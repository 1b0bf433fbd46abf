// The fake NVML library's device model (fake_nvml.cpp has the C entry points and documents the
// behaviour and environment variables): its settings, sessions, devices, the energy counter with
// its refresh period and blocking read, and the call log.
#pragma once

#include <atomic>
#include <string>

namespace fake_nvml {

// nvmlReturn_t values of the NVML API reference.
constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kNoPermission = 4, kNotFound = 6, kInsufficientSize = 7, kGpuIsLost = 15;

constexpr unsigned kDefaultLimitMw = 400000;

struct Device {
  std::atomic<unsigned> power_limit_mw{kDefaultLimitMw};
  std::atomic<unsigned> locked_mhz{0};  // 0: no lock
  unsigned long long base_mj = 0;       // the counter at the counter's start (session-guarded)
};

// The fake's environment variables, read at nvmlInit only, as a driver reads its environment when
// it is initialized: device calls, which clients make from their own threads (an energy sampler,
// a clock thread), never call getenv. glibc's getenv is not safe against a setenv in another
// thread (setenv may reallocate the environment array under it), and a training process sets
// variables while it runs (importing numpy does).
struct Settings {
  std::string log_path;    // FAKE_NVML_LOG ("": no log)
  std::string hang_file;   // FAKE_NVML_HANG_FILE ("": never blocks)
  std::string names;       // FAKE_NVML_NAMES
  std::string clocks;      // FAKE_NVML_CLOCKS
  bool deny_lock = false;  // FAKE_NVML_DENY_LOCK
  bool no_clock_reasons = false, no_energy_counter = false, no_power_limit = false;
  double lost_device = -1;  // FAKE_NVML_LOST_DEVICE (-1: none)
  double capped_mhz = -1;   // FAKE_NVML_CAPPED_MHZ (-1: no limit)
  bool operator==(const Settings&) const = default;
};

// The settings of the last nvmlInit (defaults before the first). The object stays valid for the
// rest of the process (a later init publishes a new one), so a call blocked with it is safe.
const Settings& settings();

// Appends one line to settings().log_path with a single write (no locks or allocation: the client's
// signal handler calls the reset functions).
void record(const char* format, ...) __attribute__((format(printf, 1, 2)));

// nvmlInit_v2 and nvmlShutdown: sessions are counted; every init reads the settings, the first
// starts a session (fresh devices and counters), a later one applies changed counter settings.
int open_session();
int close_session();

bool in_session();
unsigned device_count();
Device* device_at(unsigned index);  // index < device_count()
unsigned index_of(const Device* d);

// The device behind a handle of the current session, or nullptr.
Device* device_of(const void* handle);

// kSuccess when a session is open and `handle` is one of its devices; kGpuIsLost once the
// session is $FAKE_NVML_LOST_AFTER_MS old (read when the session starts; unset: never), and
// always for the device whose index is $FAKE_NVML_LOST_DEVICE (unset: none). While the file
// $FAKE_NVML_HANG_FILE names exists, it first blocks.
int check_device(const void* handle);

// The power draw is at or above the device's power limit.
bool power_capped(const Device& d);

// The constant power draw of every device (milliwatts).
unsigned power_mw();

// With $FAKE_NVML_MANUAL_CLOCK set when the session started, the fake's time (the counter, the
// lost-after time) moves only by this: `ns` nanoseconds later. Otherwise it has no effect.
void advance_clock(long long ns);

// One counter read: blocks for the read cost, then the counter of `handle` as of the call's end
// (millijoules); kInvalidArgument when the device left meanwhile (a new session with fewer).
int read_energy_mj(const void* handle, unsigned long long* out);

}  // namespace fake_nvml
