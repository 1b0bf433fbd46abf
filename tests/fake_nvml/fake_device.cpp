#include "fake_device.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fake_nvml {

namespace {

constexpr unsigned kMaxDevices = 16;

// $name as a number in [lo, hi]; `fallback` when unset, empty, malformed or out of range.
double env_number(const char* name, double fallback, double lo, double hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (*end != '\0' || !(value >= lo && value <= hi)) return fallback;
  return value;
}

std::string env_text(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr ? text : "";
}

bool env_set(const char* name) {
  return std::getenv(name) != nullptr;
}

Settings settings_from_env() {
  Settings s;
  s.log_path = env_text("FAKE_NVML_LOG");
  s.hang_file = env_text("FAKE_NVML_HANG_FILE");
  s.names = env_text("FAKE_NVML_NAMES");
  s.clocks = env_text("FAKE_NVML_CLOCKS");
  s.deny_lock = env_set("FAKE_NVML_DENY_LOCK");
  s.no_clock_reasons = env_set("FAKE_NVML_NO_CLOCK_REASONS");
  s.no_energy_counter = env_set("FAKE_NVML_NO_ENERGY_COUNTER");
  s.no_power_limit = env_set("FAKE_NVML_NO_POWER_LIMIT");
  s.lost_device = env_number("FAKE_NVML_LOST_DEVICE", -1.0, 0.0, 15.0);
  s.capped_mhz = env_number("FAKE_NVML_CAPPED_MHZ", -1.0, 1.0, 1e5);
  return s;
}

// Every Settings published, kept for the rest of the process (reachable, so not a leak): a call
// may still use an older one while an init publishes the next.
// The first is the defaults.
std::vector<std::unique_ptr<const Settings>>* const published = [] {
  auto* all = new std::vector<std::unique_ptr<const Settings>>;
  all->push_back(std::make_unique<const Settings>());
  return all;
}();
std::atomic<const Settings*> current{published->front().get()};

// Publishes `s` (session_mutex held).
void publish(Settings s) {
  if (s == *current.load()) return;
  published->push_back(std::make_unique<const Settings>(std::move(s)));
  current.store(published->back().get(), std::memory_order_release);
}

using Clock = std::chrono::steady_clock;

struct CounterSettings {
  double power_w = 300.0;
  long long refresh_ns = 100000000;
  long long read_ns = 4000000;
  bool operator==(const CounterSettings&) const = default;
};

Device devices[kMaxDevices];

// Guarded by session_mutex, except count: set before session_open, while no device is open.
std::mutex session_mutex;
int init_count = 0;
unsigned count = 1;
CounterSettings counter;
Clock::time_point counter_start;
std::atomic<bool> session_open{false};
std::atomic<Clock::rep> lost_at{Clock::time_point::max().time_since_epoch().count()};
// The fake's time: steady time, or, with $FAKE_NVML_MANUAL_CLOCK (read when a session starts),
// the session's start plus what advance_clock added, so that a test says how much time passes and
// neither a sleep nor a loaded machine changes what the counter reads.
std::atomic<bool> manual_clock{false};
std::atomic<long long> manual_ns{0};
std::atomic<Clock::rep> manual_epoch{0};  // a session's start (calls left behind may read it)

Clock::time_point now() {
  if (!manual_clock.load()) return Clock::now();
  const Clock::time_point epoch{Clock::duration(manual_epoch.load())};
  return epoch +
         std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(manual_ns.load()));
}

CounterSettings counter_settings_from_env() {
  CounterSettings s;
  s.power_w = env_number("FAKE_NVML_POWER_W", 300.0, 0.0, 1e5);
  s.refresh_ns = std::llround(env_number("FAKE_NVML_REFRESH_MS", 100.0, 0.0, 1e6) * 1e6);
  s.read_ns = std::llround(env_number("FAKE_NVML_READ_MS", 4.0, 0.0, 1e6) * 1e6);
  return s;
}

// The counter as of `now` (session_mutex held): its value at counter_start plus power x the time
// since, rounded down to the last refresh.
unsigned long long energy_mj(const Device& d, Clock::time_point now) {
  long long elapsed =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now - counter_start).count();
  if (counter.refresh_ns > 0) elapsed -= elapsed % counter.refresh_ns;
  return d.base_mj +
         static_cast<unsigned long long>(counter.power_w * 1e-6 * static_cast<double>(elapsed));
}

