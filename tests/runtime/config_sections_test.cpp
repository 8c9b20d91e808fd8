// The config is read once into typed sections: every table of the file,
// [tiers.nvme]'s engine settings and [sim.synthetic] included, with choices
// as enums and errors located at file:line:column.

#include "runtime/config.hpp"
#include "runtime/config_names.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

namespace {
std::string error_of(std::string_view text) {
  auto cfg = parse_config(text, "exp.toml");
  EXPECT_FALSE(cfg) << "expected an error for:\n" << text;
  return cfg ? std::string{} : describe(cfg.error());
}
} // namespace

TEST(config_sections, nvme_engine_settings_come_from_the_text_not_a_file) {
  // Parsed from memory: no file on disk to read them from again.
  auto cfg = parse_config(R"(
[tiers.nvme]
capacity = "1TB"
path = "/mnt/nvme0"
engine = "threads"
queue_depth = 64
sqpoll = true
direct_io = false
register_buffers = false
large_block = "1MiB"
write_retries = 5
read_retries = 0
io_timeout_ms = 1000
on_open = "reformat"
)",
                          "in-memory");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  const auto& io = cfg->tiers.nvme_io;
  EXPECT_EQ(io.engine, nvme_engine::threads);
  EXPECT_EQ(io.queue_depth, 64u);
  EXPECT_TRUE(io.sqpoll);
  EXPECT_FALSE(io.direct_io);
  EXPECT_FALSE(io.register_buffers);
  EXPECT_EQ(io.large_block_bytes, 1u << 20);
  EXPECT_EQ(io.write_retries, 5u);
  EXPECT_EQ(io.read_retries, 0u);
  EXPECT_EQ(io.io_timeout_ms, 1000u);
  EXPECT_EQ(io.on_open, nvme_open_policy::reformat);
  EXPECT_EQ(cfg->tiers.nvme_path, "/mnt/nvme0");
  auto defaults = parse_config("", "empty.toml");
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->tiers.nvme_io.engine, nvme_engine::automatic);
  EXPECT_EQ(defaults->tiers.nvme_io.queue_depth, 32u);
  EXPECT_EQ(defaults->tiers.nvme_io.on_open, nvme_open_policy::reuse);
}

TEST(config_sections, nvme_engine_settings_are_checked_by_parse_config) {
  EXPECT_EQ(error_of("[tiers.nvme]\nengine = \"aio\"\n"),
            "exp.toml:2:10: [tiers.nvme] engine: expected one of auto, io_uring, threads, got \"aio\" (did you mean "
            "\"auto\"?)");
  EXPECT_EQ(error_of("[tiers.nvme]\nqueue_depth = \"many\"\n"),
            "exp.toml:2:15: [tiers.nvme] queue_depth: expected an integer in 1..4096, got the string \"many\"");
  EXPECT_EQ(error_of("[tiers.nvme]\nio_timeout_ms = 0\n"),
            "exp.toml:2:17: [tiers.nvme] io_timeout_ms: expected an integer in 1..3600000, got 0");
  EXPECT_EQ(error_of("[tiers.nvme]\non_open = \"wipe\"\n"),
            "exp.toml:2:11: [tiers.nvme] on_open: expected one of reuse, reformat, got \"wipe\"");
  EXPECT_EQ(error_of("[tiers.nvme]\nenigne = \"threads\"\n"),
            "exp.toml:2:10: [tiers.nvme] unknown key 'enigne' (did you mean 'engine'?); known keys: enabled, "
            "capacity, path, engine, queue_depth, sqpoll, direct_io, register_buffers, large_block, write_retries, "
            "read_retries, io_timeout_ms, on_open");
}

TEST(config_sections, choices_become_enums) {
  auto cfg = parse_config(R"(
backend = "sim"
[cache]
policy = "oracle"
[scheduler]
preemption = "recompute"
[compression]
policy = "snapkv"
keep_ratio = 0.5
offload_dtype = "int4"
[sim]
trace_format = "azure"
[copy]
kernels = "never"
[model]
weights_dtype = "fp8"
)",
                          "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->backend, backend_kind::sim);
  EXPECT_EQ(cfg->cache.policy, eviction_policy::oracle);
  EXPECT_EQ(cfg->scheduler.preemption, preemption_mode::recompute);
  EXPECT_EQ(cfg->compression.policy, compression_policy::snapkv);
  EXPECT_EQ(cfg->compression.offload_dtype, kv_dtype::int4);
  EXPECT_EQ(cfg->sim.trace_format, trace_format_choice::azure);
  EXPECT_EQ(cfg->copy.kernels, copy_kernel_use::never);
  EXPECT_EQ(cfg->weights_dtype, kv_dtype::fp8);
  EXPECT_EQ(name_of(cfg->compression.policy), "snapkv");
  EXPECT_EQ(offload_dtype_name(cfg->compression.offload_dtype), "int4");
  EXPECT_EQ(offload_dtype_name(std::nullopt), "none");
  EXPECT_EQ(parse_choice<preemption_mode>("auto"), preemption_mode::automatic);
  EXPECT_EQ(parse_choice<preemption_mode>("sometimes"), std::nullopt);
}

