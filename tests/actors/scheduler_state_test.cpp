#include "actors/scheduler_state.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace kvtier;

namespace {

struct scheduler_test : ::testing::Test {
  config cfg = *parse_config("", "t.toml");
  cost_model costs{cfg};
  scheduler_metrics metrics;
  scheduler_options options() {
    scheduler_options o;
    o.max_running = 4;
    o.max_batch_tokens = 100;
    o.prefill_chunk = 64;
    o.block_tokens = 16;
    o.hbm_blocks = 1000;
    o.compression = true;
    return o;
  }
  static request_spec request(uint64_t id, uint64_t prompt, uint32_t output) {
    request_spec r;
    r.id = id;
    r.prompt_tokens = prompt;
    r.output_tokens = output;
    return r;
  }
  /// The step finished; compression answers every reported sequence with
  /// nothing removed, as the block manager would relay it.
  static std::vector<prefill_stats> step_done(scheduler_state& s, double now, double seconds,
                                              const std::vector<step_token>* sampled = nullptr) {
    auto due = s.on_step_done(now, seconds, sampled);
    for (const auto& p : due)
      s.on_compacted(p.seq, p.dropped_tokens);
    return due;
  }
  static step_grant grant_all(const step_ops& ops, std::vector<uint64_t> hit_tokens = {}) {
    step_grant g;
    g.step = ops.step;
    size_t admit = 0;
    for (const auto& op : ops.ops) {
      op_result r;
      r.seq = op.seq;
      if (op.what == sequence_op::kind::admit)
        r.tokens = admit < hit_tokens.size() ? hit_tokens[admit++] : 0;
      g.results.push_back(r);
    }
    g.hbm_free = 500;
    return g;
  }
};

} // namespace

TEST_F(scheduler_test, chunked_prefill_then_decode_then_release) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  s.on_arrival(request(1, 150, 3), 0.0);
  // Step 1: admit with a 64-token chunk.
  auto ops = s.build_plan();
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->ops.size(), 1u);
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::admit);
  EXPECT_EQ(ops->ops[0].tokens, 64u);
  EXPECT_EQ(ops->ops[0].target_tokens, 150u);
  EXPECT_FALSE(s.build_plan()); // one plan at a time
  auto step = s.on_grant(grant_all(*ops), 0.0);
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].new_tokens, 64u);
  EXPECT_TRUE(step_done(s, 0.1, 0.1).empty());
  // Step 2 and 3: the remaining 86 tokens in chunks of 64 and 22.
  ops = s.build_plan();
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::grow);
  EXPECT_EQ(ops->ops[0].tokens, 64u);
  s.on_grant(grant_all(*ops), 0.1);
  step_done(s, 0.2, 0.1);
  ops = s.build_plan();
  EXPECT_EQ(ops->ops[0].tokens, 22u);
  s.on_grant(grant_all(*ops), 0.2);
  auto prefilled = step_done(s, 0.3, 0.1);
  ASSERT_EQ(prefilled.size(), 1u);
  EXPECT_EQ(prefilled[0].tokens, 150u);
  ASSERT_EQ(metrics.ttft_s.size(), 1u);
  EXPECT_DOUBLE_EQ(metrics.ttft_s[0], 0.3);
  // Two decodes produce the 2nd and 3rd token; then the request is released at once.
  for (int i = 0; i < 2; ++i) {
    ops = s.build_plan();
    ASSERT_EQ(ops->ops.size(), 1u);
    EXPECT_EQ(ops->ops[0].tokens, 1u);
    s.on_grant(grant_all(*ops), 0.3 + 0.1 * i);
    EXPECT_TRUE(step_done(s, 0.4 + 0.1 * i, 0.1).empty()); // decodes: no compression without every_tokens
  }
  EXPECT_EQ(metrics.requests_completed, 1u);
  ASSERT_EQ(metrics.tpot_s.size(), 1u);
  EXPECT_NEAR(metrics.tpot_s[0], 0.1, 1e-12);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 1u);
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::release);
}

