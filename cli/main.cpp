// kvtier: the command-line entry point. Subcommands live in *_command.cpp.

#include "cli/commands.hpp"
#include "kvtier/build_info.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace {

std::string version_text() {
  return fmt::format("kvtier {}\n  CUDA kernels: {}\n  io_uring page store: {}", kvtier::build_info::version,
                     kvtier::build_info::cuda ? "built" : "not built (no nvcc at build time)",
                     kvtier::build_info::io_uring ? "built" : "not built");
}

// Runs a command, then makes sure what it printed reached standard output: a
// report piped into a full disk (or /dev/full) must not end with exit 0.
int run_checked(const kvtier::cli::command& c) {
  int code = 0;
  try {
    code = c.run();
  } catch (const std::system_error& e) { // fmt::print when a write fails mid-way
    std::fflush(stdout);
    fmt::print(stderr, "kvtier: cannot write the output: {}\n", e.what());
    return 1;
  }
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    fmt::print(stderr, "kvtier: cannot write the standard output: {}\n", errno ? std::strerror(errno) : "write error");
    return code != 0 ? code : 1;
  }
  return code;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtier: a tiered KV-cache runtime for LLM inference (HBM, DRAM, NVMe)"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  std::vector<kvtier::cli::command> commands{
      kvtier::cli::add_calc_command(app),       kvtier::cli::add_sim_command(app),
      kvtier::cli::add_run_command(app),        kvtier::cli::add_eval_compression_command(app),
      kvtier::cli::add_calibrate_command(app),  kvtier::cli::add_nvme_command(app),
      kvtier::cli::add_experiment_command(app), kvtier::cli::add_eval_quality_command(app),
  };
#if KVTIER_HAVE_NODE
  commands.push_back(kvtier::cli::add_route_command(app));
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : commands)
    if (c.app->parsed())
      return run_checked(c);
  return 1;
}
