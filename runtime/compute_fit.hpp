#pragma once
// The calibrated compute model (measured_compute, runtime/hardware.hpp):
// fitting it to measured step times and predicting a step with it.
//
//   seconds = dense(new_tokens) + (decode_only ? kv_bytes / decode_rate
//                                              : kv_bytes / mixed_decode_rate
//                                                + attention_flops / prefill_rate)
// dense() is piecewise linear over the knots (flat below the first, the last
// segment's slope beyond the last): the weights-bound floor of small steps,
// the GEMM rate of large ones and the per-step overhead are all in it. The
// attention rates are separate because the forward runs separate kernels:
// one-row sequences take the paged decode kernel (by bytes), prefill chunks
// the chunked-prefill kernel (by FLOPs). Beside a chunk the decode kernel
// shares the step with the other launch, so its rate is fitted apart
// (mixed_decode_rate) from a decode-only step's.
//
// The fit is linear least squares on relative error (each sample weighs
// 1 / its time), so a 5 ms decode step counts as much as a 500 ms prefill;
// an attention rate that comes out non-positive is dropped (attention of that
// kind folds into dense) and said so.

#include "runtime/hardware.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvtier {

struct compute_sample {
  uint64_t new_tokens = 0; // tokens in the step (prefill chunks + decodes)
  bool decode_only = false;
  double kv_bytes = 0;        // KV bytes the decode rows' attention reads (context + 1, every layer)
  double attention_flops = 0; // prefill chunks': 4 * layers * q_heads * head_dim * attention pairs
  double seconds = 0;         // measured
};

struct compute_fit_report {
  double mean_relative_error = 0; // |predicted - measured| / measured, over the samples
  double max_relative_error = 0;
  std::string note; // what the fit had to leave out, if anything
};

/// Fits measured_compute to `samples` with dense knots at `knots` (ascending,
/// each the new_tokens of some sample). Errors: fewer samples than unknowns,
/// knots not ascending, a singular system.
caf::expected<measured_compute> fit_compute(std::span<const compute_sample> samples, const std::vector<double>& knots,
                                            const std::string& model, compute_fit_report* report = nullptr);

/// dense() at `tokens`, in seconds. REQUIRES: c.present().
double dense_seconds(const measured_compute& c, double tokens);

/// A step's predicted seconds. REQUIRES: c.present().
double predict_seconds(const measured_compute& c, const compute_sample& step);

} // namespace kvtier
