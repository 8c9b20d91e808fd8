// `kvtier experiment X.toml`: a sweep over any config keys (experiment/),
// its points run over the machine's cores, results and report in one folder.

#include "cli/commands.hpp"
#include "experiment/experiment_spec.hpp"
#include "experiment/sweep_runner.hpp"
#include "runtime/error.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <memory>

namespace kvtier::cli {
namespace {

struct experiment_cli_options {
  std::string spec_path;
  std::string out_dir;
  unsigned jobs = 0;
  uint32_t stop_after = 0;
  bool quiet = false;
  bool report_only = false;
};

int fail(const std::string& message) {
  fmt::print(stderr, "kvtier experiment: {}\n", message);
  return 2;
}

int run_experiment(const experiment_cli_options& o) {
  auto spec = experiment::load_experiment(o.spec_path);
  if (!spec)
    return fail(describe(spec.error()));
  std::string out_dir = o.out_dir.empty() ? "experiments/" + spec->name : o.out_dir;
  if (!o.report_only) {
    fmt::print("kvtier experiment {}: {} points ({}), results in {}\n", spec->name, spec->points.size(),
               spec->mode == experiment::run_mode::timed ? "timed" : "cache-only", out_dir);
    std::fflush(stdout);
    experiment::sweep_options so;
    so.out_dir = out_dir;
    so.jobs = o.jobs;
    so.stop_after = o.stop_after;
    so.progress_bar = !o.quiet && isatty(STDERR_FILENO);
    auto outcome = experiment::run_sweep(*spec, so);
    if (!outcome)
      return fail(describe(outcome.error()));
    fmt::print("  {} points: {} finished before, {} run now ({} failed) in {:.2f} s\n", outcome->points,
               outcome->reused, outcome->ran, outcome->failed, outcome->wall_seconds);
    if (outcome->interrupted) {
      fmt::print(stderr,
                 "kvtier experiment: interrupted; {} of {} points finished and kept; run the same command "
                 "again to finish the rest\n",
                 outcome->reused + outcome->ran, outcome->points);
      return 130;
    }
  }
  if (auto err = experiment::write_results(*spec, out_dir))
    return fail(describe(err));
  fmt::print("  wrote {0}/results.csv, {0}/results.json, {0}/report.html\n", out_dir);
  return 0;
}

} // namespace

command add_experiment_command(CLI::App& app) {
  auto o = std::make_shared<experiment_cli_options>();
  auto* sub = app.add_subcommand("experiment", "Run a sweep over config keys; write CSV, JSON and an HTML report");
  sub->add_option("spec", o->spec_path, "experiment file (TOML): a base config and a [sweep]")->required();
  sub->add_option("-o,--out", o->out_dir,
                  "output folder (default: experiments/<spec name>); finished points in it "
                  "are reused");
  sub->add_option("-j,--jobs", o->jobs, "runs at once (default: one per core)");
  sub->add_option("--stop-after", o->stop_after, "stop as if interrupted after N points (for testing resumption)")
      ->group("");
  sub->add_flag("--report-only", o->report_only, "rewrite results and report from the finished points");
  sub->add_flag("--quiet", o->quiet, "no progress bar");
  return {sub, [o] { return run_experiment(*o); }};
}

} // namespace kvtier::cli
