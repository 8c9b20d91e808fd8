#pragma once
// First-order costs from the model geometry and the hardware profile:
// step compute time (a roofline) and link transfer time. The simulator's
// backend uses them as its timing model; the scheduler uses them to choose
// between swapping and recomputing a preempted sequence.
//
// Step time, when the hardware profile carries a forward measured for this
// model ([compute], `kvtier calibrate --compute`): the fitted model of
// runtime/compute_fit.hpp. Otherwise the roofline:
//   overhead + max(FLOPs / (peak * compute_efficiency),
//                  bytes   / (hbm_bw * memory_efficiency))
// FLOPs: 2 * parameters per new token (dense part) + attention
//        4 * layers * query_heads * head_dim * new_tokens * attended_tokens.
// Bytes: the weights once per step + every KV byte attention reads + KV written.

#include "runtime/config.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace kvtier {

struct step_shape {
  uint64_t new_tokens = 0;            // prefill chunk tokens + one per decode
  uint64_t kv_read_tokens = 0;        // tokens of KV attention reads, summed over sequences
  double attention_pairs = 0;         // sum over sequences of new_tokens * attended tokens
  uint32_t multi_token_sequences = 0; // prefill chunks: the step is not decode-only
  uint64_t decode_kv_tokens = 0;      // KV tokens the one-token sequences attend (context + 1 each)
  double chunk_attention_pairs = 0;   // attention_pairs of the multi-token sequences

  /// Adds a sequence that computes `tokens` new tokens after `context` cached
  /// ones (causal: the i-th new token attends context + i tokens).
  void add(uint64_t tokens, uint64_t context) {
    new_tokens += tokens;
    kv_read_tokens += context;
    attention_pairs +=
        static_cast<double>(tokens) * (static_cast<double>(context) + static_cast<double>(tokens + 1) / 2.0);
    if (tokens > 1) {
      ++multi_token_sequences;
      chunk_attention_pairs +=
          static_cast<double>(tokens) * (static_cast<double>(context) + static_cast<double>(tokens + 1) / 2.0);
    } else {
      decode_kv_tokens += context + tokens;
    }
  }
  bool decode_only() const { return multi_token_sequences == 0; }
};

class cost_model {
public:
  explicit cost_model(const config& cfg);

  double step_seconds(const step_shape& shape) const;
  /// Time to prefill `tokens` tokens of one sequence after `context` cached ones,
  /// in chunks of `chunk` tokens (one step per chunk).
  double prefill_seconds(uint64_t tokens, uint64_t context, uint32_t chunk) const;
  /// Time for `bytes` over a link in `operations` submissions.
  static double link_seconds(const link_profile& link, uint64_t bytes, uint64_t operations);

  uint64_t bytes_per_block() const { return geometry_.bytes_per_block(); }
  /// True when step times come from a measured forward, not the roofline.
  bool calibrated() const { return calibrated_; }
  /// "measured forward (llama-3-8b)" or "roofline", for reports.
  std::string compute_model() const;
  const hardware_profile& hardware() const { return hardware_; }

private:
  kv_geometry geometry_;
  hardware_profile hardware_;
  double weight_bytes_;
  bool calibrated_ = false;
};

} // namespace kvtier
