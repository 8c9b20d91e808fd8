// `kvtier run` with the remote tier (L4) on Redis in the NVMe tier's place:
// the model's CPU twin decodes greedily through the whole actor graph while
// HBM and DRAM are so small that blocks are demoted to a redis-server of the
// test's own and promoted back (remote -> DRAM -> HBM). Bytes are checked end
// to end: every value carries an XXH3 checksum the store verifies, and every
// run must produce the same tokens and the same logits, bit for bit, as a run
// with every block in HBM. A server killed mid-run turns reads into counted
// misses, recomputed; a second process finds what the first one stored and
// computes no token of the shared prefix.

#include "real/real_system.hpp"
#include "runtime/error.hpp"
#include "runtime/prefix_chain.hpp"

#include "redis_test_server.hpp"
#include "tests/child_process.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <set>

using namespace kvtier;
using kvtier::redis_testing::redis_test_server;

namespace {

constexpr uint32_t block_tokens = 32; // 4 KiB blocks of the tiny-test model

config model_config(const std::string& hbm, uint16_t redis_port) {
  std::string text = R"(
backend = "real"
[model]
preset = "tiny-test"
[tiers.hbm]
capacity = ")" +
      hbm + R"("
[tiers.dram]
capacity = "48KiB"   # 12 blocks: most of what HBM gives up goes on to Redis
[tiers.nvme]
enabled = false      # the remote tier takes its place
[cluster]
remote_capacity = "4MiB"
[remote]
kind = "redis"
port = )" +
      std::to_string(redis_port) +
      R"(
[cache]
block_tokens = 32
demote_watermark = 0.5
[scheduler]
prefill_chunk = 48
[compute]
kind = "model"
weights_seed = 7
)";
  auto cfg = parse_config(text, "remote_run_test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  return cfg ? *cfg : config{};
}

// An all-in-HBM reference: the same model, no lower tier at all.
config reference_config() {
  auto cfg = model_config("4MiB", 6379);
  cfg.remote.kind = remote_kind::none;
  cfg.cluster.remote_capacity_bytes = 0;
  cfg.tiers.dram.enabled = false;
  EXPECT_FALSE(validate(cfg)) << describe(validate(cfg));
  return cfg;
}

std::vector<uint32_t> prompt_of(uint64_t id, uint32_t system, uint32_t system_tokens, uint32_t tail_tokens) {
  std::vector<uint32_t> p;
  for (uint32_t t = 0; t < system_tokens; ++t)
    p.push_back((system * 131 + t * 7 + 3) % 256);
  for (uint32_t t = 0; t < tail_tokens; ++t)
    p.push_back(static_cast<uint32_t>((id * 31 + t * 17 + 5) % 256));
  return p;
}

// Seven 96-token system prompts (3 blocks) in turn, each behind a private
// tail; `gap` seconds between arrivals.
std::vector<real_run_request> shared_prefix_requests(uint32_t n, uint32_t output_tokens, double gap,
                                                     uint64_t first_id = 1) {
  std::vector<real_run_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = first_id + i;
    s.prompt = prompt_of(s.id, i % 7, 96, 40 + 13 * (i % 4));
    s.prompt_tokens = s.prompt.size();
    s.output_tokens = output_tokens;
    out.push_back({gap * i, std::move(s)});
  }
  return out;
}

real_run_options cpu_run() {
  real_run_options o;
  o.backend.device = "cpu"; // the model's CPU twin reads the pool in host memory
  return o;
}

/// Checks `run` generated exactly the reference's tokens and logits.
void expect_same_output(const run_result& reference, const run_result& run, const std::string& what) {
  const auto& want = reference.metrics.scheduler.generated;
  const auto& got = run.metrics.scheduler.generated;
  EXPECT_EQ(got.size(), want.size()) << what;
  float worst = 0;
  for (const auto& [id, text] : want) {
    auto it = got.find(id);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": request " << id << " generated nothing";
      continue;
    }
    EXPECT_EQ(it->second.tokens, text.tokens) << what << ": request " << id;
    for (size_t i = 0; i < std::min(text.logits.size(), it->second.logits.size()); ++i)
      worst = std::max(worst, std::abs(text.logits[i] - it->second.logits[i]));
  }
  EXPECT_EQ(worst, 0.0f) << what << ": the largest logit difference from all-in-HBM";
}

const tier_metrics& remote_tier(const run_result& r) {
  return r.metrics.blocks.tiers[index_of(tier::nvme)]; // the lowest tier, Redis in this configuration
}