TEST_F(scheduler_test, decodes_first_then_prefill_under_the_token_budget) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  s.on_arrival(request(1, 10, 50), 0.0);
  auto ops = s.build_plan();
  s.on_grant(grant_all(*ops), 0.0);
  step_done(s, 0.1, 0.1); // seq 1 decoding now
  s.on_arrival(request(2, 500, 5), 0.1);
  s.on_arrival(request(3, 500, 5), 0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 3u);
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::grow);
  EXPECT_EQ(ops->ops[0].tokens, 1u);  // the decode
  EXPECT_EQ(ops->ops[1].tokens, 64u); // a chunk for seq 2
  EXPECT_EQ(ops->ops[2].tokens, 35u); // the rest of the 100-token budget for seq 3
}

TEST_F(scheduler_test, a_full_prefix_hit_recomputes_only_the_last_position) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  s.on_arrival(request(1, 32, 2), 0.0);
  auto ops = s.build_plan();
  auto step = s.on_grant(grant_all(*ops, {32}), 0.0);
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].new_tokens, 1u);
  EXPECT_EQ(step.sequences[0].context_tokens, 32u);
}

TEST_F(scheduler_test, no_room_for_a_decode_preempts_the_youngest) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  s.on_arrival(request(1, 10, 50), 0.0);
  s.on_arrival(request(2, 10, 50), 0.0);
  auto ops = s.build_plan();
  s.on_grant(grant_all(*ops), 0.0);
  step_done(s, 0.1, 0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 2u);
  auto g = grant_all(*ops);
  g.results[0].status = admit_status::no_room; // seq 1 cannot grow
  auto step = s.on_grant(g, 0.1);
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].sequence_id, 2u);
  step_done(s, 0.2, 0.1);
  ops = s.build_plan();
  ASSERT_GE(ops->ops.size(), 1u);
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::preempt);
  EXPECT_EQ(ops->ops[0].seq, 2u); // the youngest, not the one that failed
}

// A prefilling sequence swapped out comes back only when HBM holds its
// blocks, its next chunk and what the others still need: 64 cached tokens and
// a 64-token chunk are 8 blocks, the decoding sequence needs 1, plus 1 spare.
// With 9 free it would fail its first grow and be preempted again.
TEST_F(scheduler_test, a_swapped_sequence_returns_with_room_for_its_next_chunk) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  s.on_arrival(request(1, 10, 50), 0.0);
  s.on_arrival(request(2, 150, 3), 0.0);
  auto ops = s.build_plan(); // admits 10 and 64 tokens
  ASSERT_EQ(ops->ops.size(), 2u);
  s.on_grant(grant_all(*ops), 0.0);
  step_done(s, 0.1, 0.1);
  ops = s.build_plan(); // decode 1, chunk of 64 for seq 2
  ASSERT_EQ(ops->ops.size(), 2u);
  auto g = grant_all(*ops);
  g.results[1].status = admit_status::no_room;
  s.on_grant(g, 0.1);
  step_done(s, 0.2, 0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 2u);
  ASSERT_EQ(ops->ops[0].what, sequence_op::kind::preempt);
  ASSERT_EQ(ops->ops[0].seq, 2u);
  g = grant_all(*ops);
  g.results[0].mode = preempt_mode::swap;
  g.hbm_free = 9;
  s.on_grant(g, 0.2);
  step_done(s, 0.3, 0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 1u); // seq 1's decode only
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::grow);
  g = grant_all(*ops);
  g.hbm_free = 10;
  s.on_grant(g, 0.3);
  step_done(s, 0.4, 0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 2u);
  EXPECT_EQ(ops->ops[1].what, sequence_op::kind::swap_in);
  EXPECT_EQ(ops->ops[1].seq, 2u);
}

TEST_F(scheduler_test, requests_larger_than_hbm_are_rejected) {
  auto o = options();
  o.hbm_blocks = 4;
  scheduler_state s(o, costs, &metrics, nullptr);
  s.on_arrival(request(1, 100, 1), 0.0);
  EXPECT_EQ(metrics.requests_rejected, 1u);
  EXPECT_FALSE(s.build_plan());
}

