#include "compression/precision_config.hpp"

#include "runtime/toml_reader.hpp"

namespace kvtier::compression {
namespace {

const std::vector<std::string_view> dtype_names{"fp16",      "fp8",        "fp8_tensor", "int8",        "int4",
                                                "fp8_token", "int8_token", "int4_token", "int4_channel"};

std::optional<quant::scheme> scheme_for(const std::string& name, bool key) {
  if (name == "fp16")
    return std::nullopt;
  if (name == "fp8")
    return quant::scheme::fp8_token;
  if (name == "int8")
    return quant::scheme::int8_token;
  if (name == "int4")
    return key ? quant::scheme::int4_channel : quant::scheme::int4_token;
  return quant::parse_scheme(name);
}

} // namespace

caf::expected<quant::precision_plan> read_precision_plan(const toml::table& table, const std::string& file,
                                                         const std::string& table_name) {
  toml_reader r(table, file, table_name);
  std::string key = "int4", value = "int4";
  quant::precision_plan plan;
  r.read_choice("key_dtype", key, dtype_names);
  r.read_choice("value_dtype", value, dtype_names);
  r.read("fp16_first_layers", plan.fp16_first, 0, 1024);
  r.read("fp16_last_layers", plan.fp16_last, 0, 1024);
  r.read("residual_tokens", plan.residual_tokens, 0, 1u << 20);
  r.read("outlier_channels", plan.outlier_channels, 0, 64);
  if (auto err = r.finish(
          {"key_dtype", "value_dtype", "fp16_first_layers", "fp16_last_layers", "residual_tokens", "outlier_channels"}))
    return err;
  plan.key_scheme = scheme_for(key, true);
  plan.value_scheme = scheme_for(value, false);
  return plan;
}

} // namespace kvtier::compression
