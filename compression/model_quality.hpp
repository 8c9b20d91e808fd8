#pragma once
// Compression quality measured on a trained model through kvtier's own CPU
// forward (kernels/model/forward_cpu.hpp): next-byte loss on held-out text
// and pass-key retrieval, for the real engine's block-level eviction
// (block_selection.hpp) and for quantize-on-offload of the context's blocks
// (kernels/quant), against the full cache, random eviction and an oracle.
//
// The protocol, per text window of context + continuation + 1 bytes (the
// model reads bytes: vocab >= 256, token = byte):
//  1. prefill the context (context_tokens, a multiple of block_tokens) into
//     its own pool slots, measuring each block's attention mass as the engine
//     asks for it at prefill end: from the last `observation` queries for
//     SnapKV, from every query of the last chunk (here the whole context) for
//     the h2o family;
//  2. with every block kept, feed the continuation one byte at a time: the
//     loss of predicting each next byte is the full cache's, and the
//     continuation's attention over the context blocks is the oracle's score
//     (a hindsight measurement no engine has);
//  3. for each policy and budget: drop the blocks blocks_to_drop chooses
//     (budget = share of the context's tokens kept, rounded up to blocks; the
//     sinks and the recent window are protected as in the engine), feed the
//     same continuation over the compacted table, and take its loss;
//  4. for each quantizer: the context's blocks go through the codec and back
//     (as a demotion and a promotion would move them), the continuation is
//     fed over them; "fp8_kv" instead keeps the whole cache in float8 from
//     the prefill on (the pool's kv_fp8).
// Pass keys: the context is an introduction, held-out filler with the needle
// "The pass key is NNNNN. ..." at an evenly spaced depth, and the question
// ending "The pass key is"; the continuation is " NNNNN". A prompt counts as
// retrieved when every digit is the model's most likely next byte
// (teacher-forced: the same as greedy decoding getting all five right). The
// texts are those bench/quality/train_llama.py trains on.
//
// Invariants: results depend only on the weights, the text and the options
// (windows are evenly spaced in the text, keys and random choices seeded), not
// on the thread count: each window is measured alone and summed in order.

#include "kernels/model/llama_weights.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvtier::compression {

struct quality_options {
  uint32_t context_tokens = 1536;
  uint32_t continuation_tokens = 256;
  uint32_t windows = 16;  // text windows for the loss
  uint32_t passkeys = 16; // pass-key prompts (0: none)
  uint32_t block_tokens = 16;
  uint32_t observation = 32; // SnapKV's window: the engine's attention_queries for it
  std::vector<double> budgets{0.1, 0.2, 0.5};
  /// Block-selection policies (block_selection.hpp), plus "oracle".
  std::vector<std::string> policies{"random", "streaming_llm", "sliding_window", "h2o", "h2o_raw", "snapkv", "oracle"};
  /// "fp8_kv", or a kernels/quant scheme applied to every context block's K and V.
  std::vector<std::string> quantizers{"fp8_kv", "fp8_token", "int8_token", "int4_token", "int4_row"};
  uint32_t threads = 0; // 0: one per hardware thread
  uint64_t seed = 1;    // random's
};

struct quality_row {
  std::string name;  // a policy, a quantizer, or "full"
  double budget = 1; // share of the context kept (1 for the full cache and quantizers)
  double nats_per_byte = 0;
  /// Standard error of the mean per-window difference from the full cache
  /// (paired: the windows' own difficulty cancels).
  double vs_full_stderr = 0;
  /// Standard error of gap_closed (below): of the paired per-window loss
  /// difference from random, over the mean random - oracle difference. NaN
  /// where there is no random or oracle row at this budget.
  double gap_closed_stderr = 0;
  double passkey_accuracy = 0; // share of prompts retrieved
  double passkey_nats = 0;     // mean loss of the key's digits
  double mass_kept = 1;        // share of the continuation's attention on kept blocks (loss windows' mean)
  uint64_t kept_blocks = 0;    // context blocks kept, summed over every window and pass-key prompt
};

struct quality_report {
  quality_options options;
  std::vector<quality_row> rows; // "full" first, then policies by budget, then quantizers
  uint64_t tokens_fed = 0;       // positions the model ran, all variants
  double seconds = 0;

  const quality_row* find(std::string_view name, double budget) const;
  /// (random - policy) / (random - oracle) at `budget`, in loss.
  double gap_closed(std::string_view policy, double budget) const;
};

/// The measurement above. Errors name the option or the text: too short for
/// the windows, a context that is not whole blocks, an unknown policy or
/// quantizer, a vocabulary below 256.
caf::expected<quality_report> measure_quality(const model::llama_weights& weights, std::span<const uint8_t> text,
                                              const quality_options& options);

/// The pass-key prompt texts (shared with bench/quality/train_llama.py).
std::string passkey_intro();
std::string passkey_needle(std::string_view key);
std::string passkey_question(); // ends with "The pass key is" (the space is the continuation's)

} // namespace kvtier::compression
