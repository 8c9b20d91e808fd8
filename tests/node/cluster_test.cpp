// kvtierd's cluster roles end to end: prefill and decode nodes and a router
// as separate kvtierd processes on loopback, a redis-server of the test's
// own as the shared remote store, requests submitted through the router.
// Every answer's KV checksum is checked against the bytes the stand-in
// compute gives for the prompt, computed here independently.

#include "node/cluster_client.hpp"
#include "node/standin_compute.hpp"
#include "runtime/error.hpp"
#include "../remote/redis_test_server.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <thread>

using namespace kvtier;
using namespace kvtier::node;
using namespace std::chrono_literals;

namespace {

using redis_testing::free_port;
using redis_testing::redis_server_available;
using redis_testing::redis_test_server;

constexpr uint32_t block_tokens = 16;
constexpr uint64_t block_bytes = 16 * 1024;

// The KV checksum a node must report for `prompt`: XXH3-64 over the
// blocks' XXH3-64s, the bytes made by the stand-in compute.
uint64_t expected_kv(const std::vector<uint32_t>& prompt, uint64_t salt) {
  std::vector<uint64_t> per_block;
  std::vector<std::byte> bytes(block_bytes);
  for (const auto& h : chain(prompt, block_tokens, salt)) {
    fill_block(bytes, h);
    per_block.push_back(XXH3_64bits(bytes.data(), bytes.size()));
  }
  return XXH3_64bits(per_block.data(), per_block.size() * sizeof(uint64_t));
}

uint64_t expected_output(uint64_t kv, uint32_t decode_tokens) {
  uint64_t token = kv;
  for (uint32_t step = 0; step < decode_tokens; ++step)
    token = next_token(token, step);
  return token;
}

std::vector<uint32_t> prompt_of(uint32_t tokens, uint32_t seed) {
  std::vector<uint32_t> p(tokens);
  for (uint32_t i = 0; i < tokens; ++i)
    p[i] = (seed * 7919 + i * 31) % 128'000;
  return p;
}

// The processes of one test: a redis-server, kvtierd nodes, the router;
// every one killed at the end.
class cluster_nodes : public ::testing::Test {
protected:
  void SetUp() override {
    if (!redis_server_available())
      GTEST_SKIP() << redis_testing::redis_server
                   << " is not installed (Debian: redis-server): the cluster is not tested";
    redis_ = std::make_unique<redis_test_server>();
    ASSERT_TRUE(redis_->ready());
    char tmpl[] = "/tmp/kvtier-cluster-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    // The client's actor system shuts down while its connections are alive:
    // killed peers first left CAF's broker torn down mid-disconnect, which
    // LeakSanitizer reported now and then as CAF objects never freed.
    router_.reset();
    for (auto& [name, pid] : pids_)
      kill_node(name);
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
  }

