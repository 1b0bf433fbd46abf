// Subcommands of the `perseus` command line. Each add_* registers one subcommand (with its
// options and --help) on the top-level app; the callback runs the job and throws perseus::Error
// on failure, which main() prints as one line before exiting non-zero.
#pragma once

namespace CLI {
class App;
}

namespace perseus::cli {

void add_profile_command(CLI::App& app);  // perseus profile synth|check
void add_plan_command(CLI::App& app);     // perseus plan [evaluate|export]

}  // namespace perseus::cli
