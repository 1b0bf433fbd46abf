// `perseus serve`: the control-plane server (DESIGN section 7), and `perseus export-job`: a
// stored job written out in the reference dump layout.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/server/control_plane.hpp"
#include "perseus/server/dump_export.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::cli {
namespace {

struct ServeArgs {
  std::string address = "127.0.0.1", store = "perseus-store.sqlite", scheduler, args = "{}";
  std::string output_dir = "perseus-out";
  int port = 7787;
};

// One connection per waiting rank: allow as many open files as the hard limit permits.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void serve(const ServeArgs& a) {
  require(a.port >= 0 && a.port <= 65535, "--port must be in 0..65535");
  server::ServerSettings settings;
  settings.store_path = a.store;
  settings.scheduler = a.scheduler;
  settings.scheduler_args = naming("--scheduler-args", [&] { return wire::parse_json(a.args); });
  require(settings.scheduler_args.is_object(), "--scheduler-args must be a JSON object");
  settings.output_dir = a.output_dir;
  raise_open_file_limit();
  server::ControlPlane plane(settings);
  server::HttpServer http(plane, a.address, static_cast<unsigned short>(a.port));
  std::printf("listening on http://%s:%u (store %s, %zu job(s) restored)\n", a.address.c_str(),
              http.port(), a.store.c_str(), plane.num_jobs());
  std::fflush(stdout);
  http.run();
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
  std::string names;
  for (const auto& n : server::scheduler_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--scheduler", args->scheduler,
                  "default scheduler for jobs that name none (" + names + ")");
  cmd->add_option("--scheduler-args", args->args, "default scheduler arguments (JSON object)")
      ->capture_default_str();
  cmd->add_option("--output-dir", args->output_dir,
                  "where schedulers write files (one folder per job)")
      ->capture_default_str();
  cmd->callback([args] { serve(*args); });
}

void add_export(CLI::App& app) {
  struct Args {
    std::string store, job, out;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "export-job", "Write a stored job in the reference dump layout (N.sched.json, N.prof.json)");
  cmd->add_option("--store", args->store, "SQLite store of perseus serve")->required();
  cmd->add_option("--job", args->job, "job id")->required();
  cmd->add_option("--out", args->out, "output directory")->required();
  cmd->callback([args] {
    server::Store store(args->store);
    int rounds = server::export_job(store.load(args->job), args->out);
    std::printf("exported %d round(s) of %s to %s\n", rounds, args->job.c_str(), args->out.c_str());
  });
}

}  // namespace

void add_serve_command(CLI::App& app) {
  add_serve(app);
  add_export(app);
}

}  // namespace perseus::cli
