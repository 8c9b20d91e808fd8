#include "kernels/quant/precision_plan.hpp"

#include "kernels/quant/outliers.hpp"
#include "kernels/quant/quant_cpu.hpp"

#include <algorithm>

namespace kvtier::quant {

bool precision_plan::full_precision(uint32_t layer, uint32_t layers) const {
  return layer < fp16_first || layer + fp16_last >= layers;
}

std::optional<scheme> precision_plan::key_scheme_for(uint32_t layer, uint32_t layers) const {
  return full_precision(layer, layers) ? std::nullopt : key_scheme;
}

std::optional<scheme> precision_plan::value_scheme_for(uint32_t layer, uint32_t layers) const {
  return full_precision(layer, layers) ? std::nullopt : value_scheme;
}

round_trip_result round_trip(std::optional<scheme> s, uint32_t tokens, uint32_t channels, const uint16_t* in,
                             uint32_t residual_tokens, uint32_t outlier_channels) {
  round_trip_result out;
  out.values.assign(in, in + uint64_t{tokens} * channels);
  uint32_t quantized = tokens > residual_tokens ? tokens - residual_tokens : 0;
  if (s == scheme::int4_channel)
    quantized -= quantized % int4_group;
  if (!s || quantized == 0) {
    out.stored_bytes = uint64_t{tokens} * channels * 2;
    return out;
  }
  tile_shape shape{1, quantized, channels};
  outlier_split split;
  if (outlier_channels > 0)
    split = split_outliers(out.values.data(), quantized, channels,
                           select_outlier_channels(out.values.data(), quantized, channels, outlier_channels));
  std::vector<uint8_t> packed(packed_bytes(*s, shape));
  quantize(*s, shape, out.values.data(), packed.data());
  dequantize(*s, shape, packed.data(), out.values.data());
  if (outlier_channels > 0)
    merge_outliers(split, out.values.data(), quantized, channels);
  out.stored_bytes = packed.size() + uint64_t{tokens - quantized} * channels * 2 +
      (outlier_channels > 0 ? outlier_bytes(quantized, outlier_channels) : 0);
  return out;
}

} // namespace kvtier::quant
