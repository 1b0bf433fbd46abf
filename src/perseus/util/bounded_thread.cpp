#include "perseus/util/bounded_thread.hpp"

#include <utility>
#include <vector>

namespace perseus {

BoundedThread::BoundedThread(std::function<void()> body) : finished_(std::make_shared<Finished>()) {
  thread_ = std::thread([finished = finished_, body = std::move(body)] {
    body();
    std::lock_guard lock(finished->mutex);
    finished->done = true;
    finished->changed.notify_all();
  });
}

BoundedThread::~BoundedThread() {
  join();
}

void BoundedThread::join() {
  if (thread_.joinable()) thread_.join();
}

bool BoundedThread::join_until(std::chrono::steady_clock::time_point deadline) {
  if (!thread_.joinable()) return true;
  {
    std::unique_lock lock(finished_->mutex);
    if (!finished_->changed.wait_until(lock, deadline, [&] { return finished_->done; })) {
      return false;
    }
  }
  thread_.join();
  return true;
}

void keep_for_good(std::shared_ptr<void> object) {
  static auto* kept = new std::vector<std::shared_ptr<void>>;
  static auto* kept_mutex = new std::mutex;
  std::lock_guard lock(*kept_mutex);
  kept->push_back(std::move(object));
}

}  // namespace perseus
