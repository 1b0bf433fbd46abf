// `perseus serve`: the control-plane server (architecture section 7), and `perseus export-job`: a
// stored job written out in the reference dump layout.
#include <sys/resource.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/server/control_plane.hpp"
#include "perseus/server/dump_export.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/job.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/util/log.hpp"
#include "perseus/util/text.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::cli {
namespace {

struct ServeArgs {
  std::string address = "127.0.0.1", store = "perseus-store.sqlite", scheduler, args;
  std::string output_dir = "perseus-out", data_dir = ".";
  std::string log_level = "info", log_file, token_file;
  server::TlsFiles tls;
  bool insecure = false;
  int port = 7787;
  server::HttpLimits limits;
  int max_ranks = server::ServerSettings{}.max_ranks, max_jobs = server::ServerSettings{}.max_jobs;
  std::uint64_t max_memory = server::ServerSettings{}.max_memory_bytes;
  double stale_after = server::ServerSettings{}.stale_after_s;
  double expire_finished_after = server::ServerSettings{}.expire_finished_after_s;
  double expire_abandoned_after = server::ServerSettings{}.expire_abandoned_after_s;
  double store_retry = server::ServerSettings{}.store_retry_s;
};

// One connection per waiting rank: allow as many open files as the hard limit permits.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The cluster token: --token-file's first line, else $PERSEUS_TOKEN, else "" (none).
std::string cluster_token(const ServeArgs& a) {
  if (!a.token_file.empty()) return token_from_file(a.token_file);
  const char* env = std::getenv("PERSEUS_TOKEN");
  return env ? env : "";
}

// Warns when users other than the owner may read the token file.
void warn_if_others_may_read(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    log::warn("--token-file " + path + " may be read by other users of this host; chmod 600 it");
  }
}

bool is_loopback(const std::string& address) {
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(address, ec);
  return !ec && ip.is_loopback();
}

// --option when given, else Zeus's environment variable `env` (a Zeus server's configuration
// works unchanged), else `fallback`; `from` says which, for the log.
std::string option_or_env(const std::string& option, const char* env, const std::string& fallback,
                          std::string& from) {
  const char* value = std::getenv(env);
  if (!option.empty() || !value || !*value) return option.empty() ? fallback : option;
  from = env;
  return value;
}

// The default scheduler and its arguments: --scheduler/--scheduler-args, else Zeus's
// ZEUS_PFO_SCHEDULER/ZEUS_PFO_SCHEDULER_ARGS.
void default_scheduler(const ServeArgs& a, server::ServerSettings& settings) {
  std::string& name_from = settings.scheduler_from;
  std::string& args_from = settings.scheduler_args_from;
  settings.scheduler = option_or_env(a.scheduler, "ZEUS_PFO_SCHEDULER", "", name_from);
  std::string text = option_or_env(a.args, "ZEUS_PFO_SCHEDULER_ARGS", "{}", args_from);
  settings.scheduler_args = naming(args_from, [&] { return wire::parse_json(text); });
  require(settings.scheduler_args.is_object(), args_from + " must be a JSON object");
  if (name_from != "--scheduler" || args_from != "--scheduler-args") {
    log::info("default scheduler from the environment: " + settings.scheduler + " " +
              settings.scheduler_args.dump());
  }
}

