// Load generator for `perseus serve` (bench/server_load_bench.sh): simulates J jobs of N ranks
// each, every rank on its own keep-alive connection, doing R rounds of "fetch schedule (the
// barrier), report a result". One thread, asynchronous (Boost.Beast), so the generator itself
// holds no thread per rank either.
//
// Barrier latency of a rank in a round: from the moment the job's last rank sent its schedule
// request (the barrier could release) to the moment this rank has the answer. Round latency: the
// largest barrier latency of the round. Prints percentiles and requests per second. With --tls 1
// every connection is HTTPS (the server's certificate is not verified: a benchmark on loopback).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>  // before Boost: 1.74's asio/awaitable.hpp uses std::exchange unincluded
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Settings {
  std::string host = "127.0.0.1";
  std::string port;
  int jobs = 1, ranks = 8, rounds = 20, pp = 8, threads = 1;
  std::string scheduler_args;          // per-job scheduler arguments (JSON), optional
  std::string token;                   // the server's cluster token, optional
  std::string frequencies = "[1410]";  // each rank's available_frequencies (JSON)
  int breakdown = 0;  // results carry time and energy per instruction: forward and backward, N each
  bool tls = false;   // HTTPS
};

struct JobState {
  std::string id;
  std::string credentials;    // "Authorization: ...\r\nX-Perseus-Job-Secret: ...\r\n" or ""
  std::string result_fields;  // a result's fields after rank and round
  int ranks = 0;
  std::vector<int> asked;                     // per round: ranks that sent the request
  std::vector<Clock::time_point> last_ask;    // per round: when the last one was sent
  std::vector<std::vector<double>> answered;  // per round: answer time - last_ask, per rank
};

// Shared by the event-loop threads; each rank has one operation in flight at a time, so only
// the job and global statistics need the lock.
std::mutex lock;
std::vector<double> all_latencies;
std::vector<double> round_latencies;
std::atomic<long> requests{0};
std::atomic<int> failures{0};

// The Content-Length of a response head (header names are case-insensitive: Zeus's server, on
// uvicorn, writes content-length); 0 without one.
std::size_t content_length(std::string_view head) {
  constexpr std::string_view kName = "\r\ncontent-length:";
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    std::string_view line = head.substr(at, kName.size());
    if (line.size() == kName.size() &&
        std::equal(line.begin(), line.end(), kName.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == b;
        })) {
      return std::strtoul(head.data() + at + kName.size(), nullptr, 10);
    }
  }
  return 0;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// `Stream`: a TCP socket, or a TLS stream over one (constructed with the TLS context).
template <class Stream>
class Rank : public std::enable_shared_from_this<Rank<Stream>> {
 public:
  template <class... TlsContext>
  Rank(asio::io_context& io, const tcp::resolver::results_type& endpoints, JobState& job, int rank,
       int rounds, TlsContext&... tls)
      : socket_(io, tls...), endpoints_(endpoints), job_(job), rank_(rank), rounds_(rounds) {}

  void start() {
    asio::async_connect(
        socket_.lowest_layer(), endpoints_,
        [self = this->shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return self->fail("connect", ec);
          if constexpr (std::is_same_v<Stream, tcp::socket>) {
            self->ask();
          } else {
            self->socket_.async_handshake(asio::ssl::stream_base::client,
                                          [self](beast::error_code ec2) {
                                            if (ec2) return self->fail("handshake", ec2);
                                            self->ask();
                                          });
          }
        });
  }

 private:
  // One request on the rank's keep-alive connection. Requests and answers are handled as plain
  // bytes (no HTTP library on the hot path): the generator should spend as little as possible
  // per answer, since it shares the machine with the server it measures.
  void send(const char* method, const std::string& target, const std::string& body,
            void (Rank::*next)()) {
    out_ = std::string(method) + " " + target + " HTTP/1.1\r\nHost: load\r\n" + job_.credentials;
    if (!body.empty()) {
      out_ += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\n";
    }
    out_ += "\r\n" + body;
    asio::async_write(socket_, asio::buffer(out_),
                      [self = this->shared_from_this(), next](beast::error_code ec, std::size_t) {
                        if (ec) return self->fail("write", ec);
                        self->read_head(next);
                      });
  }

  void read_head(void (Rank::*next)()) {
    asio::async_read_until(
        socket_, asio::dynamic_buffer(in_), "\r\n\r\n",
        [self = this->shared_from_this(), next](beast::error_code ec, std::size_t head) {
          if (ec) return self->fail("read", ec);
          const std::size_t length = content_length(std::string_view(self->in_).substr(0, head));
          std::size_t missing =
              head + length > self->in_.size() ? head + length - self->in_.size() : 0;
          asio::async_read(self->socket_, asio::dynamic_buffer(self->in_),
                           asio::transfer_exactly(missing),
                           [self, next, head, length](beast::error_code ec2, std::size_t) {
                             if (ec2) return self->fail("read body", ec2);
                             self->on_answer(head, length, next);
                           });
        });
  }