TEST_F(scheduler_test, compression_every_n_decoded_tokens) {
  auto o = options();
  o.compress_every_tokens = 16;
  scheduler_state s(o, costs, &metrics, nullptr);
  s.on_arrival(request(1, 14, 10), 0.0);
  auto ops = s.build_plan();
  s.on_grant(grant_all(*ops), 0.0);
  EXPECT_EQ(step_done(s, 0.1, 0.1).size(), 1u); // prefill end, 14 tokens cached
  ops = s.build_plan();
  s.on_grant(grant_all(*ops), 0.1);
  EXPECT_TRUE(step_done(s, 0.2, 0.1).empty()); // 15
  ops = s.build_plan();
  s.on_grant(grant_all(*ops), 0.2);
  auto due = step_done(s, 0.3, 0.1); // 16: crosses the boundary
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tokens, 16u);
}

// With a model behind the port: the plan carries the chunk's token ids, its
// first position and the block table the grant gave; each sampled token
// becomes the next step's input; a prompt found whole in the cache
// recomputes its last position only.
TEST_F(scheduler_test, model_steps_carry_tokens_positions_and_block_tables) {
  auto o = options();
  o.model_inputs = true;
  o.vocab_size = 1000;
  o.compression = false;
  scheduler_state s(o, costs, &metrics, nullptr);
  auto r = request(1, 0, 3);
  for (uint32_t t = 0; t < 80; ++t)
    r.prompt.push_back(500 + t);
  s.on_arrival(r, 0.0);
  auto ops = s.build_plan();
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops->ops[0].chain.size(), 5u); // 80 tokens: five full blocks hashed
  auto g = grant_all(*ops);
  g.results[0].table = {7, 3, 9, 4};
  auto step = s.on_grant(g, 0.0);
  ASSERT_EQ(step.sequences.size(), 1u);
  const auto& first = step.sequences[0];
  EXPECT_EQ(first.first_position, 0u);
  ASSERT_EQ(first.tokens.size(), 64u);
  EXPECT_EQ(first.tokens[63], 563u);
  EXPECT_EQ(first.block_table, (std::vector<uint32_t>{7, 3, 9, 4}));
  step_done(s, 0.1, 0.1, nullptr); // mid-prefill: nothing sampled yet
  ops = s.build_plan();
  g = grant_all(*ops);
  g.results[0].table = {7, 3, 9, 4, 8};
  step = s.on_grant(g, 0.1);
  EXPECT_EQ(step.sequences[0].first_position, 64u);
  EXPECT_EQ(step.sequences[0].tokens.size(), 16u);
  std::vector<step_token> sampled{{1, 42, 1.5f, {}}};
  step_done(s, 0.2, 0.1, &sampled);
  ops = s.build_plan();
  g = grant_all(*ops);
  g.results[0].table = {7, 3, 9, 4, 8, 2};
  step = s.on_grant(g, 0.2);
  EXPECT_EQ(step.sequences[0].first_position, 80u); // the decode of the sampled token
  EXPECT_EQ(step.sequences[0].tokens, (std::vector<uint32_t>{42}));
  sampled = {{1, 43, 0.5f, {}}};
  step_done(s, 0.3, 0.1, &sampled);
  EXPECT_EQ(metrics.generated.at(1).tokens, (std::vector<uint32_t>{42, 43}));
  EXPECT_EQ(metrics.generated.at(1).logits, (std::vector<float>{1.5f, 0.5f}));

  // A second request whose 64-token prompt is cached whole.
  auto again = request(2, 0, 1);
  again.prompt.assign(r.prompt.begin(), r.prompt.begin() + 64);
  s.on_arrival(again, 0.3);
  ops = s.build_plan();
  ASSERT_TRUE(ops);
  g = grant_all(*ops, {64});
  for (size_t i = 0; i < ops->ops.size(); ++i)
    g.results[i].table =
        ops->ops[i].seq == 2 ? std::vector<uint32_t>{7, 3, 9, 4} : std::vector<uint32_t>{7, 3, 9, 4, 8, 2};
  step = s.on_grant(g, 0.3);
  auto it = std::find_if(step.sequences.begin(), step.sequences.end(),
                         [](const step_sequence& x) { return x.sequence_id == 2; });
  ASSERT_NE(it, step.sequences.end());
  EXPECT_EQ(it->context_tokens, 64u);
  EXPECT_EQ(it->first_position, 63u);
  EXPECT_EQ(it->tokens, (std::vector<uint32_t>{563}));
}

