// The control plane in process (ControlPlane::handle, no sockets, no threads): a job's whole life
// through its endpoints, the schedule barrier, and bad requests, in milliseconds. What needs a
// real server process (HTTP, TLS, restarts, hostile peers) is tested in tests/server.
#include "perseus/server/control_plane.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace perseus::server {
namespace {

using nlohmann::json;

// A control plane on an in-memory store, with each request's reply kept (nullopt while a barrier
// holds it).
class InProcess {
 public:
  explicit InProcess(ServerSettings settings) : plane_(std::move(settings)) {}

  // Sends one request (its body as it is); the index of its reply slot.
  std::size_t send_raw(const std::string& method, const std::string& target,
                       const std::string& body) {
    const std::size_t slot = replies_.size();
    replies_.emplace_back();
    plane_.handle(Request{method, target, body},
                  [this, slot](const Reply& reply) { replies_.at(slot) = reply; });
    return slot;
  }
  std::size_t send(const std::string& method, const std::string& target, const json& body = {}) {
    return send_raw(method, target, body.is_null() ? "" : body.dump());
  }
  // A request answered at once: its reply.
  Reply call(const std::string& method, const std::string& target, const json& body = {}) {
    const std::size_t slot = send(method, target, body);
    EXPECT_TRUE(replies_[slot].has_value()) << method << " " << target << " was not answered";
    return replies_[slot].value_or(Reply(0));
  }
  const std::optional<Reply>& reply(std::size_t slot) const { return replies_.at(slot); }
  json body(const Reply& r) const { return r.text.empty() ? r.body : json::parse(r.text); }

 private:
  ControlPlane plane_;
  std::vector<std::optional<Reply>> replies_;
};

ServerSettings all_max_settings() {
  ServerSettings s;
  s.scheduler = "all-max";
  s.scheduler_args = {{"microbatches", 2}};
  return s;
}

json job_info(int pp) {
  return {{"job_id", ""},   {"pp_degree", pp},  {"dp_degree", 1},
          {"tp_degree", 1}, {"world_size", pp}, {"job_metadata", nullptr}};
}

json rank_info(int rank) {
  return {{"rank", rank},
          {"dp_rank", 0},
          {"pp_rank", rank},
          {"tp_rank", 0},
          {"available_frequencies", {1410, 1395, 1380}}};
}

// A ProfilingResult as Zeus's client sends it: two iterations of `order`, each instruction 0.1 s
// and 30 J.
json result(int rank, const std::vector<std::string>& order, int round) {
  json time = json::object(), energy = json::object();
  for (const std::string& name : order) {
    const auto n = static_cast<std::size_t>(std::count(order.begin(), order.end(), name));
    time[name] = json::array({std::vector<double>(n, 0.1), std::vector<double>(n, 0.1)});
    energy[name] = json::array({std::vector<double>(n, 30.0), std::vector<double>(n, 30.0)});
  }
  const double n = static_cast<double>(order.size());
  return {{"rank", rank},
          {"iter_time", {0.1 * n + 0.05, 0.1 * n + 0.05}},
          {"iter_energy", {30.0 * n + 5.0, 30.0 * n + 5.0}},
          {"time_breakdown", time},
          {"energy_breakdown", energy},
          {"round", round}};
}

TEST(ControlPlaneInProcess, AJobRunsThroughItsEndpoints) {
  InProcess server(all_max_settings());
  const Reply registered = server.call("POST", "/register_job", job_info(2));
  ASSERT_EQ(registered.status, 200) << registered.payload();
  const std::string id = server.body(registered).get<std::string>();
  EXPECT_NE(id.find("+pp2+"), std::string::npos) << id;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(server.call("POST", "/register_rank/" + id, rank_info(rank)).status, 200);
  }
  // The schedule barrier: rank 0 waits until every rank asked for round 0.
  const std::size_t first = server.send("GET", "/schedule/" + id + "?rank=0");
  EXPECT_FALSE(server.reply(first).has_value());
  const std::size_t second = server.send("GET", "/schedule/" + id + "?rank=1");
  ASSERT_TRUE(server.reply(first).has_value() && server.reply(second).has_value());
  const json plan0 = server.body(*server.reply(first)), plan1 = server.body(*server.reply(second));
  EXPECT_EQ(plan0["round"], 0);
  EXPECT_EQ(plan1["round"], 0);
  // All-max, in each stage's 1F1B order for 2 microbatches.
  EXPECT_EQ(plan0["frequencies"], json::parse(R"([["forward",1410],["forward",1410],
                                                 ["backward",1410],["backward",1410]])"));
  EXPECT_EQ(plan1["frequencies"], json::parse(R"([["forward",1410],["backward",1410],
                                                 ["forward",1410],["backward",1410]])"));
  const json job_before = server.body(server.call("GET", "/jobs/" + id));
  EXPECT_EQ(job_before["ranks_registered"], 2);
  EXPECT_TRUE(job_before["released"].get<bool>());
  EXPECT_EQ(server
                .call("POST", "/result/" + id,
                      result(0, {"forward", "forward", "backward", "backward"}, 0))
                .status,
            200);
  EXPECT_EQ(server
                .call("POST", "/result/" + id,
                      result(1, {"forward", "backward", "forward", "backward"}, 0))
                .status,
            200);
  const json jobs = server.body(server.call("GET", "/jobs"));
  EXPECT_NE(jobs.dump().find("\"" + id + "\""), std::string::npos) << jobs.dump();
  const json job = server.body(server.call("GET", "/jobs/" + id));
  EXPECT_EQ(job["job_id"], id);
  EXPECT_EQ(job["state"], "done") << job.dump();
}

