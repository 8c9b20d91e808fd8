// Token-exactness of the model behind the seam: greedy decoding through the
// whole actor graph on the CPU twin, with every block in HBM, and again with
// HBM so small that blocks are demoted to DRAM and NVMe and promoted back,
// with prefix hits from DRAM and NVMe (and from an NVMe tier a restart
// kept), and with preemption by swap and by recompute. Every run must give
// the same tokens, and the same logits bit for bit (the CPU twin's
// arithmetic does not depend on where a block was): the largest logit
// difference is printed and must be 0.

#include "real/real_system.hpp"
#include "run/report.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

using namespace kvtier;

namespace {

config model_config(const std::string& dir, const std::string& hbm, const std::string& preemption = "auto",
                    const std::string& extra = "") {
  auto cfg = parse_config(R"(
backend = "real"
[model]
preset = "tiny-test"
[tiers.hbm]
capacity = ")" + hbm + R"("
[tiers.dram]
capacity = "192KiB"
[tiers.nvme]
capacity = "1MiB"
engine = "threads"
[cache]
block_tokens = 32   # 4 KiB blocks: the smallest O_DIRECT unit
demote_watermark = 0.5
[scheduler]
prefill_chunk = 48  # prompts take several chunks
preemption = ")" + preemption +
                              R"("
[compute]
kind = "model"
weights_seed = 7
)" + extra,
                          "model_run_test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  cfg->tiers.nvme_path = dir;
  return *cfg;
}

std::vector<uint32_t> prompt_of(uint64_t id, uint32_t system, uint32_t system_tokens, uint32_t tail_tokens) {
  std::vector<uint32_t> p;
  for (uint32_t t = 0; t < system_tokens; ++t)
    p.push_back((system * 131 + t * 7 + 3) % 256);
  for (uint32_t t = 0; t < tail_tokens; ++t)
    p.push_back(static_cast<uint32_t>((id * 31 + t * 17 + 5) % 256));
  return p;
}

// Seven 96-token system prompts (3 blocks) in turn, each behind a private tail.
std::vector<real_run_request> shared_prefix_requests(uint32_t n, uint32_t output_tokens) {
  std::vector<real_run_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = i + 1;
    s.prompt = prompt_of(s.id, i % 7, 96, 40 + 13 * (i % 4));
    s.prompt_tokens = s.prompt.size();
    s.output_tokens = output_tokens;
    out.push_back({0.002 * i, std::move(s)});
  }
  return out;
}

// Long outputs arriving at once: decoding outgrows a small HBM.
std::vector<real_run_request> growing_requests(uint32_t n) {
  std::vector<real_run_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = 100 + i;
    s.prompt = prompt_of(s.id, 50 + i, 64, 60 + 16 * i);
    s.prompt_tokens = s.prompt.size();
    s.output_tokens = 70;
    out.push_back({0.0, std::move(s)});
  }
  return out;
}

struct scratch_dir {
  std::filesystem::path path;
  explicit scratch_dir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("kvtier-model-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() { std::filesystem::remove_all(path); }
};

run_result serve(const config& cfg, std::vector<real_run_request> requests) {
  real_run_options o;
  o.backend.device = "cpu"; // the model's CPU twin reads the pool in host memory
  auto total = requests.size();
  auto result = run_real(cfg, std::move(requests), o);
  EXPECT_TRUE(result) << describe(result.error());
  if (!result)
    return {};
  EXPECT_EQ(result->compute, "model (cpu)");
  EXPECT_EQ(result->metrics.scheduler.requests_completed, total);
  EXPECT_EQ(result->metrics.blocks.failed_transfers, 0u);
  EXPECT_EQ(result->metrics.blocks.corrupted_reads, 0u);
  return std::move(*result);
}

/// Checks `run` generated exactly the reference's tokens; returns the largest logit difference.
float compare(const run_result& reference, const run_result& run, const std::string& what) {
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
  std::cout << "[ model    ] " << what << ": " << got.size()
            << " requests token-identical to all-in-HBM, max logit diff " << worst << "\n";
  return worst;
}

// The same shape with float8 K/V ([model] dtype = "fp8"): tiny-test blocks of
// 32 tokens are 2,560 bytes (1 byte an element and the dtype's per-vector
// scale room), so tiers are sized in blocks to match the bf16 runs, and the
// NVMe tier writes through the page cache.
config fp8_config(const std::string& dir, uint32_t hbm_blocks, const std::string& preemption = "auto") {
  auto cfg = model_config(dir, "4MiB", preemption);
  cfg.geometry.dtype = kv_dtype::fp8;
  EXPECT_EQ(cfg.geometry.bytes_per_block(), 2560u);
  cfg.tiers.hbm.capacity_bytes = uint64_t{hbm_blocks} * 2560;
  cfg.tiers.dram.capacity_bytes = 48 * 2560; // 192 KiB of 4 KiB blocks
  cfg.tiers.nvme_io.direct_io = false;       // O_DIRECT needs 4 KiB multiples
  EXPECT_EQ(describe(validate(cfg)), "no error");
  return cfg;
}

uint64_t lower_tier_hits(const run_result& r, tier t) {
  return r.metrics.blocks.tiers[index_of(t)].prefix_hit_blocks;
}

} // namespace