// A port that keeps tables gets what it lacks: the whole table at first,
// then only new entries (the grants' updates accumulate while a sequence sits
// out a step), and a finished sequence is retired in the next step's plan.
TEST_F(scheduler_test, a_port_that_keeps_tables_gets_only_the_entries_it_lacks) {
  auto o = options();
  o.model_inputs = true;
  o.keeps_tables = true;
  o.vocab_size = 1000;
  o.compression = false;
  scheduler_state s(o, costs, &metrics, nullptr);
  auto r = request(1, 0, 2);
  for (uint32_t t = 0; t < 32; ++t)
    r.prompt.push_back(10 + t);
  s.on_arrival(r, 0.0);
  auto ops = s.build_plan();
  auto g = grant_all(*ops);
  g.results[0].table = {5, 6};
  auto step = s.on_grant(g, 0.0);
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].table_from, 0u);
  EXPECT_EQ(step.sequences[0].block_table, (std::vector<uint32_t>{5, 6}));
  std::vector<step_token> sampled{{1, 42, 1.0f, {}}};
  step_done(s, 0.1, 0.1, &sampled);
  // The decode appends a block: only it travels.
  s.on_arrival(
      [&] {
        auto second = request(2, 0, 1);
        second.prompt = {1, 2, 3};
        return second;
      }(),
      0.1);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 2u);
  g = grant_all(*ops);
  g.results[0].table_from = 2;
  g.results[0].table = {9};
  g.results[1].table = {4};
  step = s.on_grant(g, 0.1);
  ASSERT_EQ(step.sequences.size(), 2u);
  EXPECT_EQ(step.sequences[0].sequence_id, 1u);
  EXPECT_EQ(step.sequences[0].table_from, 2u);
  EXPECT_EQ(step.sequences[0].block_table, (std::vector<uint32_t>{9}));
  EXPECT_EQ(step.sequences[1].table_from, 0u);
  EXPECT_EQ(step.sequences[1].block_table, (std::vector<uint32_t>{4}));
  EXPECT_TRUE(step.retired.empty());
  sampled = {{1, 43, 1.0f, {}}, {2, 44, 1.0f, {}}};
  step_done(s, 0.2, 0.1, &sampled); // both finish
  EXPECT_EQ(metrics.generated.at(1).tokens, (std::vector<uint32_t>{42, 43}));
  EXPECT_EQ(metrics.generated.at(2).tokens, (std::vector<uint32_t>{44}));
  // The next step's plan retires them.
  s.on_arrival(
      [&] {
        auto third = request(3, 0, 1);
        third.prompt = {7};
        return third;
      }(),
      0.2);
  ops = s.build_plan();
  ASSERT_EQ(ops->ops.size(), 3u); // two releases, one admission
  g = grant_all(*ops);
  g.results[2].table = {8};
  step = s.on_grant(g, 0.2);
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.retired, (std::vector<uint64_t>{1, 2}));
}