TEST(ControlPlaneInProcess, BadRequestsAreOneLineClientErrors) {
  InProcess server(all_max_settings());
  const std::string id = server.body(server.call("POST", "/register_job", job_info(2)));
  struct Case {
    std::string method, target, body;
    int status;
  };
  for (const Case& c : std::vector<Case>{
           {"GET", "/schedule/no-such-job?rank=0", "", 404},
           {"POST", "/register_rank/" + id, "{not json", 400},
           {"POST", "/register_job", R"({"pp_degree": "two"})", 422},
           {"GET", "/schedule/" + id + "?rank=7", "", 400},
           {"GET", "/no/such/endpoint", "", 404},
       }) {
    SCOPED_TRACE(c.method + " " + c.target);
    const std::size_t slot = server.send_raw(c.method, c.target, c.body);
    ASSERT_TRUE(server.reply(slot).has_value());
    const Reply& r = *server.reply(slot);
    EXPECT_EQ(r.status, c.status) << r.payload();
    const std::string detail = server.body(r).value("detail", "");
    EXPECT_FALSE(detail.empty()) << r.payload();
    EXPECT_EQ(detail.find('\n'), std::string::npos) << detail;
  }
}

TEST(ControlPlaneInProcess, AJobOutlivesItsControlPlaneInTheStore) {
  perseus::test::TempDir dir;
  ServerSettings settings = all_max_settings();
  settings.store_path = (dir.path() / "store.sqlite").string();
  std::string id;
  {
    InProcess server(settings);
    id = server.body(server.call("POST", "/register_job", job_info(2))).get<std::string>();
    for (int rank = 0; rank < 2; ++rank)
      server.call("POST", "/register_rank/" + id, rank_info(rank));
    server.send("GET", "/schedule/" + id + "?rank=0");
    server.send("GET", "/schedule/" + id + "?rank=1");
  }
  InProcess restarted(settings);
  const Reply job = restarted.call("GET", "/jobs/" + id);
  ASSERT_EQ(job.status, 200) << job.payload();
  EXPECT_EQ(restarted.body(job)["ranks_registered"], 2);
  // The restored job serves round 0 again to a rank that asks after the restart.
  const std::size_t again = restarted.send("GET", "/schedule/" + id + "?rank=1&round=0");
  ASSERT_TRUE(restarted.reply(again).has_value());
  EXPECT_EQ(restarted.body(*restarted.reply(again))["round"], 0);
}

}  // namespace
}  // namespace perseus::server
