// Byte-exact tests of a tier_mover: known patterns, moves HBM->DRAM->HBM and
// DRAM->HBM->DRAM through every copy path, under concurrency, every byte and
// every block's checksum compared. Compiled twice: against the CPU twin, and
// with KVTIER_COPY_TEST_CUDA against the GPU mover (skipped without a GPU).

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cpu_mover.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "tests/kernels/copy_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <thread>

using namespace kvtier;
using namespace kvtier::copy;
using namespace kvtier::copy::test;

namespace {

// 4 layers of 1,040 bytes: a slice size that is a multiple of 16 but of no
// larger power of two, so pitch mistakes show.
constexpr uint32_t layers = 4;
constexpr uint64_t layer_bytes = 1040;
constexpr uint64_t block_bytes = layers * layer_bytes;

mover_options test_options() {
  mover_options o;
  o.shape = {48, 80, layers, layer_bytes};
  o.host_threads = 3;
  o.chunk_bytes = 5 * block_bytes; // requests of 6+ blocks cross several chunks and both halves
  o.calibrate = false;
  o.allow_sm_copy = true;
  o.dma_streams = 3; // DMA paths fork a chunk over three streams and join it back
  return o;
}

std::unique_ptr<tier_mover> make_mover(const mover_options& o, std::string* why) {
#ifdef KVTIER_COPY_TEST_CUDA
  return make_cuda_mover(o, why);
#else
  (void)why;
  return make_cpu_mover(o);
#endif
}

class mover_test : public ::testing::TestWithParam<copy_path> {
protected:
  void SetUp() override { start(test_options()); }

  void start(const mover_options& o) {
    std::string why;
    mover_ = make_mover(o, &why);
    if (!mover_)
      GTEST_SKIP() << why;
  }

  move_request request(tier from, tier to, std::vector<slot_pair> moves, uint64_t tag = 1) {
    move_request r;
    r.from = from;
    r.to = to;
    r.moves = std::move(moves);
    r.tag = tag;
    r.path = GetParam();
    return r;
  }

  void fill(tier t, const std::vector<uint32_t>& slots, uint64_t seed) {
    for (auto s : slots)
      mover_->write_slot(t, s, pattern(seed, s, block_bytes));
  }

  // Every byte of `slot` in `t` equals pattern(seed, origin); checksums agree.
  void expect_block(tier t, uint32_t slot, uint64_t seed, uint32_t origin) {
    std::vector<std::byte> got(block_bytes);
    mover_->read_slot(t, slot, got);
    auto want = pattern(seed, origin, block_bytes);
    EXPECT_EQ(block_checksum(got), block_checksum(want)) << name_of(t) << " slot " << slot;
    auto diff = std::mismatch(got.begin(), got.end(), want.begin());
    EXPECT_TRUE(diff.first == got.end()) << name_of(t) << " slot " << slot << " differs at byte "
                                         << (diff.first - got.begin());
  }

  std::unique_ptr<tier_mover> mover_;
};

std::vector<uint32_t> shuffled(uint32_t n, uint64_t seed) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  std::shuffle(v.begin(), v.end(), std::mt19937_64{seed});
  return v;
}

