// `perseus schedule`: writes a schedule's per-rank action lists in PyTorch's notation (the CSV
// --schedule-file reads and torch's _dump_csv writes), to look at, edit, or compare with what
// torch runs. Also checks a schedule file (--schedule-file) and prints its shape.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/schedule/schedule_file.hpp"
#include "perseus/util/files.hpp"

namespace perseus::cli {

namespace {

struct ScheduleArgs {
  ScheduleOptions schedule;
  int stages = 0, microbatches = 0;
  std::string out = "-";
};

void run_schedule(const ScheduleArgs& a) {
  const bool named = a.schedule.file.empty();  // a file gives its own stages and microbatches
  if (named) {
    require(a.stages > 0, "--stages is required (pipeline stages, virtual stages included)");
    require_microbatches(a.microbatches, a.schedule, "to build a schedule");
  }
  schedule::Schedule s =
      options_schedule(a.schedule, named ? a.stages : 0, named ? a.microbatches : 0);
  write_file_atomic(a.out, schedule::schedule_to_csv(s));
  std::fprintf(summary_stream(a.out), "%s: %d stages on %d GPUs, %d microbatches, %zu actions\n",
               s.name.c_str(), s.num_stages, s.num_ranks(), s.num_microbatches,
               s.num_instructions());
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "schedule",
      "Write a schedule's per-rank actions in PyTorch's notation (CSV, one row per GPU)");
  add_schedule_options(cmd, a->schedule, "default 1f1b");
  cmd->add_option("--stages", a->stages, "Pipeline stages, virtual stages included");
  cmd->add_option("--microbatches", a->microbatches, "Microbatches per iteration");
  cmd->add_option("--out", a->out, "Output file (default: standard output)");
  cmd->callback([a] { run_schedule(*a); });
}

}  // namespace perseus::cli