TEST(model_run, tiers_and_prefix_hits_do_not_change_a_token) {
  scratch_dir roomy_dir("roomy"), tight_dir("tight");
  auto reference = serve(model_config(roomy_dir.path.string(), "4MiB"), shared_prefix_requests(28, 6));
  ASSERT_EQ(reference.metrics.scheduler.generated.size(), 28u);
  for (const auto& [id, text] : reference.metrics.scheduler.generated)
    EXPECT_EQ(text.tokens.size(), 6u) << "request " << id;
  // All in HBM: demote-ahead may copy blocks down, but nothing comes back up.
  EXPECT_EQ(reference.h2d.bytes, 0u);
  EXPECT_EQ(lower_tier_hits(reference, tier::dram) + lower_tier_hits(reference, tier::nvme), 0u);
  EXPECT_EQ(reference.metrics.blocks.tiers[index_of(tier::hbm)].evictions, 0u);

  auto tight_cfg = model_config(tight_dir.path.string(), "128KiB"); // 32 blocks
  auto tight = serve(tight_cfg, shared_prefix_requests(28, 6));
  EXPECT_GT(tight.d2h.bytes, 0u);        // demoted to DRAM
  EXPECT_GT(tight.nvme_write.bytes, 0u); // and on to NVMe
  EXPECT_GT(tight.h2d.bytes, 0u);        // and promoted back
  EXPECT_GT(lower_tier_hits(tight, tier::dram) + lower_tier_hits(tight, tier::nvme), 0u);
  EXPECT_EQ(compare(reference, tight, "HBM of 32 blocks, DRAM and NVMe below"), 0.0f);
  std::cout << "[ model    ]   prefix hit blocks: dram " << lower_tier_hits(tight, tier::dram) << ", nvme "
            << lower_tier_hits(tight, tier::nvme) << "; promoted " << tight.h2d.bytes << " B over PCIe\n";

  // A restart over the same slot file: prefixes come back from NVMe.
  auto restarted = serve(tight_cfg, shared_prefix_requests(28, 6));
  EXPECT_GT(restarted.metrics.blocks.nvme_recovered_blocks, 0u);
  EXPECT_GT(lower_tier_hits(restarted, tier::nvme), 0u);
  EXPECT_EQ(compare(reference, restarted, "restart, prefix hits from the NVMe tier it kept"), 0.0f);
  std::cout << "[ model    ]   prefix hit blocks: nvme " << lower_tier_hits(restarted, tier::nvme) << " ("
            << restarted.metrics.blocks.nvme_recovered_blocks << " blocks recovered at start)\n";
}

TEST(model_run, a_prompt_found_whole_below_hbm_recomputes_its_last_position) {
  // Prompts of whole blocks (128 tokens = 4 blocks of 32): after a restart every block of a prompt comes
  // back from NVMe, and the first token must come from recomputing the prompt's last position.
  auto requests = [] {
    std::vector<real_run_request> out;
    for (uint32_t i = 0; i < 8; ++i) {
      request_spec s;
      s.id = 300 + i;
      s.prompt = prompt_of(s.id, 70 + i, 96, 32);
      s.prompt_tokens = s.prompt.size();
      s.output_tokens = 5;
      out.push_back({0.002 * i, std::move(s)});
    }
    return out;
  };
  scratch_dir roomy_dir("roomy-w"), dir("whole");
  auto reference = serve(model_config(roomy_dir.path.string(), "4MiB"), requests());
  auto cfg = model_config(dir.path.string(), "4MiB");
  serve(cfg, requests());
  auto restarted = serve(cfg, requests());
  EXPECT_GT(restarted.metrics.blocks.nvme_recovered_blocks, 0u);
  EXPECT_EQ(lower_tier_hits(restarted, tier::nvme), 8u * 4u); // every prompt block, from NVMe
  // No prompt token computed again but each prompt's last position, which yields its first token.
  EXPECT_EQ(restarted.metrics.scheduler.prefill_tokens, 0u);
  EXPECT_EQ(restarted.metrics.scheduler.decode_tokens, 8u * 5u);
  EXPECT_EQ(compare(reference, restarted, "restart, whole prompts loaded from NVMe"), 0.0f);
}

