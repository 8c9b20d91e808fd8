#pragma once
// What every front end of a timed simulation shares (the `kvtier sim` command,
// the Python package): the trace a config names, and the rules that decide
// whether a run may start and whether its figures can be trusted. One place,
// so the command and the package refuse the same runs with the same words.

#include "run/run_result.hpp"
#include "runtime/config.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/trace.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace kvtier::sim {

/// The trace `cfg` names (the bundled one when it names none, a generated one
/// for trace_format = "synthetic"), read with [sim]'s max_requests,
/// time_scale, skip_bad and trace_block_tokens.
caf::expected<trace> read_configured_trace(const config& cfg);

/// Why `cfg` cannot be a timed run (errc::invalid_config), or none:
/// policy = "oracle" knows the future and runs only as a cache-only replay.
caf::error timed_run_refusal(const config& cfg);

/// Why a finished run's report cannot be trusted, or none: the virtual clock
/// saturated, or some request was neither completed nor rejected.
caf::error untrusted_run(const run_result& result);

/// Why a finished cluster run's report cannot be trusted, or none: some
/// replica's virtual clock saturated, or some request was neither completed
/// nor rejected.
caf::error untrusted_run(const cluster_result& result);

} // namespace kvtier::sim
