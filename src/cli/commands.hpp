// Subcommands of the `perseus` command line. Each add_* registers one subcommand (with its
// options and --help) on the top-level app; the callback runs the job and throws perseus::Error
// on failure, which main() prints as one line before exiting non-zero.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace perseus::cli {

void add_profile_command(CLI::App& app);   // perseus profile synth|split|check
void add_plan_command(CLI::App& app);      // perseus plan [evaluate|export]
void add_emulate_command(CLI::App& app);   // perseus emulate [cluster]
void add_baseline_command(CLI::App& app);  // perseus baseline all-max|uniform|envpipe|zeus-*
void add_report_command(CLI::App& app);    // perseus report
void add_serve_command(CLI::App& app);     // perseus serve | export-job
void add_simulate_command(CLI::App& app);  // perseus simulate-training
void add_search_command(CLI::App& app);    // perseus search [evaluate|grid]
void add_gpu_command(CLI::App& app);       // perseus gpu probe
void add_schedule_command(CLI::App& app);  // perseus schedule
// perseus completion bash | man: generated from every command added before it, so added last.
void add_docs_command(CLI::App& app, const std::string& version);

}  // namespace perseus::cli