TEST(model_run, preemption_by_swap_and_by_recompute_does_not_change_a_token) {
  scratch_dir roomy_dir("roomy-p"), swap_dir("swap"), recompute_dir("recompute");
  auto reference = serve(model_config(roomy_dir.path.string(), "4MiB"), growing_requests(4));
  EXPECT_EQ(reference.metrics.scheduler.preemptions_swap + reference.metrics.scheduler.preemptions_recompute, 0u);

  auto swapped = serve(model_config(swap_dir.path.string(), "80KiB", "swap"), growing_requests(4)); // 20 blocks
  EXPECT_GT(swapped.metrics.scheduler.preemptions_swap, 0u);
  EXPECT_EQ(compare(reference, swapped, "preemption by swap"), 0.0f);

  auto recomputed = serve(model_config(recompute_dir.path.string(), "80KiB", "recompute"), growing_requests(4));
  EXPECT_GT(recomputed.metrics.scheduler.preemptions_recompute, 0u);
  EXPECT_EQ(compare(reference, recomputed, "preemption by recompute"), 0.0f);
  std::cout << "[ model    ]   preemptions: " << swapped.metrics.scheduler.preemptions_swap << " by swap, "
            << recomputed.metrics.scheduler.preemptions_recompute << " by recompute\n";
  for (const auto& [id, text] : recomputed.metrics.scheduler.generated)
    EXPECT_EQ(text.tokens.size(), 70u) << "request " << id << ": a recompute yields no extra token";
}

TEST(model_run, quantized_offload_moves_packed_blocks_and_stays_close) {
  // tiny-test's slice of one layer: 2 kv heads x 32 tokens x head_dim 8, K and V:
  // 128 rows, 2,048 bytes in bf16; 128 x (8 codes + 2-byte scale) = 1,280 packed in fp8 and int8,
  // 128 x (4 code bytes + 2-byte scale + 2-byte zero) = 1,024 in int4_row.
  scratch_dir tight_dir("tight-q"), fp8_dir("fp8-q"), int8_dir("int8-q"), int4_dir("int4-row-q");
  auto full = serve(model_config(tight_dir.path.string(), "128KiB"), shared_prefix_requests(28, 6));
  // Packed blocks are 2,560 bytes: not a multiple of 4 KiB, so the NVMe tier goes through the page cache.
  auto quantized = [](const scratch_dir& dir, const std::string& dtype) {
    auto cfg = model_config(dir.path.string(), "128KiB", "auto", "[compression]\noffload_dtype = \"" + dtype + "\"\n");
    cfg.tiers.nvme_io.direct_io = false;
    return cfg;
  };
  for (const char* dtype : {"fp8", "int8", "int4_row"}) {
    const std::string name = dtype;
    auto cfg = quantized(name == "fp8" ? fp8_dir : name == "int8" ? int8_dir : int4_dir, dtype);
    const uint64_t packed = name == "int4_row" ? 1024 : 1280;
    EXPECT_EQ(cfg.offload_block_bytes(), 2 * packed);
    auto q = serve(cfg, shared_prefix_requests(28, 6));
    ASSERT_GT(q.d2h.bytes, 0u);
    ASSERT_GT(q.h2d.bytes, 0u);
    EXPECT_GT(lower_tier_hits(q, tier::dram) + lower_tier_hits(q, tier::nvme), 0u);
    // Every block crossed PCIe packed: 1,280 (or 1,024) of every 2,048 bytes.
    EXPECT_EQ(q.d2h.bytes * 2048, q.d2h.kv_bytes * packed) << dtype;
    EXPECT_EQ(q.h2d.bytes * 2048, q.h2d.kv_bytes * packed) << dtype;
    EXPECT_EQ(q.nvme_write.bytes % (2 * packed), 0u);
    // The run differs from the unquantized one only through the values: same requests, same lengths.
    size_t same = 0, total = 0;
    for (const auto& [id, text] : full.metrics.scheduler.generated) {
      const auto& got = q.metrics.scheduler.generated.at(id);
      ASSERT_EQ(got.tokens.size(), text.tokens.size()) << dtype << " request " << id;
      for (size_t i = 0; i < text.tokens.size(); ++i)
        same += got.tokens[i] == text.tokens[i], ++total;
    }
    std::cout << "[ model    ] offload " << dtype << ": " << same << " of " << total
              << " tokens as with bf16 blocks below HBM; PCIe d2h " << q.d2h.bytes << " B for " << q.d2h.kv_bytes
              << " B of KV\n";
  }
  // fp8 and int8 blocks have the same size: an int8 run refuses the slot file fp8 wrote.
  real_run_options o;
  o.backend.device = "cpu";
  auto mixed = run_real(quantized(fp8_dir, "int8"), shared_prefix_requests(2, 1), o);
  ASSERT_FALSE(mixed);
  EXPECT_NE(describe(mixed.error())
                .find("payload encoding 2), the configuration wants 409 slots of 2560 bytes (adjacent layout, payload "
                      "encoding 3)"),
            std::string::npos)
      << describe(mixed.error());
}

