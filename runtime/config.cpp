#include "runtime/config.hpp"

#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/toml_reader.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cmath>
#include <limits>

namespace kvtier {
namespace {

constexpr uint64_t max_u64 = std::numeric_limits<uint64_t>::max();
constexpr uint64_t petabyte = 1'000'000'000'000'000;

caf::error read_link(toml_reader& parent, std::string_view key, link_profile& link) {
  auto table = parent.sub_table(key);
  if (!table)
    return parent.error();
  toml_reader r(*table, parent.file(), fmt::format("pcie.{}", key));
  r.read("gbps", link.gbps, 0.001, 10'000);
  r.read("latency_us", link.latency_us, 0, 1e6);
  r.read("per_op_us", link.per_op_us, 0, 1e6);
  return r.finish({"gbps", "latency_us", "per_op_us"});
}

caf::error read_hardware(const toml::table& root, const std::string& file, hardware_profile& hw) {
  toml_reader top(root, file, "");
  top.read("name", hw.name);
  top.read_bytes("dram", hw.dram_bytes, 0, petabyte);
  top.read_bytes("nvme", hw.nvme_bytes, 0, petabyte);
  if (auto t = top.sub_table("gpu")) {
    toml_reader r(*t, file, "gpu");
    auto& g = hw.gpu;
    r.read("name", g.name);
    r.read_bytes("hbm", g.hbm_bytes, 1'000'000, petabyte);
    r.read("hbm_gbps", g.hbm_gbps, 1, 1e6);
    r.read("bf16_tflops", g.bf16_tflops, 0.1, 1e6);
    r.read("compute_efficiency", g.compute_efficiency, 0.01, 1);
    r.read("memory_efficiency", g.memory_efficiency, 0.01, 1);
    r.read("step_overhead_us", g.step_overhead_us, 0, 1e6);
    r.read_bytes("reserved", g.reserved_bytes, 0, petabyte);
    if (auto err = r.finish({"name", "hbm", "hbm_gbps", "bf16_tflops", "compute_efficiency", "memory_efficiency",
                             "step_overhead_us", "reserved"}))
      return err;
  }
  if (auto t = top.sub_table("pcie")) {
    toml_reader r(*t, file, "pcie");
    if (auto err = read_link(r, "h2d", hw.pcie.h2d))
      return err;
    if (auto err = read_link(r, "d2h", hw.pcie.d2h))
      return err;
    r.read("duplex_gbps", hw.pcie.duplex_gbps, 0.001, 10'000);
    if (auto err = r.finish({"h2d", "d2h", "duplex_gbps"}))
      return err;
  }
  if (auto t = top.sub_table("nvme_device")) {
    toml_reader r(*t, file, "nvme_device");
    auto& n = hw.nvme;
    r.read("read_gbps", n.read_gbps, 0.001, 10'000);
    r.read("write_gbps", n.write_gbps, 0.001, 10'000);
    r.read("read_iops", n.read_iops, 1, 1e9);
    r.read("write_iops", n.write_iops, 1, 1e9);
    r.read("queue_depth", n.queue_depth, 1, 65536);
    r.read("latency_us", n.latency_us, 0, 1e6);
    if (auto err = r.finish({"read_gbps", "write_gbps", "read_iops", "write_iops", "queue_depth", "latency_us"}))
      return err;
  }
  return top.finish({"name", "dram", "nvme", "gpu", "pcie", "nvme_device"});
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
      r.fail("preset", fmt::format("unknown model \"{}\"{}; expected one of {}", name,
                                   hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint), list));
      return r.error();
    }
    model = *preset;
  }
  r.read("name", model.name);
  r.read("layers", model.layers, 1, 1024);
  r.read("query_heads", model.query_heads, 1, 4096);
  r.read("kv_heads", model.kv_heads, 1, 4096);
  r.read("head_dim", model.head_dim, 1, 4096);
  r.read("parameters", model.parameters, 1, 100'000'000'000'000);
  r.read("hidden", model.hidden, 1, 1 << 20);
  r.read("max_context", model.max_context, 1, 1u << 30);
  std::string dtype{name_of(cfg.geometry.dtype)};
  r.read_choice("dtype", dtype, {"fp16", "bf16", "fp8", "int8", "int4"});
  if (auto d = parse_dtype(dtype))
    cfg.geometry.dtype = *d;
  r.read_choice("weights_dtype", cfg.weights_dtype, {"fp16", "bf16", "fp8", "int8", "int4"});
  if (auto err = r.finish({"preset", "name", "layers", "query_heads", "kv_heads", "head_dim", "parameters", "hidden",
                           "max_context", "dtype", "weights_dtype"}))
    return err;
  if (model.kv_heads > model.query_heads || model.query_heads % model.kv_heads != 0) {
    r.fail("kv_heads", fmt::format("expected a divisor of query_heads ({}), got {}", model.query_heads,
                                   model.kv_heads));
    return r.error();
  }
  return {};
}

caf::error read_tier(toml_reader& parent, std::string_view name, tier_config& tier, std::string* path) {
  auto t = parent.sub_table(name);
  if (!t)
    return parent.error();
  toml_reader r(*t, parent.file(), fmt::format("tiers.{}", name));
  r.read("enabled", tier.enabled);
  if (auto node = t->get("capacity"); node && node->value<std::string>() == "auto")
    r.mark_known("capacity"), tier.capacity_bytes = 0;
  else
    r.read_bytes("capacity", tier.capacity_bytes, 0, petabyte);
  std::vector<std::string_view> allowed{"enabled", "capacity"};
  if (path) {
    r.read("path", *path);
    allowed.push_back("path");
    // The page store's own knobs; io/nvme_options.cpp reads and checks them.
    for (auto key : {"engine", "queue_depth", "sqpoll", "direct_io", "register_buffers", "large_block",
                     "write_retries", "read_retries", "io_timeout_ms"}) {
      r.mark_known(key);
      allowed.push_back(key);
    }
  }
  return r.finish(allowed);
}

caf::error check_capacities(const config& cfg, toml_reader& top, const toml::table& root) {
  auto fail_at = [&](std::string_view tier, const std::string& what) {
    auto tiers = root.get_as<toml::table>("tiers");
    const toml::node* node = tiers ? tiers->get(tier) : nullptr;
    if (node && node->as_table() && node->as_table()->get("capacity"))
      node = node->as_table()->get("capacity");
    auto where = node ? top.where(node->source()) : cfg.source;
    return make_error(errc::invalid_config, fmt::format("{}: [tiers.{}] capacity: {}", where, tier, what));
  };
  const auto& hw = cfg.hardware;
  uint64_t weights = cfg.weight_bytes();
  if (weights + hw.gpu.reserved_bytes >= hw.gpu.hbm_bytes)
    return fail_at("hbm", fmt::format("the model's weights ({}) and reserve ({}) do not fit the GPU's {} of HBM",
                                      format_bytes(weights), format_bytes(hw.gpu.reserved_bytes),
                                      format_bytes(hw.gpu.hbm_bytes)));
  uint64_t hbm_room = hw.gpu.hbm_bytes - weights - hw.gpu.reserved_bytes;
  if (cfg.tiers.hbm.capacity_bytes > hbm_room)
    return fail_at("hbm", fmt::format("expected at most {} (the GPU's {} less weights {} and reserve {}), got {}",
                                      format_bytes(hbm_room), format_bytes(hw.gpu.hbm_bytes), format_bytes(weights),
                                      format_bytes(hw.gpu.reserved_bytes), format_bytes(cfg.tiers.hbm.capacity_bytes)));
  uint64_t dram_limit = hw.dram_bytes;
  if (cfg.backend == "real") {
    // A real run pins DRAM: it cannot take more than this machine has.
    uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    dram_limit = std::min(dram_limit, physical);
  }
  if (cfg.tiers.dram.enabled && cfg.tiers.dram.capacity_bytes > dram_limit)
    return fail_at("dram", fmt::format("expected at most {} (the machine's DRAM), got {}", format_bytes(dram_limit),
                                       format_bytes(cfg.tiers.dram.capacity_bytes)));
  if (cfg.tiers.nvme.enabled && cfg.tiers.nvme.capacity_bytes > hw.nvme_bytes)
    return fail_at("nvme", fmt::format("expected at most {} (the machine's NVMe), got {}", format_bytes(hw.nvme_bytes),
                                       format_bytes(cfg.tiers.nvme.capacity_bytes)));
  if (cfg.hbm_blocks() == 0)
    return fail_at("hbm", fmt::format("expected room for at least one {} block", format_bytes(cfg.geometry.bytes_per_block())));
  return {};
}

} // namespace

caf::expected<double> weight_bytes_per_parameter(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "bf16")
    return 2.0;
  if (dtype == "fp8" || dtype == "int8")
    return 1.0;
  if (dtype == "int4")
    return 0.5;
  return make_error(errc::invalid_argument,
                    fmt::format("unknown weights dtype '{}': expected fp16, bf16, fp8, int8 or int4", dtype));
}

uint64_t config::weight_bytes() const {
  auto per = weight_bytes_per_parameter(weights_dtype);
  return static_cast<uint64_t>(std::llround(static_cast<double>(geometry.model.parameters) * (per ? *per : 2.0)));
}

uint64_t config::hbm_kv_bytes() const {
  if (tiers.hbm.capacity_bytes > 0)
    return tiers.hbm.capacity_bytes;
  uint64_t used = weight_bytes() + hardware.gpu.reserved_bytes;
  return hardware.gpu.hbm_bytes > used ? hardware.gpu.hbm_bytes - used : 0;
}

namespace {
uint32_t slots(uint64_t bytes, uint64_t per_block) {
  return static_cast<uint32_t>(std::min<uint64_t>(bytes / per_block, std::numeric_limits<uint32_t>::max() - 1));
}
} // namespace

uint32_t config::hbm_blocks() const {
  return slots(hbm_kv_bytes(), geometry.bytes_per_block());
}
uint64_t config::offload_block_bytes() const {
  auto dtype = parse_dtype(compression.offload_dtype);
  if (!dtype)
    return geometry.bytes_per_block();
  kv_geometry quantized = geometry;
  quantized.dtype = *dtype;
  return std::min(quantized.bytes_per_block(), geometry.bytes_per_block());
}
uint32_t config::dram_blocks() const {
  return tiers.dram.enabled ? slots(tiers.dram.capacity_bytes, offload_block_bytes()) : 0;
}
uint32_t config::nvme_blocks() const {
  return tiers.nvme.enabled ? slots(tiers.nvme.capacity_bytes, offload_block_bytes()) : 0;
}

caf::expected<hardware_profile> parse_hardware_profile(std::string_view text, const std::string& name) {
  auto root = parse_toml(text, name);
  if (!root)
    return std::move(root.error());
  hardware_profile hw;
  if (auto err = read_hardware(*root, name, hw))
    return err;
  return hw;
}

caf::expected<hardware_profile> load_hardware_profile(const std::string& name_or_path) {
  bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_path) {
    auto root = parse_toml_file(name_or_path);
    if (!root)
      return std::move(root.error());
    hardware_profile hw;
    if (auto err = read_hardware(*root, name_or_path, hw))
      return err;
    return hw;
  }
  auto text = embedded_file(fmt::format("hardware/{}.toml", name_or_path));
  if (!text) {
    std::vector<std::string_view> names;
    std::string list;
    for (const auto& file : embedded_files())
      if (file.name.starts_with("hardware/")) {
        auto n = file.name.substr(9, file.name.size() - 9 - 5);
        names.push_back(n);
        list += (list.empty() ? "" : ", ") + std::string(n);
      }
    auto hint = closest_match(name_or_path, names);
    return make_error(errc::invalid_config,
                      fmt::format("unknown hardware profile \"{}\"{}; expected a built-in profile ({}) or a path to a .toml file",
                                  name_or_path, hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint), list));
  }
  return parse_hardware_profile(*text, fmt::format("<built-in>/configs/hardware/{}.toml", name_or_path));
}