TEST_P(mover_test, hbm_to_dram_to_hbm_keeps_every_byte) {
  auto hbm = shuffled(48, 1);
  auto dram = shuffled(80, 2);
  std::vector<uint32_t> src(hbm.begin(), hbm.begin() + 40);
  fill(tier::hbm, src, 7);
  std::vector<slot_pair> down;
  for (size_t i = 0; i < src.size(); ++i)
    down.push_back({src[i], dram[i]});
  auto r1 = move_now(*mover_, request(tier::hbm, tier::dram, down, 11));
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_EQ(r1.tag, 11u);
  EXPECT_EQ(r1.bytes, src.size() * block_bytes);
  for (size_t i = 0; i < src.size(); ++i)
    expect_block(tier::dram, dram[i], 7, src[i]);

  fill(tier::hbm, hbm, 99); // overwrite HBM so the way back must bring the bytes
  std::vector<slot_pair> up;
  for (size_t i = 0; i < src.size(); ++i)
    up.push_back({dram[i], hbm[47 - i]});
  auto r2 = move_now(*mover_, request(tier::dram, tier::hbm, up, 12));
  ASSERT_TRUE(r2.ok) << r2.error;
  for (size_t i = 0; i < src.size(); ++i)
    expect_block(tier::hbm, hbm[47 - i], 7, src[i]);
  for (size_t i = 40; i < 48; ++i) // slots no move named are untouched
    expect_block(tier::hbm, hbm[47 - i], 99, hbm[47 - i]);
  // Calibration is off: the link counters hold these two requests alone.
  for (auto [from, to] : {std::pair{tier::hbm, tier::dram}, std::pair{tier::dram, tier::hbm}}) {
    auto s = mover_->stats(from, to);
    EXPECT_EQ(s.bytes, src.size() * block_bytes);
    EXPECT_EQ(s.requests, 1u);
#ifdef KVTIER_COPY_TEST_CUDA
    // The streams' span lies inside the host's issue-to-completion span (timing events resolve ~0.5 us).
    EXPECT_GT(s.link_seconds, 0.0);
    EXPECT_LE(s.link_seconds, s.busy_seconds + 1e-5);
    // The issue thread's calls are part of the host's span; the lags are never negative.
    EXPECT_GT(s.issue_seconds, 0.0);
    EXPECT_LE(s.issue_seconds, s.busy_seconds);
    EXPECT_GE(s.start_lag_seconds, 0.0);
    EXPECT_GE(s.end_lag_seconds, 0.0);
#else
    EXPECT_EQ(s.link_seconds, 0.0); // the CPU twin's copies are the busy span itself
    EXPECT_EQ(s.issue_seconds + s.start_lag_seconds + s.end_lag_seconds, 0.0); // nothing apart to measure
#endif
  }
}

TEST_P(mover_test, dram_to_hbm_to_dram_keeps_every_byte) {
  auto dram = shuffled(80, 3);
  auto hbm = shuffled(48, 4);
  std::vector<uint32_t> src(dram.begin(), dram.begin() + 48);
  fill(tier::dram, src, 5);
  std::vector<slot_pair> up;
  for (size_t i = 0; i < 48; ++i)
    up.push_back({src[i], hbm[i]});
  ASSERT_TRUE(move_now(*mover_, request(tier::dram, tier::hbm, up)).ok);
  for (size_t i = 0; i < 48; ++i)
    expect_block(tier::hbm, hbm[i], 5, src[i]);
  fill(tier::dram, dram, 66);
  std::vector<slot_pair> down;
  for (size_t i = 0; i < 48; ++i)
    down.push_back({hbm[i], dram[79 - i]});
  ASSERT_TRUE(move_now(*mover_, request(tier::hbm, tier::dram, down)).ok);
  for (size_t i = 0; i < 48; ++i)
    expect_block(tier::dram, dram[79 - i], 5, src[i]);
  for (size_t i = 48; i < 80; ++i)
    expect_block(tier::dram, dram[79 - i], 66, dram[79 - i]);
}

TEST_P(mover_test, adjacent_dram_slots_move_as_runs) {
  // DRAM slots 10..29 ascending: one run for the DMA paths.
  std::vector<slot_pair> up, down;
  std::vector<uint32_t> dram(20);
  std::iota(dram.begin(), dram.end(), 10u);
  fill(tier::dram, dram, 21);
  for (uint32_t i = 0; i < 20; ++i)
    up.push_back({10 + i, 47 - 2 * i});
  ASSERT_TRUE(move_now(*mover_, request(tier::dram, tier::hbm, up)).ok);
  for (uint32_t i = 0; i < 20; ++i)
    expect_block(tier::hbm, 47 - 2 * i, 21, 10 + i);
  for (uint32_t i = 0; i < 20; ++i)
    down.push_back({47 - 2 * i, 50 + i});
  ASSERT_TRUE(move_now(*mover_, request(tier::hbm, tier::dram, down)).ok);
  for (uint32_t i = 0; i < 20; ++i)
    expect_block(tier::dram, 50 + i, 21, 10 + i);
}