// A sequence reported to compression does not step until the answer comes
// (so a compaction never lands at a timing-dependent step); the answer's
// dropped positions then reach the model step beside unchanged positions.
TEST_F(scheduler_test, a_reported_sequence_waits_for_compaction_then_steps_over_the_compacted_table) {
  auto o = options();
  o.model_inputs = true;
  o.vocab_size = 1000;
  scheduler_state s(o, costs, &metrics, nullptr);
  auto r = request(1, 0, 3);
  for (uint32_t t = 0; t < 40; ++t)
    r.prompt.push_back(100 + t);
  s.on_arrival(r, 0.0);
  auto ops = s.build_plan();
  auto g = grant_all(*ops);
  g.results[0].table = {4, 5, 6};
  auto plan = s.on_grant(g, 0.0);
  ASSERT_EQ(plan.sequences.size(), 1u);
  EXPECT_TRUE(plan.sequences[0].want_attention_stats); // the prefill ends in this step
  std::vector<step_token> sampled{{1, 7, 0.5f, {0.5f, 1.0f, 2.5f}, {0.1f, 0.2f, 0.7f}}};
  auto due = s.on_step_done(0.1, 0.1, &sampled);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tokens, 40u);
  EXPECT_EQ(due[0].block_mass, (std::vector<float>{0.5f, 1.0f, 2.5f}));
  EXPECT_EQ(due[0].slots, (std::vector<uint32_t>{4, 5, 6}));
  EXPECT_FALSE(s.build_plan()); // waiting for compression
  s.on_compacted(1, 16);        // block 1 went
  ops = s.build_plan();
  ASSERT_TRUE(ops);
  g = grant_all(*ops);
  g.results[0].table = {4, 6};
  g.results[0].dropped_tokens = 16;
  plan = s.on_grant(g, 0.1);
  ASSERT_EQ(plan.sequences.size(), 1u);
  EXPECT_EQ(plan.sequences[0].first_position, 40u); // positions stay
  EXPECT_EQ(plan.sequences[0].dropped_tokens, 16u);
  EXPECT_EQ(plan.sequences[0].tokens, (std::vector<uint32_t>{7}));
  EXPECT_FALSE(plan.sequences[0].want_attention_stats);
}

TEST_F(scheduler_test, streaming_admits_past_hbm_and_refuses_past_hbm_and_dram) {
  auto o = options();
  o.hbm_blocks = 10;
  o.stream_from_dram = true;
  o.dram_blocks = 20;
  o.stream_recent_blocks = 2; // working set: 2 + 64/16 + 2 = 8 blocks of HBM
  scheduler_state s(o, costs, &metrics, nullptr);
  s.on_arrival(request(1, 400, 1), 0.0); // 26 blocks: 10 in HBM, 16 streamed from DRAM
  EXPECT_EQ(metrics.requests_rejected, 0u);
  s.on_arrival(request(2, 500, 1), 0.0); // 32 blocks
  EXPECT_EQ(metrics.requests_rejected, 1u);
  ASSERT_EQ(metrics.rejections.size(), 1u);
  EXPECT_EQ(metrics.rejections[0],
            "request 2: 501 tokens (prompt 500 + output 1) need 32 blocks of 16 tokens; HBM (10) and DRAM (20) hold 30 "
            "together ([tiers.hbm] and [tiers.dram] capacity)");

  o.hbm_blocks = 7; // short of the working set
  scheduler_state small(o, costs, &metrics, nullptr);
  small.on_arrival(request(3, 200, 1), 0.0);
  ASSERT_EQ(metrics.rejections.size(), 2u);
  EXPECT_EQ(
      metrics.rejections[1],
      "request 3: 201 tokens (prompt 200 + output 1) need 13 blocks of 16 tokens; streaming keeps 8 of them in HBM "
      "(the recent window, [cache] stream_recent_tokens = 32; a chunk, [scheduler] prefill_chunk = 64; a partial "
      "tail and its copy), but HBM holds 7 ([tiers.hbm] capacity)");

  o.stream_from_dram = false;
  scheduler_state off(o, costs, &metrics, nullptr);
  off.on_arrival(request(4, 200, 1), 0.0);
  ASSERT_EQ(metrics.rejections.size(), 3u);
  EXPECT_EQ(metrics.rejections[2],
            "request 4: 201 tokens (prompt 200 + output 1) need 13 blocks of 16 tokens; HBM "
            "holds 7 ([tiers.hbm] capacity) and [cache] stream_from_dram is off (or there is "
            "no DRAM tier to stream from)");
}

