#pragma once
// Seeded synthetic attention: a stand-in for a trained model's attention
// statistics (no weights can be had here). A SYNTHETIC PROXY: it has the
// structure below by construction; it is not a measurement of any model.
//
// One (layer, kv head) of `tokens` prompt tokens, head_dim d, `group` query
// heads. Logit of query i (head h) for key j:
//     l(i, j) = q_i . k_j / sqrt(d) + recency_logit * exp(-(i - j) / recency_tau)
// where the vectors are built on reserved channels so each term is exact:
//   channel 0   sink:       k_j = sink_logit*sqrt(d) for j < sinks, q = 1
//                           -> +sink_logit on the sink tokens for every query.
//   channel 1   shared importance: k_j = sqrt(d)*importance_scale*shared*ln(a_j),
//               a_j ~ Pareto(importance_alpha) per token, q = 1 for every head
//               -> attention proportional to a_j^(scale*shared): heavy-tailed,
//               persistent "heavy hitters" that every head of the group sees.
//   channels 2..2+group-1  per-head importance: k_j = sqrt(d)*scale*(1-shared)*ln(b_hj),
//               b_hj ~ Pareto per query head h; query head h has 1 on its own channel.
//   next `needles` channels  needles: the needle token's key has
//               needle_logit*sqrt(d) on its own channel; a retrieval query for
//               it has 1 there (+needle_logit); other keys and queries have 0.
//   the rest    content: k and q ~ N(0, s^2) with s^4 * (channels)/d = noise_logit^2,
//               so the content term is a per-(query, key) logit noise of
//               std noise_logit: what a query wants beyond the persistent structure.
//   outliers    `outlier_channels` content channels of every key carry a
//               constant +outlier_value (KIVI's key outlier channels). It
//               shifts all of a query's logits alike, so attention ignores it;
//               quantizers do not.
// Values v_j ~ N(0, 1)^d (needle values too).
// Queries: prompt queries at positions 0..tokens-1; then `future_queries`
// decode queries at positions tokens.. (what the compressed cache must serve).
// Needles sit at seeded positions in [sinks, tokens - needle_margin). Each has
// `question_tokens` retrieval queries: the last prompt positions when
// needle_visible (the question ends the prompt, inside SnapKV's window), and
// always `needle_future_queries` retrieval queries among the future ones.
// The high-entropy regime (regime = high_entropy) sets no sinks, no
// importance, no recency and a small noise_logit: nearly flat attention where
// no token stands out.

#include "compression/attention.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::compression {

struct synthetic_config {
  std::string regime = "structured"; // structured | high_entropy
  uint32_t tokens = 1024;
  uint32_t future_queries = 32;
  uint32_t head_dim = 64;
  uint32_t layers = 2;
  uint32_t kv_heads = 4;
  uint32_t group = 4;
  uint32_t sinks = 4;
  double sink_logit = 6.0;
  double importance_alpha = 1.2;
  double importance_scale = 1.0;
  double shared_importance = 0.6;
  double noise_logit = 1.0;
  double recency_logit = 2.0;
  double recency_tau = 16.0;
  uint32_t outlier_channels = 2;
  double outlier_value = 12.0;
  uint32_t needles = 0;
  bool needle_visible = true;
  uint32_t question_tokens = 4;
  uint32_t needle_future_queries = 2;
  uint32_t needle_margin = 64; // needles stay out of the last tokens (the protected window)
  double needle_logit = 10.0;
  uint64_t seed = 1;

  /// The effective settings: high_entropy overrides the structure terms.
  synthetic_config resolved() const;
};

/// One (layer, kv head): vectors, query positions and needle positions.
struct synthetic_head {
  uint32_t tokens = 0;
  uint32_t head_dim = 0;
  uint32_t group = 0;
  double recency_logit = 0;
  double recency_tau = 1;
  std::vector<float> keys;           // tokens x d
  std::vector<float> values;         // tokens x d
  std::vector<float> prompt_queries; // group x tokens x d (query at position i)
  std::vector<uint32_t> future_pos;  // positions of the future queries (>= tokens)
  std::vector<float> future_queries; // group x future x d
  std::vector<uint32_t> needle_pos;  // ascending
  std::vector<uint32_t> retrieval;   // indices into future_pos that retrieve a needle

  /// Softmax attention of the prompt queries (causal) / the future queries, over all keys.
  observed_attention prompt_attention() const;
  observed_attention future_attention() const;
  /// Attention of the future queries restricted to `kept` keys (ascending), written as
  /// rows over all keys (zeros where evicted). Used to measure what eviction changed.
  observed_attention future_attention_kept(const std::vector<uint32_t>& kept) const;
  /// The raw logit q . k / sqrt(d) + recency for a query vector at position pos.
  float logit(const float* q, uint32_t pos, uint32_t key) const;
};

/// errc::invalid_argument if the structure does not fit: head_dim must exceed
/// 2 + group + needles + outlier_channels; needles need tokens > sinks +
/// needle_margin + needles; visible questions must fit in the prompt.
caf::error validate(const synthetic_config& config);

/// Deterministic in (config, layer, kv_head). REQUIRES: !validate(config).
synthetic_head generate_head(const synthetic_config& config, uint32_t layer, uint32_t kv_head);

} // namespace kvtier::compression
