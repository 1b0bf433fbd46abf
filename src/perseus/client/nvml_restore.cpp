#include "perseus/client/nvml_restore.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace perseus::client::nvml {

namespace {

// Live devices of this process (a fixed array: the handler must not allocate or lock).
constexpr int kMaxLiveGpus = 64;
std::atomic<RestoreRecord*> live_gpus[kMaxLiveGpus];
constexpr int kSignals[] = {SIGINT, SIGTERM};
struct sigaction previous_actions[2];
std::once_flag handlers_installed;

void restore_all() {
  for (auto& slot : live_gpus) {
    RestoreRecord* r = slot.load();
    // A forked child (e.g. a data-loader worker) inherits the registry; the device is its
    // parent's to restore.
    if (r == nullptr || r->owner != getpid()) continue;
    if (r->clock_locked.exchange(false)) r->reset_locked_clocks(r->device);
    if (r->limit_changed.exchange(false)) {
      unsigned milliwatts = r->default_limit_mw.load();
      if (milliwatts != 0) r->set_power_limit(r->device, milliwatts);
    }
  }
}

extern "C" void restore_on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  restore_all();
  const struct sigaction& previous = previous_actions[sig == SIGINT ? 0 : 1];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    // Default disposition: end the process the way the signal would have. The signal is blocked
    // while this handler runs, so it is delivered again when the handler returns.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
  } else if (previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
  errno = saved_errno;
}

void install_handlers() {
  for (int i = 0; i < 2; ++i) {
    const int sig = kSignals[i];
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    // A signal the process ignores stays ignored: installing a handler would make it fatal.
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN) continue;
    previous_actions[i] = old;
    struct sigaction action {};
    action.sa_sigaction = restore_on_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, nullptr);
  }
}

}  // namespace

void register_live(RestoreRecord* record) {
  std::call_once(handlers_installed, install_handlers);
  for (auto& slot : live_gpus) {
    RestoreRecord* expected = nullptr;
    if (slot.compare_exchange_strong(expected, record)) return;
  }
  // More live devices than slots: this one is still restored on normal exit.
}

void unregister_live(RestoreRecord* record) {
  for (auto& slot : live_gpus) {
    RestoreRecord* expected = record;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

}  // namespace perseus::client::nvml
