// The optimizer's failure policy: servers that refuse, fail, answer garbage, hang or never answer;
// degrading to the default clock, retries, the request timeout and stall bound, the circuit
// breaker, recovery, and results sent again until the server takes them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "loopback_http.hpp"
#include "optimizer_harness.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/wire/protocol.hpp"
#include "scripted_server.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using perseus::client::OptimizerOptions;
using perseus::client::PipelineFrequencyOptimizer;
using perseus::test::clocks;
using perseus::test::closed_url;
using perseus::test::error_of;
using perseus::test::fast_options;
using perseus::test::iterate;
using perseus::test::LoopbackHttp;
using perseus::test::ScriptedServer;
using perseus::test::sim;
using perseus::test::Warnings;

TEST(ClientOptimizer, KeepsTrainingAtTheDefaultClockWhenTheServerIsDown) {
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(closed_url(), w), sim());
  EXPECT_TRUE(opt.degraded());
  iterate(opt, 7);                         // three window boundaries retry and fail again, silently
  EXPECT_EQ(opt.iterations().size(), 6u);  // three closed windows of 2
  EXPECT_NEAR(opt.iterations().back().time_s, 0.030, 1e-12);
  EXPECT_TRUE(opt.degraded());
  EXPECT_EQ(opt.round(), -1);
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "POST http://127.0.0.1:");
  EXPECT_CONTAINS(w.lines->front(), "/register_job: cannot connect: Connection refused");
  EXPECT_CONTAINS(w.lines->front(), "(3 attempts); running at the default clock");
}

TEST(ClientOptimizer, StrictModeThrowsInsteadOfDegrading) {
  Warnings w;
  OptimizerOptions o = fast_options(closed_url(), w);
  o.strict = true;
  EXPECT_CONTAINS(error_of([&] { PipelineFrequencyOptimizer opt(o, sim()); }),
                  "Connection refused");
  EXPECT_TRUE(w.lines->empty());
}

TEST(ClientOptimizer, RetriesErrorAnswersAndLogsTheirBody) {
  LoopbackHttp server([](const LoopbackHttp::Request&) {
    return LoopbackHttp::Reply{500, "scheduler exploded\nat line 3"};
  });
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.url(), w), sim());
  EXPECT_EQ(server.count(), 3u);  // 1 + retries
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "/register_job: HTTP 500: scheduler exploded at line 3");
  EXPECT_TRUE(opt.degraded());
}

// A 4xx answer the same request would get again (a bad field, a wrong secret) is not retried: the
// retries would only stall the training loop. "Not now" (409) and a server cap (429) are.
TEST(ClientOptimizer, DoesNotRetryARefusalThatWouldNotChange) {
  for (const auto& [status, sent] : {std::pair{422, 1u}, {401, 1u}, {409, 3u}, {429, 3u}}) {
    SCOPED_TRACE(status);
    LoopbackHttp server([status = status](const LoopbackHttp::Request&) {
      return LoopbackHttp::Reply{status, "{\"detail\": \"no\"}"};
    });
    Warnings w;
    PipelineFrequencyOptimizer opt(fast_options(server.url(), w), sim());
    EXPECT_EQ(server.count(), sent);
    ASSERT_EQ(w.lines->size(), 1u);
    EXPECT_CONTAINS(w.lines->front(), "HTTP " + std::to_string(status));
    EXPECT_EQ(w.lines->front().find("not retried") != std::string::npos, sent == 1u);
    EXPECT_TRUE(opt.degraded());
  }
}

// A job that failed on the server for good (its 500s carry kJobFailedHeader): the client says so
// once, runs at the default clock and never asks again, instead of retrying now and at later
// windows as after a failure that may pass.
TEST(ClientOptimizer, StopsAskingOnceTheServerSaysTheJobFailedForGood) {
  LoopbackHttp server([](const LoopbackHttp::Request& request) {
    if (request.target == "/register_job") return LoopbackHttp::Reply{200, "\"job-7\""};
    if (request.target.starts_with("/register_rank/")) return LoopbackHttp::Reply{200, "null"};
    LoopbackHttp::Reply r{500, "{\"detail\": \"scheduler 'profiler' failed: no counter\"}"};
    r.headers = {{perseus::wire::kJobFailedHeader, "1"}};
    return r;
  });
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.url(), w), sim());
  EXPECT_EQ(server.count(), 3u);  // the job, the rank, and one schedule request
  iterate(opt, 8);                // four window boundaries
  EXPECT_EQ(server.count(), 3u);
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(),
                  "/schedule/job-7?rank=0&round=0: HTTP 500: scheduler 'profiler' failed: no "
                  "counter; the job failed");
  EXPECT_CONTAINS(w.lines->front(),
                  "the job failed for good: running at the default clock, "
                  "without the server from now on");
  EXPECT_TRUE(opt.degraded());
  EXPECT_EQ(opt.iterations().size(), 8u);
}

TEST(ClientOptimizer, RetriesGarbageAnswers) {
  LoopbackHttp server([](const LoopbackHttp::Request&) {
    return LoopbackHttp::Reply{200, "{not json"};
  });
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.url(), w), sim());
  EXPECT_EQ(server.count(), 3u);
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "unusable answer: invalid JSON at byte ");
  iterate(opt, 2);
  EXPECT_EQ(server.count(), 6u);  // the window boundary tried again
  EXPECT_EQ(w.lines->size(), 1u);
}

