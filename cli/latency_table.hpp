#pragma once
// `kvtier calc --profile`: prefill and decode latency against context length
// for a model on a GPU, from the hardware profile's roofline (runtime/
// cost_model, the simulator's own timing model): the capacity-planning table.
//
// Per context length: the KV bytes of one request, how many such requests the
// HBM budget holds, the time to prefill one request from nothing (in chunks of
// prefill_chunk, one step each), and one decode step's time with a single
// request and with as many as fit (TPOT), with the tokens per second the full
// batch writes. Every figure is the cost model's, with nothing measured here.

#include "runtime/config.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::cli {

struct latency_row {
  uint64_t context_tokens = 0;
  uint64_t kv_bytes_per_request = 0; // whole blocks
  uint64_t requests_that_fit = 0;
  double prefill_ms = 0;
  double decode_ms_one = 0;  // one step, one request at this context
  double decode_ms_full = 0; // one step, requests_that_fit requests (0 when none fits)
  double tokens_per_s_full = 0;
};

std::vector<latency_row> latency_table(const config& cfg, const std::vector<uint64_t>& contexts);

std::string latency_text(const config& cfg, const std::vector<latency_row>& rows);
nlohmann::json latency_json(const config& cfg, const std::vector<latency_row>& rows);

} // namespace kvtier::cli
