// parse_config / load_config: TOML tables into the typed sections of
// runtime/config.hpp, in one pass. Each table reader checks types, choices and
// bounds with the value's file:line; validate() then checks the whole config
// (the same bounds, and the rules that span keys) and its problem is located
// at the key it names.

#include "runtime/config.hpp"
#include "runtime/config_bounds.hpp"
#include "runtime/config_names.hpp"
#include "runtime/config_table.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/text_file.hpp"
#include "runtime/toml_reader.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <limits>

namespace kvtier {
namespace {

namespace b = config_bounds;

const std::vector<std::string_view> dtype_names{"fp16", "bf16", "fp8", "int8", "int4", "int4_row"};

// A path relative to the config file's directory.
std::string relative_to(const std::string& config_file, std::string path) {
  if (path.empty() || path.front() == '/')
    return path;
  auto slash = config_file.rfind('/');
  return slash == std::string::npos ? path : config_file.substr(0, slash + 1) + path;
}

caf::error read_model(toml_reader& top, config& cfg) {
  auto t = top.sub_table("model");
  if (!t)
    return top.error();
  toml_reader r(*t, top.file(), "model");
  auto& model = cfg.geometry.model;
  if (r.has("preset")) {
    std::string name;
    r.read("preset", name);
    auto preset = find_model_preset(name);
    if (!preset) {
      std::vector<std::string_view> names;
      for (const auto& p : model_presets())
        names.push_back(p.name);
      std::string list;
      for (auto n : names)
        list += (list.empty() ? "" : ", ") + std::string(n);
      auto hint = closest_match(name, names);
      r.fail("preset",
             fmt::format("unknown model \"{}\"{}; expected one of {}", name,
                         hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint), list));
      return r.error();
    }
    model = *preset;
  }
  r.read("name", model.name);
  r.read("layers", model.layers, b::layers);
  r.read("query_heads", model.query_heads, b::heads);
  r.read("kv_heads", model.kv_heads, b::heads);
  r.read("head_dim", model.head_dim, b::head_dim);
  r.read("parameters", model.parameters, b::parameters);
  r.read("hidden", model.hidden, b::hidden);
  r.read("intermediate", model.intermediate, b::hidden);
  r.read("vocab", model.vocab, b::vocab);
  if (r.has("max_context"))
    r.fail("max_context",
           "kvtier does not use a model's context limit (a request is bounded by the HBM it needs); "
           "remove the key");
  std::string dtype{name_of(cfg.geometry.dtype)};
  r.read_choice("dtype", dtype, dtype_names);
  if (auto d = parse_dtype(dtype))
    cfg.geometry.dtype = *d;
  std::string weights{name_of(cfg.weights_dtype)};
  r.read_choice("weights_dtype", weights, dtype_names);
  if (auto d = parse_dtype(weights); d && *d == kv_dtype::int4_row)
    r.fail("weights_dtype",
           "int4_row is a KV layout (one scale per head_dim row), not a weights format; expected "
           "fp16, bf16, fp8, int8 or int4");
  else if (d)
    cfg.weights_dtype = *d;
  return r.finish({"preset", "name", "layers", "query_heads", "kv_heads", "head_dim", "parameters", "hidden",
                   "intermediate", "vocab", "max_context", "dtype", "weights_dtype"});
}

caf::error read_hardware_table(toml_reader& top, config& cfg) {
  const std::string& name = top.file();
  auto hw = top.sub_table("hardware");
  if (!hw) {
    if (top.ok())
      cfg.hardware = *load_hardware_profile("h200");
    return top.error();
  }
  toml_reader r(*hw, name, "hardware");
  std::string profile = "h200";
  r.read("profile", profile);
  if (auto err = r.finish({"profile"}))
    return err;
  if (profile.find('/') != std::string::npos)
    profile = relative_to(r.file_of("profile"), profile);
  auto loaded = load_hardware_profile(profile);
  if (!loaded) {
    auto node = hw->get("profile");
    return make_error(
        errc::invalid_config,
        fmt::format("{}: [hardware] profile: {}", node ? r.where(node->source()) : name, describe(loaded.error())));
  }
  cfg.hardware = *loaded;
  return {};
}

// capacity = "auto" (HBM only) or a size.
void read_capacity(toml_reader& r, const toml::table& t, std::string_view tier, std::optional<uint64_t>& out) {
  auto node = t.get("capacity");
  if (!node)
    return;
  if (node->value<std::string>() == "auto") {
    r.mark_known("capacity");
    if (tier != "hbm")
      return r.fail("capacity",
                    "\"auto\" is only for [tiers.hbm]; expected a size such as \"256GB\" (to turn the "
                    "tier off, set enabled = false)");
    out.reset();
    return;
  }
  uint64_t bytes = 0;
  r.read_bytes("capacity", bytes, b::tier_capacity);
  if (!r.ok())
    return;
  if (tier == "hbm" && bytes == 0)
    return r.fail("capacity", "expected \"auto\" or a size of at least one block, got 0 B");
  out = bytes;
}

void read_nvme_settings(toml_reader& r, nvme_settings& out) {
  r.read_enum("engine", out.engine, spellings(nvme_engine{}));
  r.read("queue_depth", out.queue_depth, b::nvme_queue_depth);
  r.read("sqpoll", out.sqpoll);
  r.read("direct_io", out.direct_io);
  r.read("register_buffers", out.register_buffers);
  r.read_bytes("large_block", out.large_block_bytes, b::nvme_large_block);
  r.read("write_retries", out.write_retries, b::nvme_retries);
  r.read("read_retries", out.read_retries, b::nvme_retries);
  r.read("io_timeout_ms", out.io_timeout_ms, b::nvme_timeout_ms);
  r.read_enum("on_open", out.on_open, spellings(nvme_open_policy{}));
}

caf::error read_tiers(toml_reader& top, config& cfg) {
  auto tiers = top.sub_table("tiers");
  if (!tiers)
    return top.error();
  toml_reader parent(*tiers, top.file(), "tiers");
  if (auto t = parent.sub_table("hbm")) {
    toml_reader r(*t, top.file(), "tiers.hbm");
    bool enabled = true;
    r.read("enabled", enabled);
    if (r.ok() && !enabled)
      r.fail("enabled", "HBM cannot be turned off: every step computes from it (lower its capacity instead)");
    read_capacity(r, *t, "hbm", cfg.tiers.hbm.capacity_bytes);
    if (auto err = r.finish({"enabled", "capacity"}))
      return err;
  }
  for (auto [name, tier] : {std::pair{"dram", &cfg.tiers.dram}, std::pair{"nvme", &cfg.tiers.nvme}}) {
    auto t = parent.sub_table(name);
    if (!t)
      continue;
    toml_reader r(*t, top.file(), fmt::format("tiers.{}", name));
    r.read("enabled", tier->enabled);
    std::optional<uint64_t> capacity = tier->capacity_bytes;
    read_capacity(r, *t, name, capacity);
    tier->capacity_bytes = capacity.value_or(0);
    std::vector<std::string_view> allowed{"enabled", "capacity"};
    if (std::string_view{name} == "nvme") {
      r.read("path", cfg.tiers.nvme_path);
      read_nvme_settings(r, cfg.tiers.nvme_io);
      allowed.insert(allowed.end(),
                     {"path", "engine", "queue_depth", "sqpoll", "direct_io", "register_buffers", "large_block",
                      "write_retries", "read_retries", "io_timeout_ms", "on_open"});
    }
    if (auto err = r.finish(allowed))
      return err;
  }
  return parent.finish({"hbm", "dram", "nvme"});
}

caf::error read_distribution(toml_reader& parent, const toml::table& root, std::string_view key,
                             length_distribution& out) {
  const toml::node* node = root.get(key);
  if (!node)
    return {};
  constexpr bounds<uint64_t> lengths{0, synthetic_max_length};
  if (node->is_integer()) {
    uint32_t tokens = 0;
    parent.read(key, tokens, lengths);
    if (parent.ok())
      out = length_distribution::fixed(tokens);
    return parent.error();
  }
  auto table = parent.sub_table(key);
  if (!table)
    return parent.error();
  toml_reader r(*table, parent.file(), fmt::format("sim.synthetic.{}", key));
  std::string dist;
  if (!table->contains("dist")) {
    r.fail("dist", "missing; expected \"fixed\", \"uniform\" or \"lognormal\"");
    return r.error();
  }
  r.read_choice("dist", dist, {"fixed", "uniform", "lognormal"});
  if (!r.ok())
    return r.error();
  auto require = [&](std::string_view k) {
    if (!table->contains(k))
      r.fail(k, fmt::format("missing; a {} distribution needs it", dist));
  };
  length_distribution d;
  if (dist == "fixed") {
    require("value");
    r.read("value", d.value, lengths);
    d = length_distribution::fixed(d.value);
    if (auto err = r.finish({"dist", "value"}))
      return err;
  } else if (dist == "uniform") {
    require("min");
    require("max");
    d.dist = length_distribution::shape::uniform;
    r.read("min", d.min, lengths);
    r.read("max", d.max, lengths);
    if (r.ok() && d.min > d.max)
      r.fail("max", fmt::format("expected max >= min ({}), got {}", d.min, d.max));
    if (auto err = r.finish({"dist", "min", "max"}))
      return err;
  } else {
    require("mean");
    d.dist = length_distribution::shape::lognormal;
    r.read("mean", d.mean, 1, synthetic_max_mean);
    r.read("sigma", d.sigma, 0, synthetic_max_sigma);
    r.read("min", d.min, lengths);
    r.read("max", d.max, lengths);
    if (r.ok() && d.min > d.max)
      r.fail("max", fmt::format("expected max >= min ({}), got {}", d.min, d.max));
    if (auto err = r.finish({"dist", "mean", "sigma", "min", "max"}))
      return err;
  }
  out = d;
  return {};
}

caf::error read_synthetic(const toml::table& table, const std::string& file, synthetic_spec& s) {
  toml_reader r(table, file, "sim.synthetic");
  constexpr uint32_t max_u32 = std::numeric_limits<uint32_t>::max();
  r.read("requests", s.requests, 1, synthetic_max_requests);
  r.read("rate_per_s", s.rate_per_s, 1e-9, 1e9);
  if (auto err = read_distribution(r, table, "input", s.input))
    return err;
  if (auto err = read_distribution(r, table, "output", s.output))
    return err;
  r.read("shared_prefix_tokens", s.shared_prefix_tokens, 0, synthetic_max_length);
  r.read("prefix_groups", s.prefix_groups, 1, 1u << 20);
  r.read("turns_per_session", s.turns_per_session, 1, 1u << 20);
  r.read("think_time_s", s.think_time_s, 0, 1e9);
  r.read("seed", s.seed, 0, std::numeric_limits<uint64_t>::max());
  r.read("tenants", s.tenants, 0, 1u << 20);
  r.read("block_tokens", s.block_tokens, 1, 1u << 20);
  r.read("max_input_tokens", s.max_input_tokens, 0, max_u32);
  return r.finish({"requests", "rate_per_s", "input", "output", "shared_prefix_tokens", "prefix_groups",
                   "turns_per_session", "think_time_s", "seed", "tenants", "block_tokens", "max_input_tokens"});
}

caf::error read_sim(toml_reader& top, config& cfg) {
  auto t = top.sub_table("sim");
  if (!t)
    return top.error();
  toml_reader r(*t, top.file(), "sim");
  auto& s = cfg.sim;
  r.read("trace", s.trace);
  r.read_enum("trace_format", s.trace_format, spellings(trace_format_choice{}));
  if (r.has("seed"))
    r.fail("seed", "a replay draws nothing at random; a synthetic trace's seed is [sim.synthetic] seed");
  r.read("max_requests", s.max_requests, b::any_count);
  r.read("time_scale", s.time_scale, b::time_scale);
  r.read("trace_block_tokens", s.trace_block_tokens, b::trace_block_tokens);
  r.read("skip_bad", s.skip_bad);
  if (auto synthetic = r.sub_table("synthetic")) {
    synthetic_spec spec;
    if (auto err = read_synthetic(*synthetic, top.file(), spec))
      return err;
    s.synthetic = spec;
  }
  if (auto err = r.finish({"trace", "trace_format", "seed", "max_requests", "time_scale", "trace_block_tokens",
                           "skip_bad", "synthetic"}))
    return err;
  s.trace = relative_to(r.file_of("trace"), s.trace);
  return {};
}

caf::error read_cluster(toml_reader& top, config& cfg) {
  auto t = top.sub_table("cluster");
  if (!t)
    return top.error();
  toml_reader r(*t, top.file(), "cluster");
  auto& c = cfg.cluster;
  r.read("replicas", c.replicas, b::cluster_replicas);
  r.read_enum("router", c.router, spellings(router_kind{}));
  r.read("load_slack", c.load_slack, b::cluster_load_slack);
  r.read("prefill", c.prefill, b::cluster_pool);
  r.read("decode", c.decode, b::cluster_pool);
  r.read_bytes("remote_capacity", c.remote_capacity_bytes, b::tier_capacity);
  r.read("remote_gbps", c.remote_gbps, b::link_gbps);
  r.read("remote_latency_us", c.remote_latency_us, b::microseconds);
  r.read("threads", c.threads, b::cluster_threads);
  return r.finish({"replicas", "router", "load_slack", "prefill", "decode", "remote_capacity", "remote_gbps",
                   "remote_latency_us", "threads"});
}

caf::error read_remote(toml_reader& top, config& cfg) {
  auto t = top.sub_table("remote");
  if (!t)
    return top.error();
  toml_reader r(*t, top.file(), "remote");
  auto& m = cfg.remote;
  r.read_enum("kind", m.kind, spellings(remote_kind{}));
  r.read("host", m.host);
  r.read("port", m.port, b::tcp_port);
  r.read("unix_socket", m.unix_socket);
  r.read("connect_timeout_ms", m.connect_timeout_ms, b::remote_timeout_ms);
  r.read("command_timeout_ms", m.command_timeout_ms, b::remote_timeout_ms);
  r.read("key_prefix", m.key_prefix);
  if (auto err =
          r.finish({"kind", "host", "port", "unix_socket", "connect_timeout_ms", "command_timeout_ms", "key_prefix"}))
    return err;
  m.unix_socket = m.unix_socket.empty() ? m.unix_socket : relative_to(r.file_of("unix_socket"), m.unix_socket);
  return {};
}

caf::error read_policies(toml_reader& top, config& cfg) {
  const std::string& name = top.file();
  if (auto t = top.sub_table("cache")) {
    toml_reader r(*t, name, "cache");
    r.read("block_tokens", cfg.cache.block_tokens, b::block_tokens);
    r.read_enum("policy", cfg.cache.policy, spellings(eviction_policy{}));
    r.read_enum("hierarchy", cfg.cache.hierarchy, spellings(cache_hierarchy{}));
    r.read("demote_watermark", cfg.cache.demote_watermark, b::demote_watermark);
    r.read("prefix_caching", cfg.cache.prefix_caching);
    r.read_enum("slot_placement", cfg.cache.slot_placement, spellings(slot_placement_kind{}));
    r.read("stream_from_dram", cfg.cache.stream_from_dram);
    r.read("stream_recent_tokens", cfg.cache.stream_recent_tokens, b::stream_recent_tokens);
    if (auto err = r.finish({"block_tokens", "policy", "hierarchy", "demote_watermark", "prefix_caching",
                             "slot_placement", "stream_from_dram", "stream_recent_tokens"}))
      return err;
  }
  cfg.geometry.block_tokens = cfg.cache.block_tokens;
  if (auto t = top.sub_table("scheduler")) {
    toml_reader r(*t, name, "scheduler");
    auto& s = cfg.scheduler;
    r.read("max_running", s.max_running, b::max_running);
    r.read("max_batch_tokens", s.max_batch_tokens, b::batch_tokens);
    r.read("prefill_chunk", s.prefill_chunk, b::batch_tokens);
    r.read_enum("preemption", s.preemption, spellings(preemption_mode{}));
    if (auto err = r.finish({"max_running", "max_batch_tokens", "prefill_chunk", "preemption"}))
      return err;
  }
  if (auto t = top.sub_table("compression")) {
    toml_reader r(*t, name, "compression");
    auto& c = cfg.compression;
    r.read_enum("policy", c.policy, spellings(compression_policy{}));
    r.read("keep_ratio", c.keep_ratio, b::keep_ratio);
    r.read("min_tokens", c.min_tokens, b::token_floor_cap);
    r.read("max_tokens", c.max_tokens, b::token_floor_cap);
    r.read("every_tokens", c.every_tokens, b::every_tokens);
    std::string offload{offload_dtype_name(c.offload_dtype)};
    r.read_choice("offload_dtype", offload, {"none", "fp8", "int8", "int4", "int4_row"});
    c.offload_dtype = offload == "none" ? std::nullopt : parse_dtype(offload);
    if (auto err = r.finish({"policy", "keep_ratio", "min_tokens", "max_tokens", "every_tokens", "offload_dtype"}))
      return err;
  }
  if (auto t = top.sub_table("copy")) {
    toml_reader r(*t, name, "copy");
    r.read_enum("kernels", cfg.copy.kernels, spellings(copy_kernel_use{}));
    r.read("calibrate", cfg.copy.calibrate);
    r.read("dma_streams", cfg.copy.dma_streams, uint32_t{0}, uint32_t{8});
    if (auto err = r.finish({"kernels", "calibrate", "dma_streams"}))
      return err;
  }
  if (auto t = top.sub_table("compute")) {
    toml_reader r(*t, name, "compute");
    auto& c = cfg.compute;
    r.read_enum("kind", c.kind, spellings(compute_kind{}));
    r.read("model_dir", c.model_dir);
    r.read("weights_seed", c.weights_seed, b::any_count);
    r.read("temperature", c.temperature, b::temperature);
    r.read("sampling_seed", c.sampling_seed, b::any_count);
    if (auto err = r.finish({"kind", "model_dir", "weights_seed", "temperature", "sampling_seed"}))
      return err;
  }
  return top.error();
}

// The node a problem names: [table] key, else the table, else nothing. A
// problem with the hardware profile's values points at [hardware] profile.
const toml::node* node_of(const toml::table& root, const config_problem& problem) {
  std::string_view path = problem.table;
  if (path == "hardware" || path.starts_with("hardware.")) {
    auto hw = root.get_as<toml::table>("hardware");
    return hw && hw->get("profile") ? hw->get("profile") : hw;
  }
  const toml::table* table = &root;
  while (!path.empty()) {
    auto dot = path.find('.');
    auto part = path.substr(0, dot);
    auto next = table->get_as<toml::table>(part);
    if (!next)
      return table == &root ? nullptr : table;
    table = next;
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  }
  if (auto node = table->get(problem.key))
    return node;
  return table == &root ? nullptr : table;
}

} // namespace

