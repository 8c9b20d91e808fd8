#pragma once
// An experiment: one base config and a sweep over any of its keys, read from
// one TOML file (`kvtier experiment X.toml`; docs/experiments.md has the form).
//
//   [experiment]  title, question, base (a config file, relative to this one),
//                 mode ("timed" | "cache-only")
//   [base]        config tables written inline, over the base file's
//   [sweep]       dotted config keys -> lists of values; combine = "cartesian"
//                 (every combination) or "zip" (the i-th value of each list);
//                 zip = [["a.b", "c.d"]] moves those keys together inside a
//                 cartesian sweep;
//                 seeds = [...] repeats every point once per seed, set at
//                 seed_key (default "sim.synthetic.seed"); labels = [...]
//                 names the points of a zip
//   [report]      x: the swept key the hit-ratio plot runs along
//
// Invariants of a spec returned by load_experiment: every point's config
// parses and validates (a timed experiment's points are ones a timed run
// accepts), so a sweep fails before its first run, never halfway; every
// error names file:line:column, the key and what was expected. Points are in
// sweep order (the first key varies slowest), and a point's fingerprint is a
// hash of its whole config's TOML: equal fingerprints, equal runs.

#include "runtime/config.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvtier::experiment {

enum class run_mode : uint8_t { timed, cache_only };
enum class combine_mode : uint8_t { cartesian, zip };

struct sweep_axis {
  std::string key;                 // "tiers.hbm.capacity"
  std::vector<std::string> values; // each as its text: 8GB, 3, true
  std::string where;               // file:line:column of the key
  uint32_t line = 0, column = 0;   // axes are in the order the file lists them
};

struct sweep_point {
  uint32_t index = 0;                                      // in sweep order, from 0
  std::string label;                                       // the labels entry, or "key=value ..."
  std::vector<std::pair<std::string, std::string>> values; // one per axis
  std::optional<int64_t> seed;
  std::string fingerprint; // 16 hex digits
};

struct experiment_spec {
  std::string path;
  std::string name; // the file's stem
  std::string title;
  std::string question;
  std::string base_path; // empty: no base file
  run_mode mode = run_mode::timed;
  combine_mode combine = combine_mode::cartesian;
  std::vector<sweep_axis> axes;
  std::vector<int64_t> seeds;
  std::string seed_key = "sim.synthetic.seed";
  std::string report_x;
  std::vector<sweep_point> points;
};

caf::expected<experiment_spec> load_experiment(const std::string& path);

/// The config of `point`: the base file, [base] over it, the point's values over both.
caf::expected<config> config_of_point(const experiment_spec& spec, const sweep_point& point);

} // namespace kvtier::experiment
