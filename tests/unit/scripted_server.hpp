// A scripted Perseus control-plane server on loopback for the client tests (client_test.cpp,
// pipeline_sim_test.cpp, nvml_gpu_test.cpp): job "job-7", schedules from `plans` by round (the
// last one is final), results recorded; the client options such tests start from, a warnings
// collector and a URL nothing listens on.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loopback_http.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::test {

// `failing` makes every request answer 503.
struct ScriptedServer {
  using json = nlohmann::json;
  std::vector<json> plans;  // per round: the schedule body without "rank" and "round"
  std::function<json(int rank, int round)> plan_for;  // instead of `plans` when set
  std::atomic<bool> failing{false};
  std::mutex m;
  std::vector<json> results;
  std::unique_ptr<LoopbackHttp> http;

  explicit ScriptedServer(std::vector<json> p) : plans(std::move(p)) {
    http = std::make_unique<LoopbackHttp>([this](const LoopbackHttp::Request& r) {
      auto reply = answer(r);
      reply.headers.emplace_back("Server", wire::kServerName);  // as Perseus's server says
      return reply;
    });
  }

  LoopbackHttp::Reply answer(const LoopbackHttp::Request& r) {
    if (failing) return {503, "server is restarting"};
    if (r.target == "/register_job") return {200, "\"job-7\""};
    if (r.target.rfind("/register_rank/job-7", 0) == 0) return {200, "null"};
    if (r.target.rfind("/result/job-7", 0) == 0) {
      std::lock_guard lock(m);
      results.push_back(json::parse(r.body));
      return {200, "null"};
    }
    int rank = -1, round = -1;
    if (std::sscanf(r.target.c_str(), "/schedule/job-7?rank=%d&round=%d", &rank, &round) == 2 &&
        round >= 0) {
      json s =
          plan_for
              ? plan_for(rank, round)
              : plans[std::min<std::size_t>(static_cast<std::size_t>(round), plans.size() - 1)];
      s["rank"] = rank;
      s["round"] = round;
      s["done"] = static_cast<std::size_t>(round) + 1 >= plans.size();
      return {200, s.dump()};
    }
    return {404, "no route " + r.target};
  }

  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    for (const auto& r : http->requests()) out.push_back(r.method + " " + r.target);
    return out;
  }

  std::size_t result_count() {
    std::lock_guard lock(m);
    return results.size();
  }
};

// A schedule body locking forward and backward at the given clocks.
// A client of the server at `url` that waits little (2 s timeouts, 1 ms backoff) and reports
// every 2 iterations.
inline client::OptimizerOptions quick_client_options(const std::string& url) {
  client::OptimizerOptions o;
  o.server_url = url;
  o.request_timeout_s = 2.0;
  o.barrier_timeout_s = 2.0;
  o.backoff_s = 0.001;
  o.report_every = 2;
  return o;
}

inline nlohmann::json clocks(int forward_mhz, int backward_mhz) {
  return {
      {"frequencies", nlohmann::json::array({nlohmann::json::array({"forward", forward_mhz}),
                                             nlohmann::json::array({"backward", backward_mhz})})}};
}

// Collects the optimizer's warnings (from any thread).
struct Warnings {
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::function<void(const std::string&)> sink() {
    return [l = lines, m = mutex](const std::string& w) {
      std::lock_guard lock(*m);
      l->push_back(w);
    };
  }
  // The lines so far (a copy, taken under the lock: another thread may still be warning).
  std::vector<std::string> said() const {
    std::lock_guard lock(*mutex);
    return *lines;
  }
};

inline client::OptimizerOptions fast_options(const std::string& url, Warnings& w) {
  client::OptimizerOptions o = quick_client_options(url);
  o.retries = 2;
  o.max_skipped_windows = 0;  // retry at every window boundary (the breaker has its own tests)
  o.log = w.sink();
  return o;
}

// A URL nothing listens on.
inline std::string closed_url() {
  return "http://127.0.0.1:" + std::to_string(closed_port());
}

}  // namespace perseus::test
