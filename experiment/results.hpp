#pragma once
// What a sweep leaves in its output folder, besides report.html:
//   points/<fingerprint>.json  one finished point each, written atomically
//                              (a temporary file renamed into place), so a
//                              point's file exists whole or not at all
//   results.json               every point in sweep order: its values, label
//                              and summary (experiment/point_run.hpp)
//   results.csv                the same, one row per point, the columns below
// A point's record is its spec entry plus "ok" and either "result" or
// "error". Records are keyed by fingerprint, so a resumed sweep (or one whose
// lists grew) reuses exactly the points whose whole config is unchanged.

#include "experiment/experiment_spec.hpp"

#include <caf/error.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kvtier::experiment {

/// One column of results.csv and of the report's table: a name and where
/// its number is in a point's summary (a JSON pointer).
struct metric_column {
  const char* name;
  const char* pointer;
};
/// The columns of a sweep in `mode`; with `cluster` (some point ran a
/// [cluster] config) also the cluster's own: remote hits, generated tokens
/// per second, the remote tier's reads and the network. A column a point's
/// summary lacks (a single node's batch sizes for a cluster) is left empty.
const std::vector<metric_column>& metric_columns(run_mode mode, bool cluster = false);
/// True when `record` is a finished cluster run's.
bool is_cluster_record(const nlohmann::json& record);

nlohmann::json record_of(const sweep_point& point, const nlohmann::json& result);
nlohmann::json failure_record_of(const sweep_point& point, const std::string& error);

std::string point_file(const std::string& out_dir, const sweep_point& point);
/// Writes `text` to `path` through a temporary file in the same folder and a
/// rename: a reader (or a resumed sweep) sees the old file or the new, whole.
[[nodiscard]] caf::error write_atomically(const std::string& path, const std::string& text);
/// The finished record of `point`, or nullopt when there is none (or it is damaged).
std::optional<nlohmann::json> read_record(const std::string& out_dir, const sweep_point& point);

nlohmann::json results_json(const experiment_spec& spec, const std::vector<nlohmann::json>& records);
std::string results_csv(const experiment_spec& spec, const std::vector<nlohmann::json>& records);
/// A number of a summary as the CSV and the table print it ("" when absent).
std::string cell(const nlohmann::json& result, const char* pointer);

} // namespace kvtier::experiment
