#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace perseus::cli {

void add_simulate_command(CLI::App& /*app*/) {}  // being written this session

}  // namespace perseus::cli