TEST_P(mover_test, both_directions_from_many_threads_at_once) {
  // Four threads, each owning its own slots, bounce blocks HBM <-> DRAM for
  // several rounds with both directions in flight at once.
  constexpr int threads = 4, rounds = 6;
  fill(tier::hbm, shuffled(48, 9), 0); // every HBM slot holds pattern(0, slot)
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      // thread t owns HBM slots t*12 .. t*12+11 and DRAM slots t*20 .. t*20+19
      for (int round = 0; round < rounds; ++round) {
        std::vector<slot_pair> down, up;
        for (uint32_t i = 0; i < 6; ++i) // HBM [0,6) -> DRAM, scattered
          down.push_back({t * 12u + i, t * 20u + (round % 2 ? 19 - 3 * i : 3 * i)});
        std::promise<move_result> d;
        auto dr = request(tier::hbm, tier::dram, down, t * 100 + round);
        mover_->submit(std::move(dr), [&](const move_result& r) { d.set_value(r); });
        for (uint32_t i = 0; i < 6; ++i) // meanwhile DRAM -> HBM [6,12) from the previous round
          up.push_back({t * 20u + (round % 2 ? 3 * i : 19 - 3 * i), t * 12u + 6 + i});
        move_result ur{};
        if (round > 0)
          ur = move_now(*mover_, request(tier::dram, tier::hbm, up));
        auto drr = d.get_future().get();
        if (!drr.ok || (round > 0 && !ur.ok) || drr.tag != uint64_t(t * 100 + round))
          ++failures;
      }
    });
  }
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < threads; ++t)
    for (uint32_t i = 0; i < 6; ++i) {
      // last round (odd): DRAM t*20 + 19-3i holds HBM t*12+i; HBM t*12+6+i came
      // from DRAM t*20 + 3i, written in round 4 (even) by HBM t*12+i.
      expect_block(tier::dram, t * 20 + 19 - 3 * i, 0, t * 12 + i);
      expect_block(tier::hbm, t * 12 + 6 + i, 0, t * 12 + i);
    }
  mover_->drain();
}

TEST_P(mover_test, a_layer_range_moves_only_those_layers) {
  std::vector<uint32_t> dram{3, 9, 27, 28};
  fill(tier::dram, dram, 31);
  std::vector<uint32_t> hbm{5, 6, 40, 1};
  fill(tier::hbm, hbm, 32);
  std::vector<slot_pair> up;
  for (size_t i = 0; i < 4; ++i)
    up.push_back({dram[i], hbm[i]});
  auto r = request(tier::dram, tier::hbm, up);
  r.first_layer = 1;
  r.layer_count = 2;
  auto res = move_now(*mover_, r);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.bytes, 4 * 2 * layer_bytes);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<std::byte> got(block_bytes);
    mover_->read_slot(tier::hbm, hbm[i], got);
    auto from_dram = pattern(31, dram[i], block_bytes);
    auto before = pattern(32, hbm[i], block_bytes);
    for (uint32_t l = 0; l < layers; ++l) {
      const auto& want = (l == 1 || l == 2) ? from_dram : before;
      EXPECT_EQ(0, std::memcmp(got.data() + l * layer_bytes, want.data() + l * layer_bytes, layer_bytes))
          << "hbm slot " << hbm[i] << " layer " << l;
    }
  }
  // And back: the last layer alone, HBM -> DRAM.
  std::vector<slot_pair> down;
  for (size_t i = 0; i < 4; ++i)
    down.push_back({hbm[i], dram[i]});
  auto back = request(tier::hbm, tier::dram, down);
  back.first_layer = 3;
  ASSERT_TRUE(move_now(*mover_, back).ok);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<std::byte> got(block_bytes);
    mover_->read_slot(tier::dram, dram[i], got);
    auto mine = pattern(31, dram[i], block_bytes);
    auto hbm_bytes = pattern(32, hbm[i], block_bytes);
    EXPECT_EQ(0, std::memcmp(got.data(), mine.data(), 3 * layer_bytes));
    EXPECT_EQ(0, std::memcmp(got.data() + 3 * layer_bytes, hbm_bytes.data() + 3 * layer_bytes, layer_bytes));
  }
}