// Blocks written to the remote tier: demotions are counted on the tier they leave.
uint64_t remote_writes_landed(const run_result& r) {
  return r.metrics.blocks.tiers[index_of(tier::dram)].demotions;
}

struct remote_run : ::testing::Test {
  void SetUp() override {
    if (!redis_testing::redis_server_available())
      GTEST_SKIP() << redis_testing::redis_server
                   << " is not installed (Debian: redis-server): the remote tier's runs are not tested";
    server = std::make_unique<redis_test_server>();
    ASSERT_TRUE(server->ready()) << "redis-server did not answer on port " << server->port();
  }
  std::unique_ptr<redis_test_server> server;
};

} // namespace

// Blocks reach Redis and come back: the counts kvtier keeps agree exactly with
// the server's own, and the tokens with the all-in-HBM run.
TEST_F(remote_run, blocks_reach_redis_and_come_back_token_exact) {
  auto reference = run_real(reference_config(), shared_prefix_requests(28, 6, 0.002), cpu_run());
  ASSERT_TRUE(reference) << describe(reference.error());

  auto cfg = model_config("96KiB", server->port()); // 24 blocks
  auto result = run_real(cfg, shared_prefix_requests(28, 6, 0.002), cpu_run());
  ASSERT_TRUE(result) << describe(result.error());
  EXPECT_EQ(result->metrics.scheduler.requests_completed, 28u);
  expect_same_output(*reference, *result, "remote tier");

  const auto& b = result->metrics.blocks;
  const auto& remote = remote_tier(*result);
  const uint64_t B = cfg.geometry.bytes_per_block();
  EXPECT_TRUE(result->remote.used);
  EXPECT_EQ(result->remote.where, fmt::format("redis 127.0.0.1:{}", server->port()));
  EXPECT_EQ(remote.capacity_blocks, 4u * 1024 * 1024 / B);
  // Writes: every demotion into the tier is one SET the server ran, and landed.
  const uint64_t written = remote_writes_landed(*result);
  EXPECT_GT(written, 0u);
  EXPECT_EQ(result->nvme_write.operations, server->calls("set"));
  EXPECT_EQ(result->nvme_write.bytes, written * B);
  EXPECT_EQ(result->nvme_write.operations, written);
  EXPECT_LE(server->keys(), written); // a block demoted twice is one key
  // Reads: every GET the server ran brought a block back, verified.
  EXPECT_GT(remote.prefix_hit_blocks, 0u) << "no prefix was served from Redis";
  EXPECT_EQ(result->nvme_read.operations, server->calls("get"));
  EXPECT_EQ(result->nvme_read.operations, remote.promotions);
  EXPECT_EQ(result->nvme_read.bytes, remote.promotions * B);
  EXPECT_EQ(result->remote.missing_reads + result->remote.corrupted_reads + result->remote.failed_reads, 0u);
  EXPECT_EQ(result->remote.failed_writes, 0u);
  EXPECT_EQ(b.corrupted_reads, 0u);
  EXPECT_EQ(b.failed_transfers, 0u);
  EXPECT_EQ(b.reads_while_moving, 0u);
}

// The server dies while the run goes on: reads and writes fail, every failure
// is counted, the blocks are recomputed, every request completes and no
// request generates a token the all-in-HBM run did not.
TEST_F(remote_run, a_killed_server_is_a_counted_miss) {
  // Two waves over the same system prompts; the server is killed between them.
  auto requests = shared_prefix_requests(14, 4, 0.002);
  for (auto& r : shared_prefix_requests(14, 4, 0.002, 101))
    requests.push_back({r.arrival_s + 1.5, std::move(r.spec)}); // room for a slow (sanitized) first wave
  auto copy = requests;
  auto at_once = cpu_run();
  at_once.arrival_time_scale = 0; // the tokens do not depend on when requests arrive
  auto reference = run_real(reference_config(), std::move(copy), at_once);
  ASSERT_TRUE(reference) << describe(reference.error());

  auto cfg = model_config("96KiB", server->port());
  auto o = cpu_run();
  o.progress_every_s = 0.005;
  bool killed = false;
  uint64_t sets_before_kill = 0;
  o.progress = [&](double, uint64_t settled, uint64_t) {
    if (!killed && settled >= 14) { // the first wave is done, the second not yet arrived
      server->pause_writes();       // no SET lands between the count and the kill
      sets_before_kill = server->calls("set");
      server->stop();
      killed = true;
    }
  };
  auto result = run_real(cfg, std::move(requests), o);
  ASSERT_TRUE(result) << describe(result.error());
  ASSERT_TRUE(killed) << "the first wave did not settle before the second arrived";
  EXPECT_EQ(result->metrics.scheduler.requests_completed, 28u);
  expect_same_output(*reference, *result, "server killed mid-run");

  const auto& b = result->metrics.blocks;
  const auto& f = result->remote;
  EXPECT_GT(sets_before_kill, 0u) << "nothing reached Redis before the kill";
  EXPECT_GT(f.failed_reads, 0u) << "the second wave read nothing from the dead server";
  EXPECT_EQ(f.missing_reads + f.corrupted_reads, 0u);
  // Each failed page failed its move: the block manager counted it and recomputed it.
  EXPECT_GE(b.corrupted_reads, f.failed_reads);
  EXPECT_GT(b.failed_transfers, 0u);
  // Only blocks the server took before it died count as written (a batch with
  // a failed page fails whole: its other pages moved bytes but did not land).
  EXPECT_LE(remote_writes_landed(*result) * cfg.geometry.bytes_per_block(), result->nvme_write.bytes);
  EXPECT_LE(remote_writes_landed(*result), sets_before_kill);
  EXPECT_GT(f.failed_writes, 0u);
  EXPECT_EQ(b.reads_while_moving, 0u);
}