// Compression from the model's own attention: with a keep-all budget nothing
// is compacted and every token is the uncompressed run's; at keep 0.5 each
// policy drops blocks through the block manager (a shared system-prompt
// block is only unreferenced), the compacted sequences go on decoding to
// their full length, and the report carries the attention mass kept as the
// model measured it.
TEST(model_run, compression_compacts_real_sequences_from_measured_attention) {
  scratch_dir dir("compress"), keep_dir("compress-all"), policy_dir("compress-policy");
  // Two 64-token system prompts in turn, each behind a private 136-token tail: 7 blocks of 32.
  auto requests = [] {
    std::vector<real_run_request> out;
    for (uint32_t i = 0; i < 6; ++i) {
      request_spec s;
      s.id = i + 1;
      s.prompt = prompt_of(s.id, i % 2, 64, 136);
      s.prompt_tokens = s.prompt.size();
      s.output_tokens = 6;
      out.push_back({0.002 * i, std::move(s)});
    }
    return out;
  };
  auto reference = serve(model_config(dir.path.string(), "4MiB"), requests());
  auto with = [&](const std::string& policy, double keep) {
    // Each run its own NVMe slot file: no run starts from blocks another kept.
    const auto& d = keep >= 1.0 ? keep_dir : policy_dir;
    std::filesystem::remove_all(d.path);
    std::filesystem::create_directories(d.path);
    return model_config(d.path.string(), "4MiB", "auto",
                        "[compression]\npolicy = \"" + policy + "\"\nkeep_ratio = " + std::to_string(keep) + "\n");
  };
  auto keep_all = serve(with("h2o", 1.0), requests());
  EXPECT_EQ(keep_all.metrics.compression.runs, 0u);
  EXPECT_EQ(keep_all.metrics.compression.blocks_dropped, 0u);
  EXPECT_EQ(compare(reference, keep_all, "h2o with a keep-all budget"), 0.0f);
  for (const char* policy : {"h2o", "snapkv", "streaming_llm"}) {
    auto r = serve(with(policy, 0.5), requests());
    const auto& m = r.metrics.compression;
    // 200 tokens: keep 100, 4 blocks of 7; block 0 (sinks) and the last two (recent) are protected.
    EXPECT_EQ(m.runs, 6u) << policy;
    EXPECT_EQ(m.blocks_dropped, 6u * 3) << policy;
    EXPECT_EQ(m.tokens_dropped, 32 * m.blocks_dropped) << policy;
    EXPECT_LE(m.blocks_freed, m.blocks_dropped) << policy;
    EXPECT_EQ(m.measured_mass_runs, m.runs) << policy;
    ASSERT_GT(m.measured_mass_runs, 0u) << policy;
    double kept = m.measured_mass_kept_sum / static_cast<double>(m.measured_mass_runs);
    EXPECT_GT(kept, 0.0) << policy;
    EXPECT_LT(kept, 1.0) << policy;
    const auto& hbm = r.metrics.blocks.tiers[index_of(tier::hbm)];
    EXPECT_EQ(hbm.allocated, hbm.freed) << policy << ": every block of a finished run went back";
    size_t same = 0, total = 0;
    for (const auto& [id, text] : reference.metrics.scheduler.generated) {
      const auto& got = r.metrics.scheduler.generated.at(id);
      ASSERT_EQ(got.tokens.size(), text.tokens.size()) << policy << " request " << id;
      for (size_t i = 0; i < text.tokens.size(); ++i)
        same += got.tokens[i] == text.tokens[i], ++total;
    }
    std::cout << "[ model    ] " << policy << " keep 0.5: " << m.blocks_dropped << " blocks dropped, " << m.blocks_freed
              << " freed, mass kept " << kept << ", " << same << " of " << total << " tokens as uncompressed\n";
  }
  // H2O's rolling form: a pass every 2 decoded tokens adds its query's mass to
  // what the blocks had; the budget (a share of the length) drops nothing more.
  auto rolling_cfg = with("h2o", 0.5);
  rolling_cfg.compression.every_tokens = 2;
  auto rolling = serve(rolling_cfg, requests());
  EXPECT_EQ(rolling.metrics.compression.runs, 6u);
  EXPECT_EQ(rolling.metrics.compression.blocks_dropped, 6u * 3);
  EXPECT_EQ(rolling.metrics.compression.stale_orders, 0u);
  for (const auto& [id, text] : rolling.metrics.scheduler.generated)
    EXPECT_EQ(text.tokens.size(), 6u) << "request " << id;
}