TEST_P(mover_test, many_requests_queued_at_once_all_land) {
  // 24 single-block requests each way, submitted without waiting.
  fill(tier::hbm, shuffled(48, 1), 41);
  fill(tier::dram, shuffled(80, 1), 42);
  std::atomic<int> landed{0}, bad{0};
  for (uint32_t i = 0; i < 24; ++i) {
    mover_->submit(request(tier::hbm, tier::dram, {{i, 40 + i}}, i), [&, i](const move_result& r) {
      bad += !r.ok || r.tag != i;
      ++landed;
    });
    mover_->submit(request(tier::dram, tier::hbm, {{i, 24 + i}}, 100 + i), [&, i](const move_result& r) {
      bad += !r.ok || r.tag != 100 + i;
      ++landed;
    });
  }
  mover_->drain();
  EXPECT_EQ(landed.load(), 48);
  EXPECT_EQ(bad.load(), 0);
  for (uint32_t i = 0; i < 24; ++i) {
    expect_block(tier::dram, 40 + i, 41, i);
    expect_block(tier::hbm, 24 + i, 42, i);
  }
  auto up = mover_->stats(tier::dram, tier::hbm);
  auto down = mover_->stats(tier::hbm, tier::dram);
  EXPECT_EQ(up.bytes, 24 * block_bytes);
  EXPECT_EQ(down.bytes, 24 * block_bytes);
  EXPECT_EQ(up.requests, 24u);
}

TEST_P(mover_test, an_empty_request_completes) {
  auto r = move_now(*mover_, request(tier::dram, tier::hbm, {}, 77));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.tag, 77u);
  EXPECT_EQ(r.bytes, 0u);
}

TEST_P(mover_test, drain_waits_for_a_request_queued_just_before_an_empty_one) {
  // On the GPU a host-staged request to DRAM leaves its last chunk's unpacking
  // for when the lane is idle; an empty request right behind it must not let
  // it be forgotten.
  fill(tier::hbm, shuffled(48, 3), 61);
  std::vector<slot_pair> down;
  for (uint32_t i = 0; i < 12; ++i)
    down.push_back({i, 79 - i});
  std::atomic<int> landed{0}, bad{0};
  mover_->submit(request(tier::hbm, tier::dram, down, 5), [&](const move_result& r) {
    bad += !r.ok || r.tag != 5 || r.bytes != 12 * block_bytes;
    ++landed;
  });
  mover_->submit(request(tier::hbm, tier::dram, {}, 6), [&](const move_result& r) {
    bad += !r.ok || r.tag != 6 || r.bytes != 0;
    ++landed;
  });
  mover_->drain();
  EXPECT_EQ(landed.load(), 2);
  EXPECT_EQ(bad.load(), 0);
  for (uint32_t i = 0; i < 12; ++i)
    expect_block(tier::dram, 79 - i, 61, i);
}

TEST_P(mover_test, one_large_chunk_and_tiny_chunks_agree) {
  for (uint64_t chunk : {uint64_t{block_bytes}, uint64_t{64} << 20}) {
    auto o = test_options();
    o.chunk_bytes = chunk;
    start(o);
    if (!mover_)
      return;
    auto dram = shuffled(80, chunk);
    fill(tier::dram, dram, 51);
    std::vector<slot_pair> up, down;
    for (uint32_t i = 0; i < 48; ++i)
      up.push_back({dram[i], 47 - i});
    ASSERT_TRUE(move_now(*mover_, request(tier::dram, tier::hbm, up)).ok);
    for (uint32_t i = 0; i < 48; ++i)
      down.push_back({47 - i, dram[79 - i]});
    ASSERT_TRUE(move_now(*mover_, request(tier::hbm, tier::dram, down)).ok);
    for (uint32_t i = 0; i < 48; ++i) {
      expect_block(tier::hbm, 47 - i, 51, dram[i]);
      expect_block(tier::dram, dram[79 - i], 51, dram[i]);
    }
  }
}

