// The `perseus` command: one subcommand per job (architecture section 2).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "cli/commands.hpp"
#include "cli/did_you_mean.hpp"
#include "perseus/util/error.hpp"

namespace {

// Where the documentation is: share/doc/perseus under the prefix of the running binary (an
// install with any --prefix), else where this build installs it.
std::string doc_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto dir = exe.parent_path().parent_path() / "share" / "doc" / "perseus";
    if (std::filesystem::exists(dir / "formats.md", ec)) return dir.string();
  }
  return PERSEUS_DOC_DIR;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Perseus: remove energy bloat from pipeline-parallel training"};
  app.set_version_flag("--version", "perseus " PERSEUS_VERSION);
  app.require_subcommand(1);
  // One mark for a required option: "(required)" at the end of its description, also for those
  // only some subcommands need (checked at run time), never CLI11's own "REQUIRED" beside it.
  app.get_formatter()->label("REQUIRED", "");
  app.footer("Documentation: docs/ of the source tree, installed in " + doc_dir() +
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
  perseus::cli::add_docs_command(app, PERSEUS_VERSION);
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