  // Starts a node: `role` "prefill" | "decode" | "both".
  void start_node(const std::string& name, const std::string& role, uint64_t decode_step_us = 1000) {
    ports_[name] = free_port();
    roles_[name] = role;
    write_and_spawn(name,
                    "[node]\nrole = \"" + role + "\"\nname = \"" + name + "\"\nlisten = \"127.0.0.1:" +
                        std::to_string(ports_[name]) + "\"\nredis = \"127.0.0.1:" + std::to_string(redis_->port()) +
                        "\"\nblock_tokens = " + std::to_string(block_tokens) +
                        "\nblock_bytes = " + std::to_string(block_bytes) +
                        "\ndram_blocks = 256\ndecode_step_us = " + std::to_string(decode_step_us) + "\n");
  }
  // A member the router knows that is never started.
  void configure_absent(const std::string& name, const std::string& role) {
    ports_[name] = free_port();
    roles_[name] = role;
  }
  // Starts the router over every node configured so far and waits until
  // `live` of them are connected.
  void start_router(size_t live) {
    std::string text = "[node]\nrole = \"router\"\nname = \"router\"\nlisten = \"127.0.0.1:" +
        std::to_string(router_port_ = free_port()) + "\"\n";
    for (auto& [name, port] : ports_)
      text += "[[member]]\nname = \"" + name + "\"\nrole = \"" + roles_[name] +
          "\"\naddress = \"127.0.0.1:" + std::to_string(port) + "\"\n";
    write_and_spawn("router", text);
    auto c = cluster_client::connect("127.0.0.1", router_port_, 10s);
    ASSERT_TRUE(c) << describe(c.error());
    router_ = std::move(*c);
    for (int i = 0; i < 1000; ++i) {
      auto names = router_->live();
      ASSERT_TRUE(names) << describe(names.error());
      if (names->size() == live)
        return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "the router did not see " << live << " live nodes";
  }
  node_stats stats_of(const std::string& name) {
    auto c = cluster_client::connect("127.0.0.1", ports_.at(name), 5s);
    EXPECT_TRUE(c);
    auto s = (*c)->stats();
    EXPECT_TRUE(s) << describe(s.error());
    return s ? *s : node_stats{};
  }
  /// `phase`, once the router's phase of request `id` begins with it
  /// ("decoding on b" also matches "decoding on b (16 tokens checkpointed)");
  /// else the last answer after ten seconds.
  std::string wait_for_phase(uint64_t id, const std::string& phase) {
    std::string now;
    for (int i = 0; i < 2000; ++i) {
      auto w = router_->where(id);
      EXPECT_TRUE(w) << describe(w.error());
      if (!w)
        return {};
      now = *w;
      if (now.starts_with(phase))
        return phase;
      std::this_thread::sleep_for(5ms);
    }
    return now;
  }
  void stop_node(const std::string& name) { kill(pids_.at(name), SIGSTOP); }
  void kill_node(const std::string& name) {
    auto it = pids_.find(name);
    if (it == pids_.end() || it->second == 0)
      return;
    kill(it->second, SIGKILL);
    waitpid(it->second, nullptr, 0);
    it->second = 0;
  }

  std::unique_ptr<redis_test_server> redis_;
  std::unique_ptr<cluster_client> router_;
  std::string dir_;

private:
  void write_and_spawn(const std::string& name, const std::string& text) {
    auto config = dir_ + "/" + name + ".toml", log = dir_ + "/" + name + ".log";
    std::ofstream(config) << text;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> args{KVTIERD_BINARY, config};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, KVTIERD_BINARY, &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    pids_[name] = pid;
  }

  std::map<std::string, uint16_t> ports_;
  std::map<std::string, std::string> roles_;
  std::map<std::string, pid_t> pids_;
  uint16_t router_port_ = 0;
};

TEST_F(cluster_nodes, prefill_on_a_decodes_on_b_with_exact_counters_and_identical_bytes) {
  start_node("a", "prefill");
  start_node("b", "decode");
  start_router(2);
  // 100 tokens: six full blocks of 16 and a partial tail of 4.
  request r{1, 77, prompt_of(100, 1), 8};
  auto res = router_->submit(r);
  ASSERT_TRUE(res) << describe(res.error());
  const uint64_t kv = expected_kv(r.prompt, r.salt);
  EXPECT_EQ(res->prefill.node, "a");
  EXPECT_EQ(res->prefill.blocks, 7u);
  EXPECT_EQ(res->prefill.tokens_computed, 100u);
  EXPECT_EQ(res->prefill.kv_checksum, kv);
  EXPECT_EQ(res->decode.node, "b");
  EXPECT_EQ(res->decode_attempts, 1u);
  EXPECT_EQ(res->decode.blocks_pulled, 7u);
  EXPECT_EQ(res->decode.blocks_local, 0u);
  EXPECT_EQ(res->decode.tokens_recomputed, 0u);
  EXPECT_EQ(res->decode.kv_checksum, kv);
  EXPECT_EQ(res->decode.output_checksum, expected_output(kv, 8));
  EXPECT_LE(res->prefill.end_ns, res->decode.decode_start_ns);
  EXPECT_EQ(redis_->keys(), 7u);

  // The same prompt again: both nodes hold its blocks, nothing is computed or pulled.
  request again{2, 77, r.prompt, 8};
  auto res2 = router_->submit(again);
  ASSERT_TRUE(res2) << describe(res2.error());
  EXPECT_EQ(res2->prefill.tokens_computed, 0u);
  EXPECT_EQ(res2->decode.blocks_local, 7u);
  EXPECT_EQ(res2->decode.blocks_pulled, 0u);
  EXPECT_EQ(res2->decode.kv_checksum, kv);

  // A prompt that shares the first 64 tokens: only its new blocks are computed and pulled.
  auto shared = r.prompt;
  shared.resize(64);
  for (uint32_t i = 0; i < 40; ++i)
    shared.push_back(100'000 + i);
  request branch{3, 77, shared, 4};
  auto res3 = router_->submit(branch);
  ASSERT_TRUE(res3) << describe(res3.error());
  EXPECT_EQ(res3->prefill.tokens_computed, 40u);
  EXPECT_EQ(res3->decode.blocks_local, 4u);
  EXPECT_EQ(res3->decode.blocks_pulled, 3u);
  EXPECT_EQ(res3->decode.kv_checksum, expected_kv(shared, 77));

  auto a = stats_of("a"), b = stats_of("b");
  EXPECT_EQ(a.prefill_tokens_computed, 140u);
  EXPECT_EQ(a.blocks_written, 10u);
  EXPECT_EQ(b.prefill_tokens_computed, 0u);
  EXPECT_EQ(b.tokens_recomputed, 0u);
  EXPECT_EQ(b.blocks_pulled, 10u);
  EXPECT_EQ(b.blocks_local, 11u);
  EXPECT_EQ(b.decode_tokens, 20u);
  EXPECT_EQ(b.remote_misses, 0u);
}

TEST_F(cluster_nodes, a_node_of_both_roles_decodes_from_its_own_tier) {
  start_node("ab", "both");
  start_router(1);
  request r{4, 3, prompt_of(64, 4), 2};
  auto res = router_->submit(r);
  ASSERT_TRUE(res) << describe(res.error());
  EXPECT_EQ(res->prefill.node, "ab");
  EXPECT_EQ(res->decode.node, "ab");
  EXPECT_EQ(res->prefill.tokens_computed, 64u);
  EXPECT_EQ(res->decode.blocks_local, 4u);
  EXPECT_EQ(res->decode.blocks_pulled, 0u);
  EXPECT_EQ(res->decode.kv_checksum, expected_kv(r.prompt, r.salt));
  EXPECT_EQ(redis_->keys(), 4u); // written all the same, for any other node
}

TEST_F(cluster_nodes, killing_the_decode_node_mid_request_completes_on_another) {
  start_node("a", "prefill");
  start_node("b", "decode", 25'000); // 40 steps of 25 ms: a second of decoding to be killed in
  start_node("c", "decode", 1'000);
  start_router(3);
  request r{5, 9, prompt_of(96, 5), 40};
  auto pending = std::async(std::launch::async, [&] { return router_->submit(r); });
  // The router sends the first decode to b (fewest in flight, first in its list).
  ASSERT_EQ(wait_for_phase(r.id, "decoding on b"), "decoding on b");
  kill_node("b");
  auto res = pending.get();
  ASSERT_TRUE(res) << describe(res.error());
  const uint64_t kv = expected_kv(r.prompt, r.salt);
  EXPECT_EQ(res->prefill.node, "a");
  EXPECT_EQ(res->prefill.kv_checksum, kv);
  EXPECT_EQ(res->decode.node, "c");
  EXPECT_EQ(res->decode_attempts, 2u);
  EXPECT_EQ(res->decode.tokens_recomputed, 0u);
  EXPECT_EQ(res->decode.blocks_pulled, 6u);
  EXPECT_EQ(res->decode.kv_checksum, kv);
  EXPECT_EQ(res->decode.output_checksum, expected_output(kv, 40));
  auto c = stats_of("c");
  EXPECT_EQ(c.tokens_recomputed, 0u);
  EXPECT_EQ(c.prefill_tokens_computed, 0u);
  EXPECT_EQ(c.blocks_pulled, 6u);

  // b is dead: the next request goes to c at its first attempt.
  auto next = router_->submit(request{6, 9, prompt_of(32, 6), 2});
  ASSERT_TRUE(next) << describe(next.error());
  EXPECT_EQ(next->decode.node, "c");
  EXPECT_EQ(next->decode_attempts, 1u);
  auto live = router_->live();
  ASSERT_TRUE(live);
  EXPECT_EQ(*live, (std::vector<std::string>{"a", "c"}));
}

TEST_F(cluster_nodes, a_decode_moved_mid_request_resumes_after_its_checkpointed_tokens) {
  start_node("a", "prefill");
  start_node("b", "decode", 25'000);
  start_node("c", "decode", 1'000);
  start_router(3);
  // 96 tokens: six whole blocks, so every 16 decoded tokens fill a block,
  // which b writes to the store and reports to the router.
  request r{8, 4, prompt_of(96, 8), 48};
  auto pending = std::async(std::launch::async, [&] { return router_->submit(r); });
  const std::string checkpointed = "decoding on b (32 tokens checkpointed)";
  ASSERT_EQ(wait_for_phase(r.id, checkpointed), checkpointed);
  kill_node("b");
  auto res = pending.get();
  ASSERT_TRUE(res) << describe(res.error());

  const uint64_t kv = expected_kv(r.prompt, r.salt);
  std::vector<uint32_t> sequence = r.prompt; // the prompt and the 32 tokens b decoded
  uint64_t token = kv;
  for (uint32_t step = 0; step < 32; ++step) {
    token = next_token(token, step);
    sequence.push_back(static_cast<uint32_t>(token));
  }
  EXPECT_EQ(res->decode.node, "c");
  EXPECT_EQ(res->decode_attempts, 2u);
  EXPECT_EQ(res->decode.tokens_resumed, 32u);
  EXPECT_EQ(res->decode.blocks_pulled, 8u); // the prompt's 6 and the 2 of decoded tokens
  EXPECT_EQ(res->decode.blocks_local, 0u);
  EXPECT_EQ(res->decode.tokens_recomputed, 0u);
  EXPECT_EQ(res->decode.blocks_checkpointed, 0u); // c's first whole block is the last token's
  EXPECT_EQ(res->decode.kv_checksum, expected_kv(sequence, r.salt));
  EXPECT_EQ(res->decode.output_checksum, expected_output(kv, 48)); // as if it had never moved
  auto c = stats_of("c");
  EXPECT_EQ(c.prefill_tokens_computed, 0u);
  EXPECT_EQ(c.tokens_recomputed, 0u);
  EXPECT_EQ(c.decode_tokens, 16u);
  EXPECT_EQ(c.tokens_resumed, 32u);
  EXPECT_EQ(c.blocks_pulled, 8u);
  EXPECT_EQ(redis_->keys(), 8u);
}

TEST_F(cluster_nodes, a_hung_decode_node_is_dropped_and_its_request_completes_on_another) {
  start_node("a", "prefill");
  start_node("b", "decode", 25'000);
  start_node("c", "decode", 1'000);
  start_router(3);
  request r{7, 2, prompt_of(48, 7), 40};
  auto pending = std::async(std::launch::async, [&] { return router_->submit(r); });
  ASSERT_EQ(wait_for_phase(r.id, "decoding on b"), "decoding on b");
  // Alive but silent: no heartbeats, no answer. The router drops it after
  // connection_timeout_ms (the default second: long enough that a node starved
  // of CPU on a loaded machine is not dropped by mistake).
  stop_node("b");
  auto res = pending.get();
  ASSERT_TRUE(res) << describe(res.error());
  EXPECT_EQ(res->decode.node, "c");
  EXPECT_EQ(res->decode_attempts, 2u);
  EXPECT_EQ(res->decode.tokens_recomputed, 0u);
  EXPECT_EQ(res->decode.blocks_pulled, 3u);
  EXPECT_EQ(res->decode.kv_checksum, expected_kv(r.prompt, r.salt));
  auto live = router_->live();
  ASSERT_TRUE(live);
  EXPECT_EQ(*live, (std::vector<std::string>{"a", "c"}));
}

TEST_F(cluster_nodes, router_refuses_a_request_when_no_decode_node_lives) {
  start_node("a", "prefill");
  configure_absent("b", "decode");
  start_router(1);
  auto res = router_->submit(request{1, 1, prompt_of(32, 1), 1});
  ASSERT_FALSE(res);
  EXPECT_EQ(describe(res.error()), "router: no live decode node, request 1 refused (decode nodes: b (down))");
  EXPECT_EQ(stats_of("a").prefill_tokens_computed, 0u); // refused before any prefill
}

} // namespace