void serve(ServeArgs a) {
  require(a.port >= 0 && a.port <= 65535, "--port must be in 0..65535");
  server::ServerSettings settings;
  settings.store_path = a.store;
  settings.output_dir = a.output_dir;
  settings.data_dir = a.data_dir;
  require(a.max_ranks >= 1, "--max-ranks must be >= 1");
  require(a.max_jobs >= 1, "--max-jobs must be >= 1");
  require(a.stale_after > 0.0 && std::isfinite(a.stale_after),
          "--stale-after must be a positive number of seconds");
  settings.stale_after_s = a.stale_after;
  for (auto [value, name] : {std::pair{a.expire_finished_after, "--expire-finished-after"},
                             std::pair{a.expire_abandoned_after, "--expire-abandoned-after"}}) {
    require(value >= 0.0 && std::isfinite(value),
            std::string(name) + " must be a number of seconds >= 0 (0: never)");
  }
  require(a.store_retry >= 0.0 && std::isfinite(a.store_retry),
          "--store-retry-for must be a number of seconds >= 0");
  settings.store_retry_s = a.store_retry;
  settings.expire_finished_after_s = a.expire_finished_after;
  settings.expire_abandoned_after_s = a.expire_abandoned_after;
  settings.max_ranks = a.max_ranks;
  const std::uint64_t largest = server::job_memory_bytes(a.max_ranks, 0);
  require(a.max_memory >= largest, "--max-memory must hold a job of --max-ranks " +
                                       std::to_string(a.max_ranks) + " ranks: at least " +
                                       std::to_string(largest >> 20) + " MiB");
  settings.max_memory_bytes = a.max_memory;
  settings.max_jobs = a.max_jobs;
  a.limits.validate();
  log::configure(log::parse_level(a.log_level), a.log_file);
  default_scheduler(a, settings);
  settings.token = cluster_token(a);
  require(!settings.token.empty() || is_loopback(a.address) || a.insecure,
          "--address " + a.address +
              " is reachable from other hosts: give a cluster token (--token-file or "
              "PERSEUS_TOKEN), or --insecure to serve without one");
  if (settings.token.empty()) {
    log::warn(is_loopback(a.address)
                  ? "no cluster token: any process on this host may use the server "
                    "(Zeus-compatible mode, loopback only)"
                  : "no cluster token and --insecure: anyone who reaches " + a.address +
                        " may use the server");
  } else {
    if (settings.token.size() < 16) {
      log::warn("the cluster token has fewer than 16 characters; use a long random one");
    }
    if (!a.token_file.empty()) warn_if_others_may_read(a.token_file);
    if (!is_loopback(a.address) && a.tls.cert.empty()) {
      log::warn("--address " + a.address +
                " is reachable from other hosts without TLS: the cluster token and the job "
                "secrets cross the network in clear text (--tls-cert, --tls-key)");
    }
  }
  raise_open_file_limit();
  server::ControlPlane plane(settings);
  server::HttpServer http(plane, a.address, static_cast<unsigned short>(a.port), a.limits, a.tls);
  std::printf("listening on %s://%s:%u (store %s, %zu job(s) restored)\n",
              http.tls() ? "https" : "http", a.address.c_str(), http.port(), a.store.c_str(),
              plane.num_jobs());
  std::fflush(stdout);
  http.run();
}

// What one peer may cost the server: request sizes, deadlines, jobs and ranks.
void add_limit_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--max-body", a.limits.max_body,
                  "bytes of one result or straggler report body (other requests: 64 KiB)")
      ->capture_default_str();
  cmd->add_option("--max-inflight-bytes", a.limits.max_inflight_bytes,
                  "bytes of request bodies read at once over all connections (more: 503)")
      ->capture_default_str();
  cmd->add_option("--max-inflight-bytes-per-peer", a.limits.max_inflight_bytes_per_peer,
                  "bytes of request bodies read at once from one peer address (more: 503)")
      ->capture_default_str();
  cmd->add_option("--max-connections", a.limits.max_connections,
                  "connections open at once; more are closed at once (0: the open-file limit "
                  "less 64)")
      ->capture_default_str();
  cmd->add_option("--max-connections-per-peer", a.limits.max_connections_per_peer,
                  "connections open at once from one peer address")
      ->capture_default_str();
  cmd->add_option("--first-request-timeout", a.limits.first_request_timeout_s,
                  "seconds from a connection's start to its first request with credentials in "
                  "(the health check does not count)")
      ->capture_default_str();
  cmd->add_option("--header-timeout", a.limits.header_timeout_s,
                  "seconds a request header may take from its first byte")
      ->capture_default_str();
  cmd->add_option("--body-timeout", a.limits.body_timeout_s,
                  "seconds a request body, or taking an answer, may take")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", a.limits.idle_timeout_s,
                  "seconds a connection may wait between requests")
      ->capture_default_str();
  cmd->add_option("--max-ranks", a.max_ranks, "world_size of one job at most")
      ->capture_default_str();
  cmd->add_option("--max-jobs", a.max_jobs, "jobs in the store at most")->capture_default_str();
  cmd->add_option("--max-memory", a.max_memory,
                  "server memory all jobs held may take (8 KiB a rank, 128 bytes an instruction "
                  "of their plans), in bytes or with a unit: 512MiB, 4GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("4GiB");
}

// "604800 (7 days)": a default number of seconds as --help shows it.
std::string seconds_and_days(double seconds) {
  return std::to_string(std::lround(seconds)) + " (" +
         std::to_string(std::lround(seconds / 86400)) + " days)";
}

// `perseus serve delete-job`: deletes a job from a store no server is using (a serving server
// deletes with DELETE /jobs/{id}).
void add_delete_job(CLI::App* serve_cmd) {
  struct Args {
    std::string store = ServeArgs{}.store, job, data_dir = ServeArgs{}.data_dir;
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = serve_cmd->add_subcommand(
      "delete-job",
      "Delete a job from a store no server is using (a serving server: DELETE "
      "/jobs/{id})");
  cmd->add_option("--store", args->store, "SQLite store of perseus serve")->capture_default_str();
  cmd->add_option("--job", args->job, "job id (required)")->required();
  cmd->add_option("--data-dir", args->data_dir,
                  "the server's --data-dir (to tell whether the job is still running)")
      ->capture_default_str();
  cmd->add_flag("--force", args->force, "delete a registering or running job too");
  cmd->callback([args] {
    server::ServerSettings settings;
    settings.store_path = args->store;
    settings.data_dir = args->data_dir;
    settings.expire_finished_after_s = settings.expire_abandoned_after_s = 0;
    std::optional<server::ControlPlane> plane;
    try {
      plane.emplace(settings);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) +
                  " (while a server uses the store, delete with DELETE /jobs/{id})");
    }
    const server::Reply reply = plane->delete_job(args->job, args->force);
    require(reply.status == 200, reply.body.value("detail", "cannot delete"));
    std::printf("deleted job %s (%s) from %s\n", args->job.c_str(),
                reply.body["state"].get<std::string>().c_str(), args->store.c_str());
  });
}