caf::expected<config> parse_config(std::string_view text, const std::string& name) {
  auto parsed = parse_toml(text, name);
  if (!parsed)
    return std::move(parsed.error());
  const toml::table& root = *parsed;
  config cfg;
  cfg.source = name;
  cfg.geometry.model = *find_model_preset("llama-3-8b");
  toml_reader top(root, name, "");
  top.read_choice("backend", cfg.backend, {"sim", "real"});
  if (auto err = read_model(top, cfg))
    return err;
  if (auto hw = top.sub_table("hardware")) {
    toml_reader r(*hw, name, "hardware");
    std::string profile = "h200";
    r.read("profile", profile);
    if (auto err = r.finish({"profile"}))
      return err;
    // A relative path is relative to the config file.
    if (profile.find('/') != std::string::npos && profile.front() != '/') {
      auto slash = name.rfind('/');
      if (slash != std::string::npos)
        profile = name.substr(0, slash + 1) + profile;
    }
    auto loaded = load_hardware_profile(profile);
    if (!loaded) {
      auto node = hw->get("profile");
      return make_error(errc::invalid_config, fmt::format("{}: [hardware] profile: {}",
                                                          node ? r.where(node->source()) : name,
                                                          describe(loaded.error())));
    }
    cfg.hardware = *loaded;
  } else if (top.ok()) {
    cfg.hardware = *load_hardware_profile("h200");
  }
  if (auto t = top.sub_table("tiers")) {
    toml_reader r(*t, name, "tiers");
    if (auto err = read_tier(r, "hbm", cfg.tiers.hbm, nullptr))
      return err;
    if (auto err = read_tier(r, "dram", cfg.tiers.dram, nullptr))
      return err;
    if (auto err = read_tier(r, "nvme", cfg.tiers.nvme, &cfg.tiers.nvme_path))
      return err;
    if (auto err = r.finish({"hbm", "dram", "nvme"}))
      return err;
  }
  if (auto t = top.sub_table("cache")) {
    toml_reader r(*t, name, "cache");
    r.read("block_tokens", cfg.cache.block_tokens, 1, 4096);
    r.read_choice("policy", cfg.cache.policy, {"lru", "oracle"});
    r.read("demote_watermark", cfg.cache.demote_watermark, 0, 0.9);
    r.read("prefix_caching", cfg.cache.prefix_caching);
    if (auto err = r.finish({"block_tokens", "policy", "demote_watermark", "prefix_caching"}))
      return err;
  }
  cfg.geometry.block_tokens = cfg.cache.block_tokens;
  if (auto t = top.sub_table("scheduler")) {
    toml_reader r(*t, name, "scheduler");
    auto& s = cfg.scheduler;
    r.read("max_running", s.max_running, 1, 65536);
    r.read("max_batch_tokens", s.max_batch_tokens, 1, 1u << 24);
    r.read("prefill_chunk", s.prefill_chunk, 1, 1u << 24);
    r.read_choice("preemption", s.preemption, {"auto", "swap", "recompute"});
    if (auto err = r.finish({"max_running", "max_batch_tokens", "prefill_chunk", "preemption"}))
      return err;
  }
  if (auto t = top.sub_table("compression")) {
    toml_reader r(*t, name, "compression");
    auto& c = cfg.compression;
    r.read_choice("policy", c.policy,
                  {"none", "ratio", "h2o", "h2o_window", "h2o_raw", "snapkv", "streaming_llm", "sliding_window",
                   "random", "oracle"});
    r.read("keep_ratio", c.keep_ratio, 0.001, 1.0);
    r.read("min_tokens", c.min_tokens, 0, 1ull << 32);
    r.read("max_tokens", c.max_tokens, 0, 1ull << 32);
    r.read("every_tokens", c.every_tokens, 0, 1u << 30);
    r.read_choice("offload_dtype", c.offload_dtype, {"none", "fp8", "int8", "int4"});
    if (auto err = r.finish({"policy", "keep_ratio", "min_tokens", "max_tokens", "every_tokens", "offload_dtype"}))
      return err;
  }
  if (auto t = top.sub_table("sim")) {
    toml_reader r(*t, name, "sim");
    auto& s = cfg.sim;
    r.read("trace", s.trace);
    r.read_choice("trace_format", s.trace_format, {"auto", "mooncake", "azure", "burstgpt", "synthetic"});
    r.read("seed", s.seed, 0, max_u64);
    r.read("max_requests", s.max_requests, 0, max_u64);
    r.read("time_scale", s.time_scale, 1e-6, 1e6);
    r.read("trace_block_tokens", s.trace_block_tokens, 1, 1u << 20);
    r.read("skip_bad", s.skip_bad);
    // [sim.synthetic] belongs to the trace generator (sim/synthetic_spec.hpp), which parses it.
    if (t->contains("synthetic")) {
      r.sub_table("synthetic");
      s.has_synthetic = true;
    }
    if (auto err = r.finish({"trace", "trace_format", "seed", "max_requests", "time_scale", "trace_block_tokens",
                             "skip_bad", "synthetic"}))
      return err;
    // A relative trace path is relative to the config file.
    if (!s.trace.empty() && s.trace.front() != '/') {
      auto slash = name.rfind('/');
      if (slash != std::string::npos)
        s.trace = name.substr(0, slash + 1) + s.trace;
    }
  }
  if (auto t = top.sub_table("copy")) {
    toml_reader r(*t, name, "copy");
    r.read_choice("kernels", cfg.copy.kernels, {"on_demand", "never"});
    r.read("calibrate", cfg.copy.calibrate);
    if (auto err = r.finish({"kernels", "calibrate"}))
      return err;
  }
  if (auto err = top.finish({"backend", "model", "hardware", "tiers", "cache", "scheduler", "compression", "sim", "copy"}))
    return err;
  if (auto err = check_capacities(cfg, top, root))
    return err;
  return cfg;
}

caf::expected<config> load_config(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    return make_error(errc::invalid_config, fmt::format("{}: cannot open config file", path));
  std::string text;
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  std::fclose(f);
  return parse_config(text, path);
}

} // namespace kvtier