// Beside compute: a request marked spare_sms (demote-ahead, prefetch), or any
// request once a model's kernels share the GPU (compute_shares_gpu).
TEST(mover, a_transfer_beside_compute_takes_no_copy_kernel) {
  for (bool shared_gpu : {false, true}) {
    auto o = test_options();
    o.compute_shares_gpu = shared_gpu;
    std::string why;
    auto m = make_mover(o, &why);
    if (!m)
      GTEST_SKIP() << why;
    // Scattered DRAM slots: a strided DMA per block costs less than twice the
    // batched path, so no kernel at all (dma_2d). Adjacent slots: one batched
    // run is far cheaper than eight strided copies (dma_batch; its only
    // kernel is the short layout conversion).
    const std::vector<uint32_t> scattered{70, 72, 74, 76, 71, 73, 75, 77};
    for (bool adjacent : {false, true}) {
      for (uint32_t s = 0; s < 8; ++s)
        m->write_slot(tier::dram, 70 + s, pattern(61 + adjacent, 70 + s, block_bytes));
      move_request r;
      r.from = tier::dram;
      r.to = tier::hbm;
      r.spare_sms = !shared_gpu; // a promotion something waits on, where the GPU is shared
      for (uint32_t s = 0; s < 8; ++s)
        r.moves.push_back({adjacent ? 70 + s : scattered[s], 6 * s + 1});
      auto res = move_now(*m, r);
      ASSERT_TRUE(res.ok) << res.error;
      copy_path want = adjacent ? copy_path::dma_batch : copy_path::dma_2d;
      EXPECT_EQ(res.path, m->on_gpu() ? want : copy_path::host_memcpy)
          << "adjacent " << adjacent << ", shared GPU " << shared_gpu;
      for (uint32_t s = 0; s < 8; ++s) {
        std::vector<std::byte> got(block_bytes);
        m->read_slot(tier::hbm, 6 * s + 1, got);
        EXPECT_EQ(block_checksum(got), block_checksum(pattern(61 + adjacent, r.moves[s].from_slot, block_bytes)));
      }
    }
  }
}

TEST(mover, dram_pool_is_page_aligned) {
  std::string why;
  auto m = make_mover(test_options(), &why);
  if (!m)
    GTEST_SKIP() << why;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->dram_base()) % 4096, 0u);
  EXPECT_EQ(m->layout(tier::hbm).order, slot_order::layer_major);
  EXPECT_EQ(m->layout(tier::dram).order, slot_order::block_major);
}

#ifdef KVTIER_COPY_TEST_CUDA
TEST(mover, calibration_measures_every_path) {
  auto o = test_options();
  o.shape = {96, 96, 8, 8192}; // 64 KiB blocks
  o.calibrate = true;
  std::string why;
  auto m = make_mover(o, &why);
  if (!m)
    GTEST_SKIP() << why;
  const auto& c = m->costs();
  EXPECT_TRUE(c.measured);
  for (const auto* d : {&c.h2d, &c.d2h})
    for (auto p : {copy_path::dma_runs, copy_path::dma_batch, copy_path::dma_2d, copy_path::host_staged,
                   copy_path::sm_copy, copy_path::split})
      EXPECT_GT(d->of(p).gbps, 0.0) << to_string(p);
  for (const auto* d : {&c.h2d, &c.d2h}) {
    EXPECT_GE(d->split_dma_share, 0.2);
    EXPECT_LE(d->split_dma_share, 0.7);
  }
}
#endif

TEST(mover, split_chunks_keep_every_byte_whatever_the_dma_share) {
  // Share 0: all by kernel; 1: all by DMA (capped by staging: the rest by
  // kernel); in between, both streams at once. Chunks of 5 staged blocks.
  for (double share : {0.0, 0.3, 0.5, 1.0}) {
    auto o = test_options();
    o.costs = costs_from_profile(pcie_profile{});
    o.costs->h2d.split_dma_share = share;
    o.costs->d2h.split_dma_share = share;
    std::string why;
    auto m = make_mover(o, &why);
    if (!m)
      GTEST_SKIP() << why;
    auto dram = shuffled(80, 17);
    auto hbm = shuffled(48, 18);
    for (uint32_t i = 0; i < 48; ++i)
      m->write_slot(tier::dram, dram[i], pattern(71, dram[i], block_bytes));
    move_request up{tier::dram, tier::hbm, {}, 0, 0, 1, copy_path::split};
    move_request down{tier::hbm, tier::dram, {}, 0, 0, 2, copy_path::split};
    for (uint32_t i = 0; i < 48; ++i) {
      up.moves.push_back({dram[i], hbm[i]});
      down.moves.push_back({hbm[i], dram[79 - i]});
    }
    auto r1 = move_now(*m, up);
    ASSERT_TRUE(r1.ok) << r1.error;
    EXPECT_EQ(r1.bytes, 48 * block_bytes);
    auto r2 = move_now(*m, down);
    ASSERT_TRUE(r2.ok) << r2.error;
    for (uint32_t i = 0; i < 48; ++i) {
      std::vector<std::byte> got(block_bytes);
      m->read_slot(tier::hbm, hbm[i], got);
      EXPECT_EQ(block_checksum(got), block_checksum(pattern(71, dram[i], block_bytes)))
          << "share " << share << " hbm " << hbm[i];
      m->read_slot(tier::dram, dram[79 - i], got);
      EXPECT_EQ(block_checksum(got), block_checksum(pattern(71, dram[i], block_bytes)))
          << "share " << share << " dram " << dram[79 - i];
    }
  }
}

