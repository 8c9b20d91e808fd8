#pragma once
// Each `kvtier` subcommand registers itself on the CLI11 app; main() runs the
// one the user chose.

#include <CLI/CLI.hpp>

#include <functional>

namespace kvtier::cli {

struct command {
  CLI::App* app;
  std::function<int()> run; // returns the exit code
};

command add_calc_command(CLI::App& app);
command add_sim_command(CLI::App& app);
command add_run_command(CLI::App& app);
command add_eval_compression_command(CLI::App& app);
command add_eval_quality_command(CLI::App& app);
command add_calibrate_command(CLI::App& app);
command add_nvme_command(CLI::App& app);
command add_experiment_command(CLI::App& app);
/// Only where kvtierd's cluster roles were built (KVTIER_HAVE_NODE).
command add_route_command(CLI::App& app);

} // namespace kvtier::cli
