#pragma once
// The experiment's report: one self-contained HTML page (inline SVG from
// experiment/svg_plot.hpp, inline CSS, no script, no network) over
// results.json (experiment/results.hpp). What it shows, where the points
// carry it:
//   timed runs   TTFT and TPOT CDFs; HBM occupancy and each busy link's rate
//                over time against capacity and link limit
//   every run    the hit ratio along the report's x key (the first swept key
//                unless [report] x names one), a line per value of the other
//                keys, Belady's bound dashed where cache-only runs carry it;
//                bars comparing the points; a table of every point
// Failed points are listed with their error and left out of the plots.

#include <nlohmann/json.hpp>

#include <string>

namespace kvtier::experiment {

std::string html_report(const nlohmann::json& results);

} // namespace kvtier::experiment
