// `kvtier calc`: KV memory math for a model, a context and a GPU.

#include "cli/commands.hpp"
#include "cli/latency_table.hpp"
#include "runtime/capacity_plan.hpp"
#include "runtime/config.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/config_bounds.hpp"
#include "runtime/error.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace kvtier::cli {
namespace {

// plan_capacity multiplies tokens by bytes and adds weights to the reserve in
// uint64: checked here first, so an input past 2^64 bytes is the user's
// error instead of a wrapped "per request 0 B".
caf::error check_arithmetic(const capacity_query& q, const std::string& context_text, const std::string& reserve_text) {
  const uint64_t block_tokens = q.geometry.block_tokens;
  uint64_t per_block = 0, per_request = 0, used = 0;
  uint64_t blocks = q.context_tokens / block_tokens + (q.context_tokens % block_tokens != 0);
  if (__builtin_mul_overflow(q.geometry.bytes_per_token(), block_tokens, &per_block) ||
      __builtin_mul_overflow(blocks, per_block, &per_request))
    return make_error(errc::invalid_argument,
                      fmt::format("--context {}: {} tokens of {} B each need more than 2^64 bytes (16 EiB)",
                                  context_text, format_count(q.context_tokens), q.geometry.bytes_per_token()));
  double weights = static_cast<double>(q.geometry.model.parameters) * weight_bytes_per_parameter(q.weights_dtype);
  if (!(weights < 0x1p64) || __builtin_add_overflow(static_cast<uint64_t>(weights), q.reserved_bytes, &used))
    return make_error(errc::invalid_argument,
                      fmt::format("--reserve {}: the weights ({}) plus the reserve exceed 2^64 bytes (16 EiB)",
                                  reserve_text, format_bytes(static_cast<uint64_t>(std::min(weights, 0x1p63)))));
  return {};
}

struct calc_options {
  std::string model = "llama-3-70b";
  std::string context = "128k";
  std::string dtype = "fp16";
  std::string hbm = "141GB";
  std::string weights_dtype = "bf16";
  std::string reserve = "0";
  uint32_t block_tokens = 16;
  bool json = false;
  std::string profile;  // set: the latency table of latency_table.hpp
  std::string contexts; // comma-separated; default: powers of two from 1k to --context
  uint32_t prefill_chunk = 2048;
  bool memory_given = false; // --hbm or --reserve: the profile says both
};

// `--profile`: the model on the profile's GPU, the cost model's latencies by context.
int run_latency(const calc_options& o, const model_spec& model, kv_dtype dtype, kv_dtype weights_dtype,
                uint64_t context) {
  auto fail = [](const std::string& message) {
    fmt::print(stderr, "kvtier calc: {}\n", message);
    return 2;
  };
  if (o.memory_given)
    return fail("--hbm and --reserve are the profile's ([gpu] hbm, reserved) with --profile; drop them or edit the "
                "profile");
  auto hardware = load_hardware_profile(o.profile);
  if (!hardware)
    return fail("--profile: " + describe(hardware.error()));
  std::vector<uint64_t> contexts;
  if (o.contexts.empty()) {
    for (uint64_t c = 1024; c < context; c *= 2)
      contexts.push_back(c);
    contexts.push_back(context);
  } else {
    size_t start = 0;
    while (start <= o.contexts.size()) {
      auto comma = o.contexts.find(',', start);
      auto item = o.contexts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      auto tokens = parse_tokens(item);
      if (!tokens)
        return fail(fmt::format("--contexts: '{}': {}", item, describe(tokens.error())));
      if (*tokens == 0 || *tokens > max_context_tokens)
        return fail(fmt::format("--contexts: expected 1..{} tokens, got {}", format_count(max_context_tokens),
                                format_count(*tokens)));
      contexts.push_back(*tokens);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
  }
  config cfg;
  cfg.geometry.model = model;
  cfg.geometry.dtype = dtype;
  cfg.geometry.block_tokens = o.block_tokens;
  cfg.cache.block_tokens = o.block_tokens;
  cfg.weights_dtype = weights_dtype;
  cfg.hardware = *hardware;
  cfg.scheduler.prefill_chunk = o.prefill_chunk;
  cfg.source = "kvtier calc --profile " + o.profile;
  if (cfg.weight_bytes() + cfg.hardware.gpu.reserved_bytes >= cfg.hardware.gpu.hbm_bytes)
    return fail(fmt::format("{} weights in {} ({}) and the reserve ({}) leave no room for KV in {}'s {}", model.name,
                            name_of(weights_dtype), format_bytes(cfg.weight_bytes()),
                            format_bytes(cfg.hardware.gpu.reserved_bytes), cfg.hardware.name,
                            format_bytes(cfg.hardware.gpu.hbm_bytes)));
  auto rows = latency_table(cfg, contexts);
  if (o.json)
    fmt::print("{}\n", latency_json(cfg, rows).dump(2));
  else
    fmt::print("{}", latency_text(cfg, rows));
  return 0;
}

int run_calc(const calc_options& o) {
  auto fail = [](const caf::error& err) {
    fmt::print(stderr, "kvtier calc: {}\n", describe(err));
    return 2;
  };
  auto model = find_model_preset(o.model);
  if (!model) {
    std::string names;
    for (const auto& p : model_presets())
      names += (names.empty() ? "" : ", ") + p.name;
    fmt::print(stderr, "kvtier calc: --model: unknown model '{}'; expected one of {}\n", o.model, names);
    return 2;
  }
  auto dtype = parse_dtype(o.dtype);
  if (!dtype) {
    fmt::print(stderr, "kvtier calc: --dtype: unknown dtype '{}'; expected fp16, bf16, fp8, int8, int4 or int4_row\n",
               o.dtype);
    return 2;
  }
  auto context = parse_tokens(o.context);
  if (!context)
    return fail(make_error(errc::invalid_argument, "--context: " + describe(context.error())));
  if (*context == 0 || *context > max_context_tokens)
    return fail(make_error(errc::invalid_argument,
                           fmt::format("--context: expected 1..{} tokens, got {}", format_count(max_context_tokens),
                                       format_count(*context))));
  auto hbm = parse_bytes(o.hbm);
  if (!hbm)
    return fail(make_error(errc::invalid_argument, "--hbm: " + describe(hbm.error())));
  if (auto problem = size_problem(*hbm, config_bounds::gpu_hbm_bytes))
    return fail(make_error(errc::invalid_argument, "--hbm: " + *problem));
  auto reserve = parse_bytes(o.reserve);
  if (!reserve)
    return fail(make_error(errc::invalid_argument, "--reserve: " + describe(reserve.error())));
  if (auto problem = size_problem(*reserve, config_bounds::gpu_reserved_bytes))
    return fail(make_error(errc::invalid_argument, "--reserve: " + *problem));
  auto weights_dtype = parse_dtype(o.weights_dtype);
  if (!weights_dtype || *weights_dtype == kv_dtype::int4_row) { // a KV layout: weights have no head_dim rows
    fmt::print(stderr, "kvtier calc: --weights-dtype: {} '{}'; expected fp16, bf16, fp8, int8 or int4\n",
               weights_dtype ? "int4_row is a KV layout, not a weights format:" : "unknown dtype", o.weights_dtype);
    return 2;
  }

  if (!o.profile.empty())
    return run_latency(o, *model, *dtype, *weights_dtype, *context);
  capacity_query q;
  q.geometry.model = *model;
  q.geometry.dtype = *dtype;
  q.geometry.block_tokens = o.block_tokens;
  q.context_tokens = *context;
  q.hbm_bytes = *hbm;
  q.weights_dtype = *weights_dtype;
  q.reserved_bytes = *reserve;
  if (auto err = check_arithmetic(q, o.context, o.reserve))
    return fail(err);
  auto p = plan_capacity(q);

  if (o.json) {
    nlohmann::json j{
        {"model", model->name},
        {"layers", model->layers},
        {"kv_heads", model->kv_heads},
        {"head_dim", model->head_dim},
        {"dtype", o.dtype},
        {"block_tokens", o.block_tokens},
        {"context_tokens", *context},
        {"bytes_per_token", p.bytes_per_token},
        {"bytes_per_block", p.bytes_per_block},
        {"blocks_per_request", p.blocks_per_request},
        {"bytes_per_request", p.bytes_per_request},
        {"hbm_bytes", *hbm},
        {"weights_dtype", o.weights_dtype},
        {"weight_bytes", p.weight_bytes},
        {"kv_budget_bytes", p.kv_budget_bytes},
        {"tokens_that_fit", p.tokens_that_fit},
        {"requests_that_fit", p.requests_that_fit},
    };
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model             {} ({} layers, {} query heads, {} KV heads{}, head_dim {})\n", model->name,
             model->layers, model->query_heads, model->kv_heads,
             model->kv_heads == model->query_heads ? ", MHA" : (model->kv_heads == 1 ? ", MQA" : ", GQA"),
             model->head_dim);
  fmt::print("KV dtype          {} (blocks of {} tokens)\n", o.dtype, o.block_tokens);
  fmt::print("per token         {} B ({})\n", format_count(p.bytes_per_token), format_bytes(p.bytes_per_token));
  fmt::print("per block         {} B ({})\n", format_count(p.bytes_per_block), format_bytes(p.bytes_per_block));
  fmt::print("per request       {} B ({}) for {} tokens in {} blocks\n", format_count(p.bytes_per_request),
             format_bytes(p.bytes_per_request), format_count(*context), format_count(p.blocks_per_request));
  fmt::print("GPU memory        {} ({} B)\n", format_bytes(*hbm), format_count(*hbm));
  fmt::print("weights           {} ({})\n", format_bytes(p.weight_bytes), o.weights_dtype);
  fmt::print("KV budget         {}\n", format_bytes(p.kv_budget_bytes));
  fmt::print("requests that fit {} ({} tokens in all)\n", format_count(p.requests_that_fit),
             format_count(p.tokens_that_fit));
  return 0;
}

} // namespace

command add_calc_command(CLI::App& app) {
  auto options = std::make_shared<calc_options>();
  auto* sub = app.add_subcommand("calc", "KV-cache memory math: bytes per token, block and request; requests that fit");
  sub->add_option("--model", options->model, "model preset")->capture_default_str();
  sub->add_option("--context", options->context, "context length in tokens (128k = 131,072)")->capture_default_str();
  sub->add_option("--dtype", options->dtype, "KV dtype: fp16, bf16, fp8, int8, int4, int4_row")->capture_default_str();
  sub->add_option("--hbm", options->hbm, "GPU memory, e.g. 141GB or 80GiB")->capture_default_str();
  sub->add_option("--weights-dtype", options->weights_dtype, "weights dtype: bf16, fp16, fp8, int8, int4")
      ->capture_default_str();
  sub->add_option("--reserve", options->reserve, "GPU memory kept off the KV budget (activations)")
      ->capture_default_str();
  sub->add_option("--block-tokens", options->block_tokens, "tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  sub->add_option("--profile", options->profile,
                  "hardware profile (configs/hardware name or file): print prefill and decode latency by context "
                  "length instead; GPU memory and reserve are the profile's");
  sub->add_option("--contexts", options->contexts,
                  "with --profile: context lengths, e.g. 4k,32k,128k (default: "
                  "powers of two from 1k to --context)");
  sub->add_option("--prefill-chunk", options->prefill_chunk, "with --profile: tokens per prefill step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_flag("--json", options->json, "print JSON");
  return {sub, [options, sub] {
            options->memory_given = sub->count("--hbm") + sub->count("--reserve") > 0;
            return run_calc(*options);
          }};
}

} // namespace kvtier::cli
