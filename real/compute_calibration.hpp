#pragma once
// `kvtier calibrate --compute`: times the model behind the real compute port
// (the CUDA twin over a GPU pool, or the CPU twin) over a grid of step shapes
// and fits the measured compute model (runtime/compute_fit.hpp) that the
// simulator's cost model then uses for that model.
//
// The grid covers each term of the fit: decode steps over a few tokens of
// context (the dense curve at small steps: the weights-bound floor), prefill
// chunks with nothing cached (dense at large steps), decode steps over long
// contexts (decode attention), chunks after long cached prefixes (prefill
// attention), and mixed steps. Each shape is the median of several timed runs
// after a warm-up, timed as `kvtier run` times a step (model_compute_port).
// Sequences' block tables wrap around the HBM pool when a shape needs more
// blocks than it holds: the bytes read are the same, only their values differ.

#include "runtime/compute_fit.hpp"
#include "runtime/config.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kvtier {

struct timed_step {
  std::string name;      // "decode b8 c8192", "prefill 512 after 32768", ...
  compute_sample sample; // the shape and its measured seconds
  double roofline_seconds = 0;
};

struct compute_calibration {
  std::string twin; // "model (cuda)" or "model (cpu)"
  std::vector<timed_step> steps;
  measured_compute fit;
  compute_fit_report report;
};

struct compute_calibration_options {
  std::string device = "auto"; // as kvtier run's --device
  int repeats = 5;             // timed runs per shape (the median is kept)
  std::function<void(const std::string&)> progress;
};

/// Needs [compute] kind = "model" in `cfg` (the model and weights timed are
/// the ones `kvtier run` would serve).
caf::expected<compute_calibration> calibrate_compute(const config& cfg, const compute_calibration_options& options);

} // namespace kvtier
