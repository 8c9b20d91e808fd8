// validate(): the one check every config value goes through, whether it came
// from a TOML file (parse_config calls it and puts the file's line on the
// problem), a command-line override or a library caller.

#include "runtime/capacity_plan.hpp"
#include "runtime/config.hpp"
#include "runtime/config_bounds.hpp"
#include "runtime/config_names.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

namespace kvtier {
namespace {

namespace b = config_bounds;

class checker {
public:
  std::optional<config_problem> found;

  void fail(std::string_view table, std::string_view key, std::string what) {
    if (!found)
      found = config_problem{std::string(table), std::string(key), std::move(what)};
  }
  void number(std::string_view table, std::string_view key, double v, bounds<double> limit) {
    if (auto what = number_problem(v, limit))
      fail(table, key, *what);
  }
  void integer(std::string_view table, std::string_view key, uint64_t v, bounds<uint64_t> limit) {
    if (auto what = integer_problem(v, limit))
      fail(table, key, *what);
  }
  void size(std::string_view table, std::string_view key, uint64_t v, bounds<uint64_t> limit) {
    if (auto what = size_problem(v, limit))
      fail(table, key, *what);
  }
};

void check_model(const config& cfg, checker& c) {
  const auto& m = cfg.geometry.model;
  c.integer("model", "layers", m.layers, b::layers);
  c.integer("model", "query_heads", m.query_heads, b::heads);
  c.integer("model", "kv_heads", m.kv_heads, b::heads);
  c.integer("model", "head_dim", m.head_dim, b::head_dim);
  c.integer("model", "parameters", m.parameters, b::parameters);
  c.integer("model", "hidden", m.hidden, b::hidden);
  if (!c.found && (m.kv_heads > m.query_heads || m.query_heads % m.kv_heads != 0))
    c.fail("model", "kv_heads",
           fmt::format("expected a divisor of query_heads ({}), got {}", m.query_heads, m.kv_heads));
}

uint64_t physical_memory() {
  return uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
}

void check_tiers(const config& cfg, checker& c) {
  const auto& hw = cfg.hardware;
  const auto& t = cfg.tiers;
  if (t.hbm.capacity_bytes)
    c.size("tiers.hbm", "capacity", *t.hbm.capacity_bytes, b::tier_capacity);
  for (auto [name, tier] : {std::pair{"tiers.dram", &t.dram}, std::pair{"tiers.nvme", &t.nvme}})
    if (tier->enabled)
      c.size(name, "capacity", tier->capacity_bytes, b::tier_capacity);
  if (c.found)
    return;
  uint64_t weights = cfg.weight_bytes();
  if (weights + hw.gpu.reserved_bytes >= hw.gpu.hbm_bytes)
    return c.fail("tiers.hbm", "capacity",
                  fmt::format("the model's weights ({}) and reserve ({}) do not fit the GPU's {} of HBM",
                              format_bytes(weights), format_bytes(hw.gpu.reserved_bytes),
                              format_bytes(hw.gpu.hbm_bytes)));
  uint64_t hbm_room = hbm_kv_budget(hw.gpu.hbm_bytes, weights, hw.gpu.reserved_bytes);
  if (t.hbm.capacity_bytes && *t.hbm.capacity_bytes > hbm_room)
    return c.fail("tiers.hbm", "capacity",
                  fmt::format("expected at most {} (the GPU's {} less weights {} and reserve {}), got {}",
                              format_bytes(hbm_room), format_bytes(hw.gpu.hbm_bytes), format_bytes(weights),
                              format_bytes(hw.gpu.reserved_bytes), format_bytes(*t.hbm.capacity_bytes)));
  uint64_t dram_limit = hw.dram_bytes;
  if (cfg.backend == backend_kind::real)
    dram_limit =
        std::min(dram_limit, physical_memory()); // a real run pins DRAM: it cannot take more than this machine has
  if (t.dram.enabled && t.dram.capacity_bytes > dram_limit)
    return c.fail("tiers.dram", "capacity",
                  fmt::format("expected at most {} (the machine's DRAM), got {}", format_bytes(dram_limit),
                              format_bytes(t.dram.capacity_bytes)));
  if (t.nvme.enabled && t.nvme.capacity_bytes > hw.nvme_bytes)
    return c.fail("tiers.nvme", "capacity",
                  fmt::format("expected at most {} (the machine's NVMe), got {}", format_bytes(hw.nvme_bytes),
                              format_bytes(t.nvme.capacity_bytes)));
  if (cfg.hbm_blocks() == 0)
    return c.fail("tiers.hbm", "capacity",
                  fmt::format("expected room for at least one {} block, got {}",
                              format_bytes(cfg.geometry.bytes_per_block()), format_bytes(cfg.hbm_kv_bytes())));
  for (auto [name, tier, blocks] :
       {std::tuple{"tiers.dram", &t.dram, cfg.dram_blocks()}, std::tuple{"tiers.nvme", &t.nvme, cfg.nvme_blocks()}})
    if (tier->enabled && blocks == 0)
      return c.fail(name, "capacity",
                    fmt::format("expected room for at least one {} block, got {}; to turn the tier off, set "
                                "enabled = false",
                                format_bytes(cfg.offload_block_bytes()), format_bytes(tier->capacity_bytes)));
  // Every slot of every tier costs host memory for its metadata and its
  // prefix-index bucket (about 75 B, measured: 4.6 GB of RSS for 61M slots; the default config has 1.1M),
  // so a slot count beyond max_total_blocks is refused rather than allocated.
  uint64_t hbm = cfg.hbm_kv_bytes() / cfg.geometry.bytes_per_block();
  uint64_t dram = t.dram.enabled ? t.dram.capacity_bytes / cfg.offload_block_bytes() : 0;
  uint64_t nvme = t.nvme.enabled ? t.nvme.capacity_bytes / cfg.offload_block_bytes() : 0;
  if (hbm + dram + nvme > b::max_total_blocks)
    return c.fail("cache", "block_tokens",
                  fmt::format("blocks of {} tokens make {} blocks (HBM {}, DRAM {}, NVMe {}); kvtier keeps at most {} "
                              "(about 75 B of host memory each): raise block_tokens or lower the tier capacities",
                              cfg.geometry.block_tokens, format_count(hbm + dram + nvme), format_count(hbm),
                              format_count(dram), format_count(nvme), format_count(b::max_total_blocks)));
  if (t.nvme.enabled && t.nvme_path.empty())
    return c.fail("tiers.nvme", "path", "expected a directory for the slot file, got an empty string");
  const auto& io = t.nvme_io;
  c.integer("tiers.nvme", "queue_depth", io.queue_depth, b::nvme_queue_depth);
  c.size("tiers.nvme", "large_block", io.large_block_bytes, b::nvme_large_block);
  c.integer("tiers.nvme", "write_retries", io.write_retries, b::nvme_retries);
  c.integer("tiers.nvme", "read_retries", io.read_retries, b::nvme_retries);
  c.integer("tiers.nvme", "io_timeout_ms", io.io_timeout_ms, b::nvme_timeout_ms);
}

void check_policies(const config& cfg, checker& c) {
  c.integer("cache", "block_tokens", cfg.cache.block_tokens, b::block_tokens);
  c.number("cache", "demote_watermark", cfg.cache.demote_watermark, b::demote_watermark);
  c.integer("cache", "stream_recent_tokens", cfg.cache.stream_recent_tokens, b::stream_recent_tokens);
  if (!cfg.cache.stream_from_dram && cfg.cache.stream_recent_tokens != cache_config{}.stream_recent_tokens)
    c.fail("cache", "stream_recent_tokens",
           "has no effect while stream_from_dram = false; turn streaming on or remove the key");
  const auto& s = cfg.scheduler;
  c.integer("scheduler", "max_running", s.max_running, b::max_running);
  c.integer("scheduler", "max_batch_tokens", s.max_batch_tokens, b::batch_tokens);
  c.integer("scheduler", "prefill_chunk", s.prefill_chunk, b::batch_tokens);
  const auto& k = cfg.compression;
  c.number("compression", "keep_ratio", k.keep_ratio, b::keep_ratio);
  c.integer("compression", "min_tokens", k.min_tokens, b::token_floor_cap);
  c.integer("compression", "max_tokens", k.max_tokens, b::token_floor_cap);
  c.integer("compression", "every_tokens", k.every_tokens, b::every_tokens);
  if (k.policy == compression_policy::none) {
    // Budgets of no policy would be silently ignored.
    const compression_config unset;
    if (k.keep_ratio != unset.keep_ratio)
      c.fail("compression", "keep_ratio", "has no effect while policy = \"none\"; set a policy or remove the key");
    if (k.min_tokens != unset.min_tokens)
      c.fail("compression", "min_tokens", "has no effect while policy = \"none\"; set a policy or remove the key");
    if (k.max_tokens != unset.max_tokens)
      c.fail("compression", "max_tokens", "has no effect while policy = \"none\"; set a policy or remove the key");
    if (k.every_tokens != unset.every_tokens)
      c.fail("compression", "every_tokens", "has no effect while policy = \"none\"; set a policy or remove the key");
  }
  if (k.max_tokens > 0 && k.min_tokens > k.max_tokens)
    c.fail("compression", "max_tokens",
           fmt::format("expected at least min_tokens ({}) or 0 for no cap, got {}", k.min_tokens, k.max_tokens));
  if (k.offload_dtype && *k.offload_dtype != kv_dtype::fp8 && *k.offload_dtype != kv_dtype::int8 &&
      *k.offload_dtype != kv_dtype::int4 && *k.offload_dtype != kv_dtype::int4_row)
    c.fail("compression", "offload_dtype",
           fmt::format("expected none, fp8, int8, int4 or int4_row, got \"{}\"", name_of(*k.offload_dtype)));
  if (k.offload_dtype && cfg.geometry.dtype == kv_dtype::fp8)
    // fp8 or int8 blocks would keep their size; int4 would quantize a quantized cache again.
    c.fail("compression", "offload_dtype",
           fmt::format("\"{}\": the KV cache is fp8 already, and offload quantizes 16-bit blocks; set "
                       "offload_dtype to \"none\" (fp8 blocks move below HBM as they are), or [model] dtype to "
                       "fp16 or bf16",
                       name_of(*k.offload_dtype)));
  else if (k.offload_dtype && cfg.backend == backend_kind::real && cfg.geometry.dtype != kv_dtype::fp16 &&
           cfg.geometry.dtype != kv_dtype::bf16)
    c.fail("compression", "offload_dtype",
           fmt::format("\"{}\": the real engine quantizes fp16 or bf16 blocks on offload, but the KV cache is {}; "
                       "set [model] dtype to fp16 or bf16, or offload_dtype to \"none\"",
                       name_of(*k.offload_dtype), name_of(cfg.geometry.dtype)));
}

void check_compute(const config& cfg, checker& c) {
  const auto& k = cfg.compute;
  c.number("compute", "temperature", k.temperature, b::temperature);
  if (k.kind != compute_kind::model)
    return;
  // The model reads and writes the pool's K/V as bf16, or as e4m3 float8.
  auto dtype = cfg.geometry.dtype;
  if (dtype != kv_dtype::fp16 && dtype != kv_dtype::bf16 && dtype != kv_dtype::fp8)
    c.fail("compute", "kind",
           fmt::format("\"model\" keeps K/V in bf16 or float8 (e4m3): expected [model] dtype fp16, bf16 or fp8, "
                       "got \"{}\"",
                       name_of(dtype)));
  // Compaction drops whole blocks the policy chose from the model's own
  // attention; the oracle scores by queries that have not come yet.
  if (cfg.compression.policy == compression_policy::oracle)
    c.fail("compression", "policy",
           "\"oracle\" scores tokens by future queries, which a served model does not have; expected h2o, snapkv, "
           "streaming_llm or another policy");
}

void check_sim(const config& cfg, checker& c) {
  const auto& s = cfg.sim;
  c.number("sim", "time_scale", s.time_scale, b::time_scale);
  c.integer("sim", "trace_block_tokens", s.trace_block_tokens, b::trace_block_tokens);
  if (s.trace_format == trace_format_choice::synthetic && !s.synthetic)
    c.fail("sim", "trace_format", "\"synthetic\" needs a [sim.synthetic] table");
  if (s.synthetic && !c.found)
    if (auto err = validate(*s.synthetic)) {
      // "synthetic input: ..." names the key first.
      auto text = describe(err);
      std::string_view rest = text;
      if (rest.starts_with("synthetic "))
        rest.remove_prefix(10);
      auto colon = rest.find(':');
      auto space = rest.find(' ');
      auto cut = std::min(colon, space);
      auto what = rest.substr(std::min(cut + 1, rest.size()));
      while (what.starts_with(' '))
        what.remove_prefix(1);
      c.fail("sim.synthetic", rest.substr(0, cut), std::string(what));
    }
}

} // namespace

void check_cluster(const config& cfg, checker& c) {
  const auto& k = cfg.cluster;
  c.integer("cluster", "replicas", k.replicas, b::cluster_replicas);
  c.integer("cluster", "prefill", k.prefill, b::cluster_pool);
  c.integer("cluster", "decode", k.decode, b::cluster_pool);
  c.integer("cluster", "threads", k.threads, b::cluster_threads);
  c.size("cluster", "remote_capacity", k.remote_capacity_bytes, b::tier_capacity);
  c.number("cluster", "remote_gbps", k.remote_gbps, b::link_gbps);
  c.number("cluster", "remote_latency_us", k.remote_latency_us, b::microseconds);
  if (c.found)
    return;
  if ((k.prefill == 0) != (k.decode == 0))
    c.fail("cluster", k.prefill == 0 ? "prefill" : "decode",
           fmt::format("expected prefill and decode both 0 (no pools) or both at least 1, got prefill = {}, "
                       "decode = {}",
                       k.prefill, k.decode));
  else if (k.prefill > 0 && k.prefill + k.decode != k.replicas)
    c.fail("cluster", "replicas",
           fmt::format("expected prefill + decode = replicas, got {} + {} and replicas = {}", k.prefill, k.decode,
                       k.replicas));
  else if (k.remote_capacity_bytes / std::max<uint64_t>(1, cfg.offload_block_bytes()) > b::max_total_blocks)
    c.fail("cluster", "remote_capacity",
           fmt::format("expected at most {} blocks of {} B, got {} B", b::max_total_blocks, cfg.offload_block_bytes(),
                       k.remote_capacity_bytes));
  else if (k.active() && cfg.backend != backend_kind::sim && (k.replicas > 1 || k.disaggregated()))
    c.fail("cluster", "replicas", "a cluster is simulated only: expected backend = \"sim\"");
  else if (k.remote_capacity_bytes > 0 && cfg.backend != backend_kind::sim && cfg.remote.kind == remote_kind::none)
    c.fail("cluster", "remote_capacity",
           "a real run reaches its remote tier through [remote]: expected [remote] kind = \"redis\", or no "
           "remote_capacity");
}

void check_remote(const config& cfg, checker& c) {
  const auto& m = cfg.remote;
  c.integer("remote", "port", m.port, b::tcp_port);
  c.integer("remote", "connect_timeout_ms", m.connect_timeout_ms, b::remote_timeout_ms);
  c.integer("remote", "command_timeout_ms", m.command_timeout_ms, b::remote_timeout_ms);
  if (c.found || m.kind == remote_kind::none)
    return;
  if (m.unix_socket.empty() && m.host.empty())
    c.fail("remote", "host", "expected a host name or address (or a unix_socket), got \"\"");
  else if (m.key_prefix.empty())
    c.fail("remote", "key_prefix", "expected a prefix that keeps kvtier's keys apart, got \"\"");
  else if (cfg.cluster.remote_capacity_bytes < cfg.offload_block_bytes())
    c.fail("cluster", "remote_capacity",
           fmt::format("[remote] kind = \"{}\" needs the tier's size: expected at least one block ({} B), got {} B",
                       name_of(m.kind), cfg.offload_block_bytes(), cfg.cluster.remote_capacity_bytes));
  else if (cfg.backend == backend_kind::real && cfg.nvme_blocks() > 0)
    c.fail("tiers.nvme", "enabled",
           "a real run's remote tier takes the NVMe tier's place below DRAM: expected enabled = false with "
           "[remote] kind = \"redis\"");
  else if (cfg.backend == backend_kind::real && cfg.dram_blocks() == 0)
    c.fail("tiers.dram", "enabled", "the remote tier is reached through DRAM: expected a DRAM tier");
}

std::optional<config_problem> find_problem(const config& cfg) {
  checker c;
  check_model(cfg, c);
  if (auto hw = find_hardware_problem(cfg.hardware))
    c.fail(hw->table.empty() ? "hardware" : "hardware." + hw->table, hw->key, hw->what);
  if (!c.found)
    check_tiers(cfg, c);
  check_policies(cfg, c);
  check_compute(cfg, c);
  check_sim(cfg, c);
  check_cluster(cfg, c);
  check_remote(cfg, c);
  return c.found;
}

caf::error validate(const config& cfg) {
  auto problem = find_problem(cfg);
  if (!problem)
    return {};
  std::string scope = problem->table.empty() ? "" : fmt::format("[{}] ", problem->table);
  return make_error(errc::invalid_config, fmt::format("{}: {}{}: {}", cfg.source, scope, problem->key, problem->what));
}

} // namespace kvtier
