#pragma once
// One sweep point run to its end and summarized for the experiment's report:
// the run's own report (run/report.hpp's JSON, unchanged) plus what the plots
// need and a report does not keep — TTFT and TPOT at every 2nd percentile, and
// a small time series (series_bins bins) of tier occupancy and link rates.
// Cache-only points replay the trace's blocks and carry, through each tier,
// the hit ratio, LRU's and Belady's bound for the same memory.
//
// Summaries are plain JSON so that a resumed sweep reads finished points back
// exactly as they were written.

#include "experiment/experiment_spec.hpp"
#include "run/run_result.hpp"
#include "runtime/config.hpp"

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>

namespace kvtier::experiment {

/// Bins of the time series: enough to see a run's phases, few enough that a
/// hundred points keep the results file small.
inline constexpr size_t series_bins = 48;

/// Runs the point's config in `mode`; errors are the run's refusal or its
/// untrusted figures (sim/configured_run.hpp).
caf::expected<nlohmann::json> run_point(const config& cfg, run_mode mode);

/// A timed run's distributions and series (exposed for tests).
nlohmann::json quantiles_ms(std::vector<double> seconds);
nlohmann::json time_series(const config& cfg, const run_result& result);

} // namespace kvtier::experiment