TEST(ClientOptimizer, RespectsTheRequestTimeoutWhenTheServerHangs) {
  LoopbackHttp server([](const LoopbackHttp::Request&) {
    LoopbackHttp::Reply r;
    r.hang = true;
    return r;
  });
  Warnings w;
  OptimizerOptions o = fast_options(server.url(), w);
  o.request_timeout_s = 0.2;
  o.retries = 1;
  auto start = std::chrono::steady_clock::now();
  PipelineFrequencyOptimizer opt(o, sim());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 0.4);
  EXPECT_LT(s, 2.0);
  EXPECT_EQ(server.count(), 2u);
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "no answer within 0.2 s (2 attempts)");
}

TEST(ClientOptimizer, RecoversAtTheNextWindowBoundary) {
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(600, 600), clocks(600, 1000)});
  server.failing = true;
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());
  EXPECT_TRUE(opt.degraded());
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "HTTP 503: server is restarting");
  server.failing = false;
  iterate(opt, 2);
  EXPECT_FALSE(opt.degraded());
  EXPECT_EQ(opt.job_id(), "job-7");
  EXPECT_EQ(opt.round(), 0);
  iterate(opt, 2);  // one window on round 0, attributed when it closes
  EXPECT_NEAR(opt.iterations().back().time_s, 0.044, 1e-12);
  EXPECT_EQ(w.lines->size(), 1u);
}

TEST(ClientOptimizer, CircuitBreakerSkipsOneTwoFourWindowsAfterFailures) {
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(600, 600)});
  server.failing = true;
  Warnings w;
  OptimizerOptions o = fast_options(server.http->url(), w);
  o.report_every = 1;
  o.retries = 0;
  o.max_skipped_windows = 4;
  PipelineFrequencyOptimizer opt(o, sim());  // the first exchange fails
  std::vector<int> tried;                    // window boundaries that contacted the server
  for (int boundary = 1; boundary <= 15; ++boundary) {
    std::size_t before = server.http->requests().size();
    iterate(opt, 1);
    if (server.http->requests().size() > before) tried.push_back(boundary);
  }
  EXPECT_EQ(tried, (std::vector<int>{2, 5, 10, 15}));  // skips 1, 2, 4, then 4 (the cap)
  server.failing = false;
  for (int i = 0; i < 5 && opt.degraded(); ++i) iterate(opt, 1);
  EXPECT_FALSE(opt.degraded());
  std::size_t before = server.http->requests().size();
  iterate(opt, 1);  // closed again: the very next boundary reports
  EXPECT_GT(server.http->requests().size(), before);
}

// A server that accepts connections (the kernel's backlog) and never answers.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), n) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
      throw std::runtime_error("cannot listen");
    }
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~SilentServer() { ::close(fd_); }
  const std::string& url() const { return url_; }

 private:
  int fd_;
  std::string url_;
};

TEST(ClientOptimizer, StallPerWindowIsBoundedWhenTheServerNeverAnswers) {
  SilentServer server;
  Warnings w;
  OptimizerOptions o = fast_options(server.url(), w);
  o.request_timeout_s = 5.0;  // 4 attempts of 5 s would be 20 s per window
  o.barrier_timeout_s = 5.0;
  o.retries = 3;
  o.stall_bound_s = 0.4;
  o.max_skipped_windows = 0;
  auto seconds_of = [](auto&& f) {
    auto begin = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  std::unique_ptr<PipelineFrequencyOptimizer> opt;
  double first = seconds_of([&] { opt = std::make_unique<PipelineFrequencyOptimizer>(o, sim()); });
  EXPECT_GE(first, 0.35);
  EXPECT_LT(first, 0.4 + 0.3);
  EXPECT_TRUE(opt->degraded());
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "stopped by the stall bound of 0.4 s");
  for (int window = 0; window < 3; ++window) {
    double t = seconds_of([&] { iterate(*opt, 2); });
    EXPECT_LT(t, 0.4 + 0.3) << "window " << window;
  }
}

TEST(ClientOptimizer, SendsAnUnacknowledgedResultAgainBeforeTheNextRound) {
  // The server cannot plan round 1 without round 0's result: a report it did not take must be
  // sent again when it is back, not dropped (the job would wait for it forever).
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(600, 1000)});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());
  server.failing = true;  // down when round 0's window ends
  iterate(opt, 2);
  EXPECT_TRUE(opt.degraded());
  EXPECT_TRUE(server.results.empty());
  server.failing = false;
  iterate(opt, 2);  // the next boundary: report round 0, then fetch round 1
  EXPECT_FALSE(opt.degraded());
  EXPECT_EQ(opt.round(), 1);
  ASSERT_EQ(server.results.size(), 1u);
  auto result = perseus::wire::parse_profiling_result(server.results[0]);
  EXPECT_EQ(result.round, 0);
  ASSERT_EQ(result.iter_time.size(), 2u);
  EXPECT_NEAR(result.iter_time[0], 0.044, 1e-12);  // measured under round 0's clocks
  auto targets = server.targets();
  ASSERT_GE(targets.size(), 2u);
  EXPECT_EQ(targets[targets.size() - 2], "POST /result/job-7");
  EXPECT_EQ(targets.back(), "GET /schedule/job-7?rank=0&round=1");
}

}  // namespace