TEST(config_sections, synthetic_table_is_read_with_the_config) {
  auto cfg = parse_config(R"(
[sim]
trace_format = "synthetic"
[sim.synthetic]
requests = 40
rate_per_s = 2.5
input = { dist = "uniform", min = 10, max = 20 }
output = 7
)",
                          "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  ASSERT_TRUE(cfg->sim.synthetic);
  EXPECT_EQ(cfg->sim.synthetic->requests, 40u);
  EXPECT_DOUBLE_EQ(cfg->sim.synthetic->rate_per_s, 2.5);
  EXPECT_EQ(cfg->sim.synthetic->input.dist, length_distribution::shape::uniform);
  EXPECT_EQ(cfg->sim.synthetic->input.max, 20u);
  EXPECT_EQ(cfg->sim.synthetic->output.value, 7u);
  EXPECT_FALSE(parse_config("", "exp.toml")->sim.synthetic);
  EXPECT_EQ(error_of("[sim]\ntrace_format = \"synthetic\"\n"),
            "exp.toml:2:16: [sim] trace_format: \"synthetic\" needs a [sim.synthetic] table");
}

TEST(config_sections, cache_policy_and_hierarchy) {
  auto cfg = parse_config("[cache]\npolicy = \"predictor\"\nhierarchy = \"exclusive\"\n", "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->cache.policy, eviction_policy::predictor);
  EXPECT_EQ(cfg->cache.hierarchy, cache_hierarchy::exclusive);
  EXPECT_EQ(parse_config("", "exp.toml")->cache.hierarchy, cache_hierarchy::inclusive);
  auto bad = parse_config("[cache]\nhierarchy = \"both\"\n", "exp.toml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(describe(bad.error()),
            "exp.toml:2:13: [cache] hierarchy: expected one of inclusive, exclusive, got \"both\"");
  auto bad_policy = parse_config("[cache]\npolicy = \"mru\"\n", "exp.toml");
  ASSERT_FALSE(bad_policy);
  EXPECT_EQ(describe(bad_policy.error()),
            "exp.toml:2:10: [cache] policy: expected one of lru, oracle, arc, s3fifo, lfuda, predictor, got \"mru\" "
            "(did you mean \"lru\"?)");
}

// [remote] says where a real run's remote tier is; its size is [cluster]
// remote_capacity, the name the simulation models it by. Mistakes are located.
TEST(config_sections, remote_table_points_a_real_run_at_redis) {
  auto cfg = parse_config(R"(
backend = "real"
[tiers.hbm]
capacity = "1GB"
[tiers.dram]
capacity = "1GB"
[tiers.nvme]
enabled = false
[cluster]
remote_capacity = "4GB"
[remote]
kind = "redis"
host = "10.0.0.7"
port = 6380
command_timeout_ms = 500
key_prefix = "node1:"
)",
                          "in-memory");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->remote.kind, remote_kind::redis);
  EXPECT_EQ(cfg->remote.host, "10.0.0.7");
  EXPECT_EQ(cfg->remote.port, 6380u);
  EXPECT_EQ(cfg->remote.command_timeout_ms, 500u);
  EXPECT_EQ(cfg->remote.connect_timeout_ms, 2000u);
  EXPECT_EQ(cfg->remote.key_prefix, "node1:");
  EXPECT_EQ(cfg->nvme_blocks(), 0u);
  EXPECT_EQ(cfg->remote_blocks(), 4'000'000'000u / cfg->offload_block_bytes());
  EXPECT_EQ(cfg->lowest_tier_blocks(), cfg->remote_blocks());
  // The same file simulated: the tier is the cluster's, not a slot tier of the node.
  auto sim = *cfg;
  sim.backend = backend_kind::sim;
  EXPECT_EQ(sim.remote_blocks(), 0u);

  const std::string real = "backend = \"real\"\n[tiers.hbm]\ncapacity = \"1GB\"\n[tiers.dram]\ncapacity = \"1GB\"\n";
  EXPECT_EQ(error_of(real +
                     "[tiers.nvme]\nenabled = false\n[cluster]\nremote_capacity = \"4GB\"\n[remote]\nkind = "
                     "\"memcached\"\n"),
            "exp.toml:11:8: [remote] kind: expected one of none, redis, got \"memcached\"");
  EXPECT_EQ(error_of(real +
                     "[tiers.nvme]\nenabled = false\n[cluster]\nremote_capacity = \"4GB\"\n[remote]\nkind = "
                     "\"redis\"\nport = 70000\n"),
            "exp.toml:12:8: [remote] port: expected an integer in 1..65535, got 70000");
  EXPECT_EQ(error_of(real + "[tiers.nvme]\nenabled = false\n[remote]\nkind = \"redis\"\n"),
            "exp.toml: [cluster] remote_capacity: [remote] kind = \"redis\" needs the tier's size: expected at least "
            "one block (2097152 B), got 0 B");
  EXPECT_EQ(error_of(real +
                     "[tiers.nvme]\ncapacity = \"1GB\"\n[cluster]\nremote_capacity = \"4GB\"\n[remote]\nkind = "
                     "\"redis\"\n"),
            "exp.toml:6:1: [tiers.nvme] enabled: a real run's remote tier takes the NVMe tier's place below DRAM: "
            "expected enabled = false with [remote] kind = \"redis\"");
  EXPECT_EQ(error_of(real + "[tiers.nvme]\nenabled = false\n[cluster]\nremote_capacity = \"4GB\"\n"),
            "exp.toml:9:19: [cluster] remote_capacity: a real run reaches its remote tier through [remote]: "
            "expected [remote] kind = \"redis\", or no remote_capacity");
}

TEST(config_sections, cache_slot_placement) {
  EXPECT_EQ(parse_config("", "exp.toml")->cache.slot_placement, slot_placement_kind::contiguous);
  auto cfg = parse_config("[cache]\nslot_placement = \"eviction_order\"\n", "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->cache.slot_placement, slot_placement_kind::eviction_order);
  auto bad = parse_config("[cache]\nslot_placement = \"best_fit\"\n", "exp.toml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(describe(bad.error()),
            "exp.toml:2:18: [cache] slot_placement: expected one of contiguous, eviction_order, got \"best_fit\"");
}
