#pragma once
// Per-layer KV precision from a TOML table (for kvtier's config and for
// eval-compression's [quant.plan]):
//
//   key_dtype = "int4"          # fp16 | fp8 | fp8_tensor | int8 | int4, or a
//   value_dtype = "int4"        #   scheme name (fp8_token, int4_channel, ...)
//   fp16_first_layers = 2       # layers [0, N) stay fp16
//   fp16_last_layers = 2        # the last N layers stay fp16
//   residual_tokens = 32        # KIVI: the newest tokens stay fp16
//   outlier_channels = 0        # key channels kept in fp16
//
// "int4" means KIVI's scheme: keys per channel (int4_channel), values per
// token (int4_token); "fp8" and "int8" mean per-token scales.
// Errors: errc::invalid_config naming file:line:column and the key.

#include "kernels/quant/precision_plan.hpp"

#include <caf/expected.hpp>
#include <toml++/toml.h>

#include <string>

namespace kvtier::compression {

caf::expected<quant::precision_plan> read_precision_plan(const toml::table& table, const std::string& file,
                                                         const std::string& table_name);

} // namespace kvtier::compression