  void on_answer(std::size_t head, std::size_t length, void (Rank::*next)()) {
    ++requests;
    bool ok = in_.compare(9, 3, "200") == 0;
    std::string body = in_.substr(head, length);
    in_.erase(0, head + length);
    if (!ok) {
      std::fprintf(stderr, "rank %d: %s\n", rank_, body.c_str());
      ++failures;
      return;
    }
    ((*this).*next)();
  }

  void ask() {
    auto r = static_cast<std::size_t>(round_);
    {
      std::lock_guard guard(lock);
      if (++job_.asked[r] == job_.ranks) job_.last_ask[r] = Clock::now();
    }
    send("GET",
         "/schedule/" + job_.id + "?rank=" + std::to_string(rank_) +
             "&round=" + std::to_string(round_),
         "", &Rank::on_schedule);
  }

  void on_schedule() {
    auto r = static_cast<std::size_t>(round_);
    auto now = Clock::now();
    std::unique_lock guard(lock);
    job_.answered[r].push_back(std::chrono::duration<double>(now - job_.last_ask[r]).count());
    if (static_cast<int>(job_.answered[r].size()) == job_.ranks) {
      round_latencies.push_back(
          *std::max_element(job_.answered[r].begin(), job_.answered[r].end()));
      all_latencies.insert(all_latencies.end(), job_.answered[r].begin(), job_.answered[r].end());
    }
    guard.unlock();
    std::string body = "{\"rank\":" + std::to_string(rank_) +
                       ",\"round\":" + std::to_string(round_) + job_.result_fields;
    send("POST", "/result/" + job_.id, std::move(body), &Rank::on_result);
  }

  void on_result() {
    if (++round_ < rounds_) ask();
  }

  void fail(const char* what, beast::error_code ec) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what, ec.message().c_str());
    ++failures;
  }

  Stream socket_;
  tcp::resolver::results_type endpoints_;
  JobState& job_;
  int rank_;
  int rounds_;
  int round_ = 0;
  std::string out_, in_;
};

// The TLS context of every connection with --tls 1 (no verification).
asio::ssl::context& tls_context() {
  static asio::ssl::context context = [] {
    asio::ssl::context c(asio::ssl::context::tls_client);
    c.set_verify_mode(asio::ssl::verify_none);
    return c;
  }();
  return context;
}

// Writes `req` on `stream` and reads the answer.
template <class Stream>
http::response<http::string_body> round_trip(Stream& stream,
                                             const http::request<http::string_body>& req) {
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return res;
}

// A blocking request on a fresh connection (setup: registration).
http::response<http::string_body> blocking(asio::io_context& io, const Settings& s, http::verb verb,
                                           const std::string& target, const std::string& body,
                                           const std::string& secret = "") {
  tcp::resolver resolver(io);
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "load");
  req.set(http::field::content_type, "application/json");
  if (!s.token.empty()) req.set(http::field::authorization, "Bearer " + s.token);
  if (!secret.empty()) req.set("X-Perseus-Job-Secret", secret);
  req.body() = body;
  req.prepare_payload();
  http::response<http::string_body> res;
  if (s.tls) {
    asio::ssl::stream<beast::tcp_stream> stream(io, tls_context());
    beast::get_lowest_layer(stream).connect(resolver.resolve(s.host, s.port));
    stream.handshake(asio::ssl::stream_base::client);
    res = round_trip(stream, req);
  } else {
    beast::tcp_stream stream(io);
    stream.connect(resolver.resolve(s.host, s.port));
    res = round_trip(stream, req);
  }
  if (res.result() != http::status::ok) {
    std::fprintf(stderr, "%s: HTTP %d: %s\n", target.c_str(), res.result_int(), res.body().c_str());
    std::exit(1);
  }
  return res;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[index];
}

// The options; nullopt (after a message) when one is unknown or the values do not fit together.
std::optional<Settings> parse_settings(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--port")
      s.port = value;
    else if (key == "--jobs")
      s.jobs = std::atoi(value.c_str());
    else if (key == "--ranks")
      s.ranks = std::atoi(value.c_str());
    else if (key == "--rounds")
      s.rounds = std::atoi(value.c_str());
    else if (key == "--pp")
      s.pp = std::atoi(value.c_str());
    else if (key == "--threads")
      s.threads = std::max(1, std::atoi(value.c_str()));
    else if (key == "--scheduler-args")
      s.scheduler_args = value;
    else if (key == "--token")
      s.token = value;
    else if (key == "--frequencies")
      s.frequencies = value;
    else if (key == "--breakdown")
      s.breakdown = std::atoi(value.c_str());
    else if (key == "--tls")
      s.tls = value == "1";
    else {
      std::fprintf(stderr, "load_client: unknown option %s\n", key.c_str());
      return std::nullopt;
    }
  }
  if (s.port.empty() || s.jobs < 1 || s.ranks < 1 || s.rounds < 1 || s.pp < 1 ||
      s.ranks % s.pp != 0) {
    std::fprintf(stderr,
                 "usage: load_client --port P [--jobs J] [--ranks N] [--pp S (divides N)] "
                 "[--rounds R] [--threads T] [--scheduler-args JSON] [--token T] "
                 "[--frequencies JSON] [--breakdown N] [--tls 0|1]\n");
    return std::nullopt;
  }
  return s;
}

