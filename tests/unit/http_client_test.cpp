// The client's synchronous HTTP/1.1 client against a loopback responder: URL parsing, GET and
// POST round trips, non-2xx answers, refused connections, non-HTTP answers and timeouts.
#include "perseus/client/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "loopback_http.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::HttpClient;
using perseus::client::HttpError;
using perseus::client::parse_http_url;
using perseus::test::error_of;
using perseus::test::LoopbackHttp;

TEST(HttpClient, ParsesServerUrls) {
  auto u = parse_http_url("http://127.0.0.1:7787");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "7787");
  EXPECT_EQ(u.prefix, "");
  u = parse_http_url("http://example.org/perseus/");
  EXPECT_EQ(u.host, "example.org");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.prefix, "/perseus");
  u = parse_http_url("http://[::1]:9000");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, "9000");
  u = parse_http_url("https://example.org");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.port, "443");
  EXPECT_FALSE(parse_http_url("http://h").tls);
  EXPECT_CONTAINS(error_of([] { parse_http_url("ftp://h:1"); }),
                  "server URL 'ftp://h:1': must start with http:// or https://");
  EXPECT_CONTAINS(error_of([] { parse_http_url("http://:80"); }), "missing host");
  EXPECT_CONTAINS(error_of([] { parse_http_url("http://h:99999"); }), "port '99999'");
  EXPECT_CONTAINS(error_of([] { parse_http_url("http://h:x1"); }), "port 'x1'");
  EXPECT_CONTAINS(error_of([] { parse_http_url("http://h:"); }), "empty port");
  EXPECT_CONTAINS(error_of([] { parse_http_url("http://h/a?b"); }), "query");
}

TEST(HttpClient, GetsAndPostsJson) {
  LoopbackHttp server([](const LoopbackHttp::Request& r) {
    return LoopbackHttp::Reply{200,
                               "{\"echo\":\"" + r.method + " " + r.target + " " + r.body + "\"}"};
  });
  HttpClient client(server.url(), 2.0);
  auto get = client.get("/schedule/j1?rank=3&round=0", 2.0);
  EXPECT_EQ(get.status, 200);
  EXPECT_TRUE(get.ok());
  EXPECT_EQ(get.body, "{\"echo\":\"GET /schedule/j1?rank=3&round=0 \"}");
  auto post = client.post("/result/j1", "[1,2]", 2.0);
  EXPECT_EQ(post.body, "{\"echo\":\"POST /result/j1 [1,2]\"}");
  ASSERT_EQ(server.count(), 2u);
  EXPECT_EQ(server.requests()[1].body, "[1,2]");
  EXPECT_EQ(client.url_of("/x"), server.url() + "/x");
}

TEST(HttpClient, ReturnsErrorStatusesWithTheirBody) {
  LoopbackHttp server([](const LoopbackHttp::Request&) {
    return LoopbackHttp::Reply{404, "unknown job 'x'"};
  });
  HttpClient client(server.url() + "/prefix", 2.0);
  auto r = client.get("/schedule/x?rank=0", 2.0);
  EXPECT_EQ(r.status, 404);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.body, "unknown job 'x'");
  EXPECT_EQ(server.requests()[0].target, "/prefix/schedule/x?rank=0");
}

TEST(HttpClient, RefusedConnectionsAndNonHttpAnswersThrow) {
  int port = perseus::test::closed_port();
  HttpClient refused("http://127.0.0.1:" + std::to_string(port), 2.0);
  try {
    refused.get("/x", 1.0);
    ADD_FAILURE() << "no HttpError";
  } catch (const HttpError& e) {
    EXPECT_CONTAINS(e.what(), "GET http://127.0.0.1:" + std::to_string(port) +
                                  "/x: cannot connect: Connection refused");
    EXPECT_FALSE(e.timed_out());
  }
  LoopbackHttp garbage([](const LoopbackHttp::Request&) {
    return LoopbackHttp::Reply{200, "this is not HTTP\r\n\r\n", false, true};
  });
  HttpClient client(garbage.url(), 2.0);
  EXPECT_CONTAINS(error_of([&] { client.post("/register_job", "{}", 2.0); }),
                  "reading the answer failed");
}

TEST(HttpClient, GivesUpAfterTheTimeout) {
  LoopbackHttp server([](const LoopbackHttp::Request&) {
    LoopbackHttp::Reply r;
    r.hang = true;
    return r;
  });
  HttpClient client(server.url(), 2.0);
  auto start = std::chrono::steady_clock::now();
  try {
    client.get("/schedule/j?rank=0", 0.3);
    ADD_FAILURE() << "no HttpError";
  } catch (const HttpError& e) {
    EXPECT_TRUE(e.timed_out());
    EXPECT_CONTAINS(e.what(), "no answer within 0.3 s");
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 0.29);
  EXPECT_LT(s, 2.0);
}

TEST(HttpClient, RejectsBadTimeouts) {
  EXPECT_CONTAINS(error_of([] { HttpClient c("http://127.0.0.1:1", 0.0); }),
                  "HTTP connect timeout must be a positive number of seconds");
  HttpClient c("http://127.0.0.1:1", 1.0);
  EXPECT_CONTAINS(error_of([&] { c.get("/", -1.0); }), "HTTP request timeout");
}

}  // namespace
