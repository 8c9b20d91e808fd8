// _kvtier.simulate: one timed simulation, as `kvtier sim --json-out` runs it,
// returning the same JSON text: the single-node report, or with a [cluster]
// table the cluster's (sim/cluster_report.hpp), as the command chooses. The
// Python side (kvtier/_simulate.py) decides whether `config` is a path or
// TOML text and checks the overrides' keys.

#include "python/bindings.hpp"
#include "run/report.hpp"
#include "runtime/config.hpp"
#include "runtime/config_overrides.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "sim/cluster_report.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/configured_run.hpp"
#include "sim/simulation.hpp"

#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>

namespace py = pybind11;

namespace kvtier::python {
namespace {

// The label the CLI gives the built-in config in its report.
constexpr const char* builtin_config = "<built-in>/configs/default.toml";

template <class T>
T value_or_raise(caf::expected<T>&& v) {
  if (!v)
    throw error(describe(v.error()));
  return std::move(*v);
}

void raise_if(const caf::error& err) {
  if (err)
    throw error(describe(err));
}

// The overrides by the CLI flag they stand for; each key is checked by the caller.
config_overrides overrides_of(const std::optional<std::string>& trace, const std::map<std::string, std::string>& given,
                              bool skip_bad) {
  config_overrides o;
  o.trace = trace;
  o.skip_bad = skip_bad;
  for (const auto& [key, value] : given) {
    if (key == "hbm")
      o.hbm = value;
    else if (key == "dram")
      o.dram = value;
    else if (key == "nvme")
      o.nvme = value;
    else if (key == "format")
      o.format = value;
    else if (key == "max_requests")
      o.max_requests = value;
    else if (key == "time_scale")
      o.time_scale = value;
    else
      throw error("overrides: unknown key '" + key + "'");
  }
  return o;
}

std::string simulate(const std::optional<std::string>& config_source, bool config_is_path,
                     const std::string& config_label, const std::optional<std::string>& trace,
                     const std::map<std::string, std::string>& overrides, bool skip_bad) {
  auto cfg = value_or_raise(!config_source       ? parse_config(*embedded_file("default.toml"), builtin_config)
                                : config_is_path ? load_config(*config_source)
                                                 : parse_config(*config_source, config_label));
  raise_if(apply_overrides(cfg, overrides_of(trace, overrides, skip_bad)));
  auto requests = value_or_raise(sim::read_configured_trace(cfg));
  raise_if(sim::timed_run_refusal(cfg));
  auto source = requests.source;
  auto label = !config_source ? std::string(builtin_config) : config_is_path ? *config_source : config_label;
  if (cfg.cluster.active()) {
    sim::cluster_result cluster;
    {
      py::gil_scoped_release unlocked;
      cluster = sim::run_cluster(cfg, sim::requests_from(std::move(requests)));
    }
    raise_if(sim::untrusted_run(cluster));
    return sim::cluster_json(cfg, cluster, {label, source}).dump();
  }
  run_result result;
  {
    // The simulation touches no Python object: other Python threads run meanwhile.
    py::gil_scoped_release unlocked;
    result = sim::run_simulation(cfg, sim::requests_from(std::move(requests)));
  }
  raise_if(sim::untrusted_run(result));
  return report_json(cfg, result, {label, source}).dump();
}

} // namespace

void bind_simulate(py::module_& m) {
  m.def("simulate", &simulate, py::arg("config"), py::arg("config_is_path"), py::arg("config_label"), py::arg("trace"),
        py::arg("overrides"), py::arg("skip_bad"),
        "Runs one timed simulation; returns the report as JSON text (kvtier sim --json-out).");
}

} // namespace kvtier::python