void add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run the control-plane server: jobs register, every rank fetches its frequency plan (a "
      "barrier across the job's ranks) and reports measurements; state lives in a SQLite store");
  cmd->add_option("--port", args->port, "TCP port (0: any free port)")->capture_default_str();
  cmd->add_option("--address", args->address, "IP address to bind")->capture_default_str();
  cmd->add_option("--store", args->store, "SQLite store (created if missing; restored if not)")
      ->capture_default_str();
  const std::string names = join(server::scheduler_names());
  cmd->add_option("--scheduler", args->scheduler,
                  "default scheduler for jobs that name none (" + names +
                      "; Zeus's names too); default $ZEUS_PFO_SCHEDULER, else none: jobs must "
                      "name one");
  cmd->add_option("--scheduler-args", args->args,
                  "default scheduler arguments (JSON object), checked at start; default "
                  "$ZEUS_PFO_SCHEDULER_ARGS, else {}");
  cmd->add_option("--output-dir", args->output_dir,
                  "where schedulers write files (one folder per job); no output outside it")
      ->capture_default_str();
  cmd->add_option("--data-dir", args->data_dir,
                  "the only folder schedulers may read files from (plans, frontiers)")
      ->capture_default_str();
  add_limit_options(cmd, *args);
  cmd->add_option("--stale-after", args->stale_after,
                  "seconds without a request from a running job's ranks before the status page, "
                  "/jobs and /metrics call it stale")
      ->capture_default_str();
  cmd->add_option("--expire-finished-after", args->expire_finished_after,
                  "seconds without a request after which a done or failed job is deleted from "
                  "the store (0: never)")
      ->default_str(seconds_and_days(args->expire_finished_after));
  cmd->add_option("--expire-abandoned-after", args->expire_abandoned_after,
                  "seconds without a request after which a registering or running job is "
                  "deleted from the store (0: never)")
      ->default_str(seconds_and_days(args->expire_abandoned_after));
  cmd->add_option("--store-retry-for", args->store_retry,
                  "seconds a job retries (every second) a failed store write of its progress "
                  "(a new round, a release) before it fails; 0: fail at once")
      ->capture_default_str();
  cmd->add_option("--token-file", args->token_file,
                  "file whose first line is the cluster token every client must send (default: "
                  "$PERSEUS_TOKEN; none: loopback only)");
  cmd->add_option("--tls-cert", args->tls.cert,
                  "PEM certificate (chain): serve HTTPS only (with --tls-key)");
  cmd->add_option("--tls-key", args->tls.key, "PEM private key of --tls-cert");
  cmd->add_flag("--insecure", args->insecure,
                "allow a non-loopback --address without a cluster token");
  cmd->add_option("--log-level", args->log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->add_option("--log-file", args->log_file, "append the log here instead of stderr");
  add_delete_job(cmd);
  cmd->callback([args, cmd] {
    if (!cmd->got_subcommand("delete-job")) serve(*args);
  });
}

void add_export(CLI::App& app) {
  struct Args {
    std::string store, job, out;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "export-job", "Write a stored job in the reference dump layout (N.sched.json, N.prof.json)");
  cmd->add_option("--store", args->store, "SQLite store of perseus serve (required)")->required();
  cmd->add_option("--job", args->job, "job id (required)")->required();
  cmd->add_option("--out-dir,--out", args->out, "output directory (required)")
      ->required()
      ->check(output_directory());
  cmd->callback([args] {
    server::Store store(args->store, server::Store::Access::reader);
    const auto exported = server::export_job(store.load(args->job), args->out);
    std::printf("exported %d round(s) of %s to %s\n", exported.rounds, args->job.c_str(),
                args->out.c_str());
    const std::string saving = server::saving_text(exported.summary);
    std::printf("state: %s; saving: %s\n", exported.summary["state"].get<std::string>().c_str(),
                saving.empty() ? "none measured yet" : saving.c_str());
    if (exported.summary.contains("error")) {
      std::printf("error: %s\n", exported.summary["error"].get<std::string>().c_str());
    }
  });
}

}  // namespace

void add_serve_command(CLI::App& app) {
  add_serve(app);
  add_export(app);
}

}  // namespace perseus::cli