TEST_F(scheduler_test, a_request_larger_than_hbm_runs_alone) {
  auto o = options();
  o.hbm_blocks = 10;
  o.stream_from_dram = true;
  o.dram_blocks = 20;
  o.stream_recent_blocks = 2;
  scheduler_state s(o, costs, &metrics, nullptr);
  s.on_arrival(request(1, 400, 1), 0.0); // 26 blocks: streams
  s.on_arrival(request(2, 20, 1), 0.0);
  auto ops = s.build_plan();
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->ops.size(), 1u); // the short one does not join it
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::admit);
  EXPECT_EQ(ops->ops[0].seq, 1u);
  auto plan = s.on_grant(grant_all(*ops), 0.0);
  ASSERT_EQ(plan.sequences.size(), 1u);
  s.on_step_done(0.1, 0.1);
  ops = s.build_plan(); // running: still alone, though HBM reports room
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->ops.size(), 1u);
  EXPECT_EQ(ops->ops[0].what, sequence_op::kind::grow);
  EXPECT_EQ(ops->ops[0].seq, 1u);
}

namespace {

/// A plan as "what seq tokens" per op, for exact comparison.
std::string ops_text(const step_ops& ops) {
  std::string out;
  for (const auto& op : ops.ops) {
    static constexpr const char* names[] = {"admit", "grow", "swap_in", "release", "preempt"};
    out += fmt::format("{}{} {} {}", out.empty() ? "" : ", ", names[static_cast<int>(op.what)], op.seq, op.tokens);
  }
  return out;
}

} // namespace

// Thousands waiting: each plan holds what runs and what its head admits; a
// loading sequence counts in the headroom (its prompt is still to come) and
// an admission refused by the block manager keeps its place at the head.
TEST_F(scheduler_test, a_long_queue_is_admitted_from_its_head_beside_what_runs_and_loads) {
  scheduler_state s(options(), costs, &metrics, nullptr);
  for (uint64_t id = 1; id <= 3000; ++id)
    s.on_arrival(request(id, 32, 10), 0.0);
  auto ops = s.build_plan();
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops_text(*ops), "admit 1 32, admit 2 32, admit 3 32, admit 4 4"); // the 100-token budget
  auto g = grant_all(*ops);
  g.results[0].status = admit_status::loading;
  g.results[2].status = admit_status::no_room;
  g.hbm_free = 3;
  auto plan = s.on_grant(g, 0.0);
  ASSERT_EQ(plan.sequences.size(), 2u);
  EXPECT_EQ(s.waiting(), 2997u);
  EXPECT_EQ(s.running(), 2u);
  step_done(s, 0.1, 0.1);

  ops = s.build_plan(); // no admission: HBM has not freed a block since seq 3's refusal
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops_text(*ops), "grow 2 1, grow 4 28");
  g = grant_all(*ops);
  g.hbm_free = 6;
  s.on_grant(g, 0.1);
  step_done(s, 0.2, 0.1);

  // Headroom 1 + seq 1 loading (2 blocks) + two decodes (1 each) = 5, and
  // seq 3's prompt is 2 blocks: 7 > 6 free.
  ops = s.build_plan();
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops_text(*ops), "grow 2 1, grow 4 1");
  g = grant_all(*ops);
  g.hbm_free = 7;
  s.on_grant(g, 0.2);
  step_done(s, 0.3, 0.1);

  ops = s.build_plan(); // 7 free: seq 3, then max_running (3 active + 1)
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops_text(*ops), "grow 2 1, grow 4 1, admit 3 32");
  s.on_grant(grant_all(*ops), 0.3);
  step_done(s, 0.4, 0.1);
  s.on_ready(1, 32);
  s.note_idle();
  EXPECT_EQ(metrics.idle_waiting, 2996u);
  EXPECT_EQ(metrics.idle_loading, 0u);
  EXPECT_EQ(metrics.idle_running, 4u);
  EXPECT_EQ(metrics.idle_swapped, 0u);

  ops = s.build_plan(); // seq 1 joins last; four run, so the queue waits
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops_text(*ops), "grow 2 1, grow 4 1, grow 3 1, grow 1 1");
}
