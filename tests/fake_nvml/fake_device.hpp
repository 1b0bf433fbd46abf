// The fake NVML library's device model (fake_nvml.cpp has the C entry points and documents the
// behaviour and environment variables): sessions, devices, the energy counter with its refresh
// period and blocking read, and the call log.
#pragma once

#include <atomic>

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

// Appends one line to $FAKE_NVML_LOG with a single write (no locks or allocation: the client's
// signal handler calls the reset functions).
void record(const char* format, ...) __attribute__((format(printf, 1, 2)));

// $name as a number in [lo, hi]; `fallback` when unset, empty, malformed or out of range.
double env_number(const char* name, double fallback, double lo, double hi);

// nvmlInit_v2 and nvmlShutdown: sessions are counted; the first init starts one (fresh devices
// and counters), a later one applies changed counter settings.
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
// always for the device whose index is $FAKE_NVML_LOST_DEVICE (read at each call; unset: none).
// While the file $FAKE_NVML_HANG_FILE names exists (read at each call), it first blocks.
int check_device(const void* handle);

// The power draw is at or above the device's power limit.
bool power_capped(const Device& d);

// The constant power draw of every device (milliwatts).
unsigned power_mw();

// One counter read: blocks for the read cost, then the counter of `handle` as of the call's end
// (millijoules); kInvalidArgument when the device left meanwhile (a new session with fewer).
int read_energy_mj(const void* handle, unsigned long long* out);

}  // namespace fake_nvml