// A result's fields after rank and round: two iterations, and with `breakdown` > 0 each
// iteration's `breakdown` forwards and backwards, as a Perseus client reports them.
std::string result_fields(int breakdown) {
  std::string fields = ",\"iter_time\":[1.0,1.0],\"iter_energy\":[400.0,400.0]";
  if (breakdown <= 0) return fields + "}";
  std::string iteration = "[";
  for (int i = 0; i < breakdown; ++i) iteration += (i ? ",0.0123456" : "0.0123456");
  iteration += "]";
  const std::string both = "[" + iteration + "," + iteration + "]";
  const std::string per_instruction = "{\"forward\":" + both + ",\"backward\":" + both + "}";
  return fields + ",\"time_breakdown\":" + per_instruction +
         ",\"energy_breakdown\":" + per_instruction + "}";
}

// Registers one job and its ranks (blocking requests) and sizes its per-round statistics.
void register_job(asio::io_context& io, const Settings& s, JobState& job) {
  int dp = s.ranks / s.pp;
  std::string info =
      "{\"job_id\":\"\",\"pp_degree\":" + std::to_string(s.pp) +
      ",\"dp_degree\":" + std::to_string(dp) +
      ",\"tp_degree\":1,\"world_size\":" + std::to_string(s.ranks) + ",\"job_metadata\":\"load\"" +
      (s.scheduler_args.empty() ? "" : ",\"scheduler_args\":" + s.scheduler_args) + "}";
  auto registered = blocking(io, s, http::verb::post, "/register_job", info);
  const std::string& id = registered.body();
  job.id = id.substr(1, id.size() - 2);
  std::string secret(registered["X-Perseus-Job-Secret"]);
  if (!s.token.empty()) {
    job.credentials =
        "Authorization: Bearer " + s.token + "\r\nX-Perseus-Job-Secret: " + secret + "\r\n";
  }
  job.ranks = s.ranks;
  job.result_fields = result_fields(s.breakdown);
  job.asked.assign(static_cast<std::size_t>(s.rounds), 0);
  job.last_ask.resize(static_cast<std::size_t>(s.rounds));
  job.answered.resize(static_cast<std::size_t>(s.rounds));
  for (int r = 0; r < s.ranks; ++r) {
    // Megatron order: data parallelism varies fastest, then pipeline stage.
    std::string rank = "{\"rank\":" + std::to_string(r) + ",\"dp_rank\":" + std::to_string(r % dp) +
                       ",\"pp_rank\":" + std::to_string(r / dp) +
                       ",\"tp_rank\":0,\"available_frequencies\":" + s.frequencies + "}";
    blocking(io, s, http::verb::post, "/register_rank/" + job.id, rank, secret);
  }
}

void print_results(const Settings& s, double setup_s, double wall) {
  std::printf("jobs %d ranks_per_job %d rounds %d\n", s.jobs, s.ranks, s.rounds);
  std::printf("registration_s %.3f\n", setup_s);
  std::printf("run_s %.3f\n", wall);
  std::printf("requests %ld\n", requests.load());
  std::printf("requests_per_s %.0f\n", static_cast<double>(requests) / wall);
  std::printf("barrier_latency_p50_ms %.2f\n", 1e3 * percentile(all_latencies, 0.50));
  std::printf("barrier_latency_p99_ms %.2f\n", 1e3 * percentile(all_latencies, 0.99));
  std::printf("round_latency_p50_ms %.2f\n", 1e3 * percentile(round_latencies, 0.50));
  std::printf("round_latency_p99_ms %.2f\n", 1e3 * percentile(round_latencies, 0.99));
  std::printf("failures %d\n", failures.load());
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Settings> settings = parse_settings(argc, argv);
  if (!settings) return 2;
  const Settings& s = *settings;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  asio::io_context io;
  auto setup_start = Clock::now();
  std::vector<JobState> jobs(static_cast<std::size_t>(s.jobs));
  for (auto& job : jobs) register_job(io, s, job);
  double setup_s = seconds_since(setup_start);
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(s.host, s.port);
  auto start = Clock::now();
  for (auto& job : jobs) {
    for (int r = 0; r < s.ranks; ++r) {
      if (s.tls) {
        std::make_shared<Rank<asio::ssl::stream<tcp::socket>>>(io, endpoints, job, r, s.rounds,
                                                               tls_context())
            ->start();
      } else {
        std::make_shared<Rank<tcp::socket>>(io, endpoints, job, r, s.rounds)->start();
      }
    }
  }
  // --threads event-loop threads (default 1: on a 2-core machine the server needs the other).
  std::vector<std::thread> extra;
  for (int t = 1; t < s.threads; ++t) extra.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : extra) t.join();
  print_results(s, setup_s, seconds_since(start));
  return failures == 0 && static_cast<int>(round_latencies.size()) == s.jobs * s.rounds ? 0 : 1;
}
