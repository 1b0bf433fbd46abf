// A background thread whose owner can wait for it with a deadline. A driver call can block for
// good (NVML on a GPU that has fallen off the bus hangs its caller), and a client must not hang
// the training process at exit with it: join_until() gives up at the deadline, and the caller
// then keeps everything the thread uses alive for the rest of the process (the thread may still
// return from its call and touch it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace perseus {

class BoundedThread {
 public:
  // Starts `body` on a new thread.
  explicit BoundedThread(std::function<void()> body);
  // join() (a thread left running by join_until must not be destroyed).
  ~BoundedThread();
  BoundedThread(const BoundedThread&) = delete;
  BoundedThread& operator=(const BoundedThread&) = delete;

  // Waits until the thread's body returned, without a deadline. Idempotent.
  void join();
  // Waits until the thread's body returned or `deadline` passed; true (and joined) when it
  // returned. Safe to call again after false.
  bool join_until(std::chrono::steady_clock::time_point deadline);

 private:
  struct Finished {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
  };
  std::shared_ptr<Finished> finished_;  // shared: the thread signals it after its body
  std::thread thread_;
};

// Keeps `object` alive, and reachable (so that leak checkers do not count it), for the rest of the
// process: what a thread that join_until gave up on may still touch when its call returns.
void keep_for_good(std::shared_ptr<void> object);

}  // namespace perseus
