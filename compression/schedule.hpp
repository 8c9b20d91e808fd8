#pragma once
// When compression runs for a sequence: once when its prefill ends (SnapKV's
// and the prefill form of H2O's moment), and/or every `every_tokens` tokens
// as the sequence grows, chunked prefill included (H2O's rolling form), never below `min_tokens` (a short
// context is not worth a pass).

#include <cstdint>

namespace kvtier::compression {

struct compression_trigger {
  bool at_prefill_end = true;
  uint32_t every_tokens = 0; // 0 = not during decode
  uint64_t min_tokens = 0;

  /// True if a step that took the sequence from `before` to `after` tokens
  /// (and finished its prefill when `prefill_finished`) should be followed by
  /// a compression pass.
  bool due(uint64_t before, uint64_t after, bool prefill_finished) const {
    if (after < min_tokens || after <= before)
      return false;
    if (at_prefill_end && prefill_finished)
      return true;
    return every_tokens > 0 && before / every_tokens != after / every_tokens;
  }
};

} // namespace kvtier::compression