// The disaggregated case: one process prefills (one output token per request),
// a second process against the same server decodes a request whose system
// prompt the first one left in Redis. The second finds the stored blocks at
// start, serves the prefix from Redis and computes only the private tail.
TEST_F(remote_run, a_second_process_serves_the_first_ones_prefixes) {
  auto cfg = model_config("96KiB", server->port());
  pid_t prefill = kvtier::testing::fork_child();
  ASSERT_GE(prefill, 0);
  if (prefill == 0) { // the prefill node
    auto first = run_real(cfg, shared_prefix_requests(28, 1, 0.002), cpu_run());
    _exit(first && first->metrics.scheduler.requests_completed == 28 && first->nvme_write.bytes > 0 ? 0 : 1);
  }
  ASSERT_EQ(kvtier::testing::wait_child(prefill, "the prefill process"), 0) << "the prefill process failed";

  // What the server holds now: the system prompt with the most leading blocks stored.
  std::set<block_hash> stored;
  {
    auto backend = real_backend::open(cfg, cpu_run().backend);
    ASSERT_TRUE(backend) << describe(backend.error());
    for (const auto& blk : (*backend)->pages()->recovered_blocks())
      stored.insert(blk.hash);
  }
  ASSERT_EQ(stored.size(), server->keys());
  uint32_t best = 0, leading_best = 0;
  for (uint32_t k = 0; k < 7; ++k) {
    auto chain = chain_from_tokens(prompt_of(900, k, 96, 40), block_tokens, tenant_salt{0});
    uint32_t leading = 0;
    while (leading < chain.size() && stored.count(chain[leading]))
      ++leading;
    if (leading > leading_best)
      best = k, leading_best = leading;
  }
  ASSERT_EQ(leading_best, 3u) << "no system prompt reached Redis whole";

  request_spec s;
  s.id = 900;
  s.prompt = prompt_of(s.id, best, 96, 40);
  s.prompt_tokens = s.prompt.size();
  s.output_tokens = 8;
  std::vector<real_run_request> one{{0.0, s}};
  auto reference = run_real(reference_config(), one, cpu_run());
  ASSERT_TRUE(reference) << describe(reference.error());
  auto decode = run_real(cfg, one, cpu_run()); // this process: the decode node
  ASSERT_TRUE(decode) << describe(decode.error());
  expect_same_output(*reference, *decode, "decode node");

  const auto& b = decode->metrics.blocks;
  const auto& sched = decode->metrics.scheduler;
  EXPECT_EQ(b.nvme_recovered_blocks, stored.size()); // every stored block found at start
  EXPECT_EQ(b.tiers[index_of(tier::hbm)].prefix_hit_blocks, 0u);
  EXPECT_EQ(b.tiers[index_of(tier::dram)].prefix_hit_blocks, 0u);
  EXPECT_EQ(remote_tier(*decode).prefix_hit_blocks, 3u);
  EXPECT_EQ(decode->nvme_read.bytes, 3 * cfg.geometry.bytes_per_block());
  EXPECT_EQ(sched.prefill_tokens, 40u); // the 96-token shared prefix: not one token recomputed
  EXPECT_EQ(reference->metrics.scheduler.prefill_tokens, 136u);
  EXPECT_EQ(sched.recomputed_tokens, 0u);
  EXPECT_EQ(b.corrupted_reads, 0u);
}