TEST(mover, the_bulk_copy_kernel_keeps_every_byte) {
  // Slices of 1,040 bytes (15 to a 16 KiB stage, runs merged across a
  // block's layers) and of 40,000 bytes (three segments per slice).
  for (uint64_t lb : {uint64_t{1040}, uint64_t{40000}}) {
    mover_options o = test_options();
    o.shape = {24, 40, 4, lb};
    o.chunk_bytes = 5 * 4 * lb;
    o.bulk_copy = true;
    const uint64_t bb = 4 * lb;
    std::string why;
    auto m = make_mover(o, &why);
    if (!m)
      GTEST_SKIP() << why;
    for (auto path : {copy_path::sm_copy, copy_path::split}) {
      auto dram = shuffled(40, lb + 1);
      auto hbm = shuffled(24, lb + 2);
      for (uint32_t i = 0; i < 24; ++i)
        m->write_slot(tier::dram, dram[i], pattern(81, dram[i], bb));
      move_request up{tier::dram, tier::hbm, {}, 0, 0, 1, path};
      move_request down{tier::hbm, tier::dram, {}, 0, 0, 2, path};
      for (uint32_t i = 0; i < 24; ++i) {
        up.moves.push_back({dram[i], hbm[i]});
        down.moves.push_back({hbm[i], dram[39 - i]});
      }
      auto r1 = move_now(*m, up);
      ASSERT_TRUE(r1.ok) << r1.error;
      auto r2 = move_now(*m, down);
      ASSERT_TRUE(r2.ok) << r2.error;
      std::vector<std::byte> got(bb);
      for (uint32_t i = 0; i < 24; ++i) {
        m->read_slot(tier::hbm, hbm[i], got);
        EXPECT_EQ(block_checksum(got), block_checksum(pattern(81, dram[i], bb))) << to_string(path) << " lb " << lb;
        m->read_slot(tier::dram, dram[39 - i], got);
        EXPECT_EQ(block_checksum(got), block_checksum(pattern(81, dram[i], bb))) << to_string(path) << " lb " << lb;
      }
      // A layer range: layers 1..2 of four blocks, back up into fresh HBM contents.
      for (uint32_t i = 0; i < 24; ++i)
        m->write_slot(tier::hbm, hbm[i], pattern(82, hbm[i], bb));
      move_request part{tier::dram, tier::hbm, {}, 1, 2, 3, path};
      for (uint32_t i = 0; i < 4; ++i)
        part.moves.push_back({dram[39 - i], hbm[i]});
      auto r3 = move_now(*m, part);
      ASSERT_TRUE(r3.ok) << r3.error;
      for (uint32_t i = 0; i < 4; ++i) {
        m->read_slot(tier::hbm, hbm[i], got);
        auto moved = pattern(81, dram[i], bb);
        auto kept = pattern(82, hbm[i], bb);
        for (uint32_t l = 0; l < 4; ++l) {
          const auto& want = (l == 1 || l == 2) ? moved : kept;
          EXPECT_EQ(0, std::memcmp(got.data() + l * lb, want.data() + l * lb, lb)) << "layer " << l << " lb " << lb;
        }
      }
    }
  }
}

const copy_path all_paths[] = {copy_path::automatic,   copy_path::dma_runs, copy_path::dma_batch, copy_path::dma_2d,
                               copy_path::host_staged, copy_path::sm_copy,  copy_path::split};

INSTANTIATE_TEST_SUITE_P(paths, mover_test, ::testing::ValuesIn(all_paths),
                         [](const auto& test_param) { return std::string{to_string(test_param.param)}; });

} // namespace
