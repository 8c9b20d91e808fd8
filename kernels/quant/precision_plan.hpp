#pragma once
// Which format each layer's K and V use, and the KIVI details around it.
//
// Layers [0, fp16_first) and [layers - fp16_last, layers) stay fp16 (the
// first and last layers are the most sensitive). Other layers use
// key_scheme / value_scheme; nullopt means fp16. The most recent
// `residual_tokens` tokens of a sequence stay fp16 (KIVI's window), and
// `outlier_channels` key channels per slice stay fp16 (outliers.hpp).

#include "kernels/quant/quant_format.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace kvtier::quant {

struct precision_plan {
  std::optional<scheme> key_scheme = scheme::int4_channel;
  std::optional<scheme> value_scheme = scheme::int4_token;
  uint32_t fp16_first = 0;
  uint32_t fp16_last = 0;
  uint32_t residual_tokens = 32;
  uint32_t outlier_channels = 0;

  /// The key format of `layer` in a model of `layers` layers; nullopt = fp16.
  std::optional<scheme> key_scheme_for(uint32_t layer, uint32_t layers) const;
  std::optional<scheme> value_scheme_for(uint32_t layer, uint32_t layers) const;

private:
  bool full_precision(uint32_t layer, uint32_t layers) const;
};

/// A fp16 round trip of one [tokens x channels] slice through `s` (nullopt =
/// fp16, exact), with the last `residual_tokens` tokens and `outlier_channels`
/// channels kept in fp16. For int4_channel, tokens beyond the last whole
/// group of 32 before the residual window stay fp16 too.
struct round_trip_result {
  std::vector<uint16_t> values; // tokens x channels, fp16 bits
  uint64_t stored_bytes = 0;    // everything kept: codes, scales, fp16 rest, outliers
};

round_trip_result round_trip(std::optional<scheme> s, uint32_t tokens, uint32_t channels, const uint16_t* in,
                             uint32_t residual_tokens, uint32_t outlier_channels);

} // namespace kvtier::quant