caf::expected<config> parse_config(std::string_view text, const std::string& name) {
  auto parsed = parse_toml(text, name);
  if (!parsed)
    return std::move(parsed.error());
  return config_of_table(*parsed, name);
}

caf::expected<config> config_of_table(const toml::table& root, const std::string& name) {
  config cfg;
  cfg.source = name;
  toml_reader top(root, name, "");
  top.read_enum("backend", cfg.backend, spellings(backend_kind{}));
  for (auto read : {read_model, read_hardware_table, read_tiers, read_policies, read_sim, read_cluster, read_remote})
    if (auto err = read(top, cfg))
      return err;
  if (auto err = top.finish({"backend", "model", "hardware", "tiers", "cache", "scheduler", "compression", "sim",
                             "copy", "compute", "cluster", "remote"}))
    return err;
  if (auto problem = find_problem(cfg)) {
    auto node = node_of(root, *problem);
    std::string scope = problem->table.empty() ? "" : fmt::format("[{}] ", problem->table);
    return make_error(
        errc::invalid_config,
        fmt::format("{}: {}{}: {}", node ? top.where(node->source()) : name, scope, problem->key, problem->what));
  }
  return cfg;
}

caf::expected<config> load_config(const std::string& path) {
  auto text = read_text_file(path, "config file");
  if (!text)
    return std::move(text.error());
  return parse_config(*text, path);
}

} // namespace kvtier
