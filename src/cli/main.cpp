// The `perseus` command: one subcommand per job (architecture section 2).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.hpp"
#include "cli/did_you_mean.hpp"
#include "perseus/util/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Perseus: remove energy bloat from pipeline-parallel training"};
  app.set_version_flag("--version", "perseus " PERSEUS_VERSION);
  app.require_subcommand(1);
  // One mark for a required option: "(required)" at the end of its description, also for those
  // only some subcommands need (checked at run time), never CLI11's own "REQUIRED" beside it.
  app.get_formatter()->label("REQUIRED", "");
  app.footer("Documentation: docs/ of the source tree, installed in " PERSEUS_DOC_DIR
             ": formats.md (profile CSV, plans, frontier directory), protocol.md (wire protocol, "
             "schedulers), control-plane.md, integration.md (DeepSpeed, Megatron-LM, "
             "torch.distributed.pipelining, real GPUs), planning-from-python.md. `perseus COMMAND "
             "--help` lists a command's "
             "options.");
  perseus::cli::add_profile_command(app);
  perseus::cli::add_plan_command(app);
  perseus::cli::add_emulate_command(app);
  perseus::cli::add_baseline_command(app);
  perseus::cli::add_report_command(app);
  perseus::cli::add_serve_command(app);
  perseus::cli::add_simulate_command(app);
  perseus::cli::add_search_command(app);
  perseus::cli::add_gpu_command(app);
  perseus::cli::add_schedule_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, like every other bad input: an unknown option, a value that is not a number.
    // A word that names nothing says so, with the closest name, rather than CLI11's message.
    const std::string unknown = perseus::cli::unknown_word(app, argc, argv);
    std::fprintf(stderr, "perseus: error: %s (see --help)\n",
                 unknown.empty() ? e.what() : unknown.c_str());
    return 1;
  } catch (const perseus::Error& e) {
    std::fprintf(stderr, "perseus: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "perseus: internal error: %s\n", perseus::reason_of(e).c_str());
    return 2;
  }
  return 0;
}