// A new session (session_mutex held): fresh devices and counters.
void start_session(const CounterSettings& settings) {
  count = static_cast<unsigned>(env_number("FAKE_NVML_DEVICES", 1, 0, kMaxDevices));
  for (unsigned i = 0; i < kMaxDevices; ++i) {
    devices[i].power_limit_mw = kDefaultLimitMw;
    devices[i].locked_mhz = 0;
    devices[i].base_mj = (i + 1ULL) * 1000000ULL;
  }
  counter = settings;
  manual_clock = env_set("FAKE_NVML_MANUAL_CLOCK");
  manual_ns = 0;
  manual_epoch = Clock::now().time_since_epoch().count();
  counter_start = now();
  const double lost_ms = env_number("FAKE_NVML_LOST_AFTER_MS", -1.0, 0.0, 1e9);
  lost_at = lost_ms < 0.0 ? Clock::time_point::max().time_since_epoch().count()
                          : (counter_start + std::chrono::microseconds(std::llround(lost_ms * 1e3)))
                                .time_since_epoch()
                                .count();
}

// New counter settings in an open session (session_mutex held): each counter goes on from the
// value it has now.
void change_counter(const CounterSettings& settings) {
  const Clock::time_point at = now();
  for (unsigned i = 0; i < count; ++i) devices[i].base_mj = energy_mj(devices[i], at);
  counter = settings;
  counter_start = at;
}

}  // namespace

const Settings& settings() {
  return *current.load(std::memory_order_acquire);
}

void record(const char* format, ...) {
  const char* path = settings().log_path.c_str();
  if (*path == '\0') return;
  char line[256];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, sizeof(line) - 1, format, args);
  va_end(args);
  if (n < 0) return;
  if (n > static_cast<int>(sizeof(line)) - 2) n = static_cast<int>(sizeof(line)) - 2;
  line[n++] = '\n';
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t written = ::write(fd, line, static_cast<size_t>(n));
  (void)written;
  ::close(fd);
}

int open_session() {
  const CounterSettings settings = counter_settings_from_env();
  Settings fresh = settings_from_env();
  std::lock_guard<std::mutex> lock(session_mutex);
  publish(std::move(fresh));
  if (init_count++ == 0) {
    start_session(settings);
    session_open.store(true, std::memory_order_release);
  } else if (!(settings == counter)) {
    change_counter(settings);
  }
  return kSuccess;
}

int close_session() {
  std::lock_guard<std::mutex> lock(session_mutex);
  if (init_count == 0) return kUninitialized;
  if (--init_count == 0) session_open.store(false, std::memory_order_release);
  return kSuccess;
}

bool in_session() {
  return session_open.load(std::memory_order_acquire);
}

unsigned device_count() {
  return count;
}

Device* device_at(unsigned index) {
  return &devices[index];
}

unsigned index_of(const Device* d) {
  return static_cast<unsigned>(d - devices);
}

Device* device_of(const void* handle) {
  for (unsigned i = 0; i < count; ++i) {
    if (handle == &devices[i]) return &devices[i];
  }
  return nullptr;
}

int check_device(const void* handle) {
  const Settings& s = settings();
  if (!s.hang_file.empty()) {
    while (::access(s.hang_file.c_str(), F_OK) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (!in_session()) return kUninitialized;
  const Device* d = device_of(handle);
  if (d == nullptr) return kInvalidArgument;
  if (index_of(d) == s.lost_device) return kGpuIsLost;
  return now().time_since_epoch().count() >= lost_at.load() ? kGpuIsLost : kSuccess;
}

bool power_capped(const Device& d) {
  std::lock_guard<std::mutex> lock(session_mutex);
  return counter.power_w * 1000.0 >= d.power_limit_mw;
}

unsigned power_mw() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return static_cast<unsigned>(std::lround(counter.power_w * 1000.0));
}

int read_energy_mj(const void* handle, unsigned long long* out) {
  std::unique_lock<std::mutex> lock(session_mutex);
  const long long read_ns = counter.read_ns;
  lock.unlock();
  if (read_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(read_ns));
  lock.lock();
  const Device* d = device_of(handle);
  if (d == nullptr) return kInvalidArgument;
  *out = energy_mj(*d, now());
  return kSuccess;
}

void advance_clock(long long ns) {
  manual_ns += ns;
}

}  // namespace fake_nvml