namespace {

// Request 9: a 600-token prompt, 24 tokens out.
std::vector<real_run_request> one_long_request() {
  request_spec s;
  s.id = 9;
  s.prompt = prompt_of(s.id, 3, 200, 400);
  s.prompt_tokens = s.prompt.size();
  s.output_tokens = 24;
  std::vector<real_run_request> out;
  out.push_back({0.0, std::move(s)});
  return out;
}

} // namespace

// A 600-token prompt and 24 tokens out (20 blocks of 32 tokens) through an
// HBM of 12 blocks, with 2 recent blocks kept in HBM and 48-token chunks.
// Chunks 1-8 fill HBM (384 tokens). Each later chunk finds no room and
// spills just the blocks it needs, oldest first: chunks 9-13 stream 2, 3, 5,
// 6 and 7 blocks; decodes 1-8 fill the prompt's last block and stream 7;
// decode 9 spills one more and decodes 9-23 stream 8. 199 blocks in 28 steps.
TEST(model_run, a_context_larger_than_hbm_streams_from_dram_token_for_token) {
  scratch_dir roomy_dir("roomy-s"), stream_dir("stream");
  auto reference = serve(model_config(roomy_dir.path.string(), "4MiB"), one_long_request());
  EXPECT_EQ(reference.metrics.scheduler.streamed_blocks, 0u);
  ASSERT_EQ(reference.metrics.scheduler.generated.at(9).tokens.size(), 24u);

  auto cfg = model_config(stream_dir.path.string(), "48KiB", "auto", "");
  cfg.cache.stream_from_dram = true;
  cfg.cache.stream_recent_tokens = 64;
  ASSERT_EQ(cfg.hbm_blocks(), 12u);
  auto streamed = serve(cfg, one_long_request());
  const auto& m = streamed.metrics.scheduler;
  EXPECT_EQ(m.requests_rejected, 0u);
  EXPECT_EQ(m.preemptions_swap + m.preemptions_recompute, 0u);
  EXPECT_EQ(m.streamed_blocks, 199u);
  EXPECT_EQ(m.streamed_steps, 28u);
  EXPECT_EQ(streamed.metrics.blocks.spilled_blocks, 8u);
  EXPECT_EQ(streamed.metrics.blocks.reads_while_moving, 0u);
  auto j = report_json(cfg, streamed, {"c", "t"});
  EXPECT_EQ(j["streaming"]["streamed_bytes"].get<uint64_t>(), 199u * 4096u);
  EXPECT_EQ(compare(reference, streamed, "a 624-token context through 12 HBM blocks, cold blocks streamed from DRAM"),
            0.0f);
}

