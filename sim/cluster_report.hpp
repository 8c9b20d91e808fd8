#pragma once
// What a cluster run tells its user: cluster-wide figures (latencies from
// each request's arrival at the router, prefix hits by tier including the
// remote tier, the network) and, per replica, its role, what it was routed
// and the full single-node report of its graph. JSON and a terminal table.

#include "run/report.hpp"
#include "runtime/config.hpp"
#include "sim/cluster_simulation.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace kvtier::sim {

nlohmann::json cluster_json(const config& cfg, const cluster_result& result, const run_labels& labels);
std::string cluster_table(const nlohmann::json& report);

} // namespace kvtier::sim
