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
// The signal whose handler is restoring (for give_up_restoring).
std::atomic<int> restoring_signal{0};

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

// Ends the process by `sig`, as its default disposition does: from a handler of `sig` (which
// blocks it while it runs), or from the alarm of one.
void die_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, sig);
  sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
  raise(sig);
}

// The restore blocked in the driver for kSignalRestoreBoundS (NVML on a GPU that has fallen off
// the bus blocks its callers for good): the process ends by the signal that started it, as it
// would have without Perseus, instead of hanging in the handler.
extern "C" void give_up_restoring(int) {
  die_by(restoring_signal.load());
}

// restore_all(), bounded by an alarm that gives up on it (SIGALRM's earlier action and any
// pending alarm are put back after).
void restore_all_bounded(int sig) {
  restoring_signal.store(sig);
  struct sigaction on_alarm {
  }, previous_alarm{};
  on_alarm.sa_handler = give_up_restoring;
  sigemptyset(&on_alarm.sa_mask);
  sigaction(SIGALRM, &on_alarm, &previous_alarm);
  const unsigned pending = alarm(kSignalRestoreBoundS);
  restore_all();
  alarm(0);
  sigaction(SIGALRM, &previous_alarm, nullptr);
  if (pending != 0) alarm(pending);
}

extern "C" void restore_on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  restore_all_bounded(sig);
  const struct sigaction& previous = previous_actions[sig == SIGINT ? 0 : 1];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    die_by(sig);  // delivered when this handler returns
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