// Float8 K/V across tiers: e4m3 bytes move between HBM, DRAM and NVMe
// unchanged, so every run gives the all-in-HBM fp8 run's tokens and logits
// bit for bit; and fp8 stays close to bf16 on this model.
TEST(model_run, float8_kv_tiers_prefix_hits_and_preemption_do_not_change_a_token) {
  scratch_dir roomy_dir("roomy-f8"), tight_dir("tight-f8"), bf16_dir("bf16-f8"), swap_dir("swap-f8");
  auto reference = serve(fp8_config(roomy_dir.path.string(), 1600), shared_prefix_requests(28, 6));
  ASSERT_EQ(reference.metrics.scheduler.generated.size(), 28u);
  EXPECT_EQ(reference.h2d.bytes, 0u);
  auto tight_cfg = fp8_config(tight_dir.path.string(), 32);
  auto tight = serve(tight_cfg, shared_prefix_requests(28, 6));
  EXPECT_GT(tight.d2h.bytes, 0u);
  EXPECT_GT(tight.nvme_write.bytes, 0u);
  EXPECT_GT(tight.h2d.bytes, 0u);
  EXPECT_GT(lower_tier_hits(tight, tier::dram) + lower_tier_hits(tight, tier::nvme), 0u);
  EXPECT_EQ(tight.d2h.bytes % 2560, 0u); // whole fp8 blocks
  EXPECT_EQ(compare(reference, tight, "fp8: HBM of 32 blocks, DRAM and NVMe below"), 0.0f);
  auto restarted = serve(tight_cfg, shared_prefix_requests(28, 6));
  EXPECT_GT(lower_tier_hits(restarted, tier::nvme), 0u);
  EXPECT_EQ(compare(reference, restarted, "fp8: restart, prefix hits from the NVMe tier it kept"), 0.0f);

  auto long_outputs = serve(fp8_config(roomy_dir.path.string(), 1600), growing_requests(4));
  auto swapped = serve(fp8_config(swap_dir.path.string(), 20, "swap"), growing_requests(4));
  EXPECT_GT(swapped.metrics.scheduler.preemptions_swap, 0u);
  EXPECT_EQ(compare(long_outputs, swapped, "fp8: preemption by swap"), 0.0f);

  // Against bf16 K/V: the same weights, e4m3 rounding only.
  auto bf16 = serve(model_config(bf16_dir.path.string(), "4MiB"), shared_prefix_requests(28, 6));
  size_t same = 0, total = 0;
  for (const auto& [id, text] : bf16.metrics.scheduler.generated) {
    const auto& f8 = reference.metrics.scheduler.generated.at(id).tokens;
    for (size_t i = 0; i < text.tokens.size(); ++i)
      same += i < f8.size() && f8[i] == text.tokens[i];
    total += text.tokens.size();
  }
  std::cout << "[ model    ] fp8 K/V: " << same << " of " << total << " tokens as with bf16 K/V\n";
  EXPECT_EQ(total, 28u * 6u);
  EXPECT_GE(same * 10, total * 8); // measured: 167 of 168
}

// A context larger than HBM streams its cold fp8 blocks from DRAM as the
// bf16 run does (same block counts), token for token with the all-in-HBM run.
TEST(model_run, float8_kv_context_larger_than_hbm_streams_from_dram_token_for_token) {
  scratch_dir roomy_dir("roomy-sf8"), stream_dir("stream-f8");
  auto reference = serve(fp8_config(roomy_dir.path.string(), 1600), one_long_request());
  EXPECT_EQ(reference.metrics.scheduler.streamed_blocks, 0u);
  auto cfg = fp8_config(stream_dir.path.string(), 12);
  cfg.cache.stream_from_dram = true;
  cfg.cache.stream_recent_tokens = 64;
  ASSERT_EQ(cfg.hbm_blocks(), 12u);
  auto streamed = serve(cfg, one_long_request());
  const auto& m = streamed.metrics.scheduler;
  EXPECT_EQ(m.streamed_blocks, 199u);
  EXPECT_EQ(m.streamed_steps, 28u);
  EXPECT_EQ(streamed.metrics.blocks.spilled_blocks, 8u);
  auto j = report_json(cfg, streamed, {"c", "t"});
  EXPECT_EQ(j["streaming"]["streamed_bytes"].get<uint64_t>(), 199u * 2560u);
  EXPECT_EQ(compare(reference, streamed, "fp8: a 624-token context through 12 HBM blocks, cold blocks streamed"), 0.0f);
}
