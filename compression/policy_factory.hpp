#pragma once
// Policies by name, for configs and the CLI:
//   random, streaming_llm, sliding_window, h2o_raw, h2o (normalized),
//   h2o_window, snapkv, oracle.

#include "compression/attention.hpp"
#include "compression/policy.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace kvtier::compression {

struct policy_settings {
  uint32_t sinks = 4;   // protected first tokens (StreamingLLM's sinks; H2O/SnapKV/random protect them too)
  uint32_t recent = 32; // protected recent window (H2O, random); SnapKV protects its observation window
  uint32_t window = 32; // SnapKV observation window, H2O window accumulation: last queries observed
  uint32_t pool = 7;    // SnapKV max-pool width (the paper's kernel size)
  uint64_t seed = 1;    // random eviction
};

const std::vector<std::string_view>& policy_names();

/// `future` is needed by "oracle" only and must outlive the policy.
/// Errors: errc::invalid_argument for an unknown name or a missing future.
caf::expected<std::unique_ptr<policy>> make_policy(std::string_view name, const policy_settings& settings,
                                                   const observed_attention* future = nullptr);

} // namespace kvtier::compression
