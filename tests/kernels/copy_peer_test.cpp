// The peer block copy's planning and its CPU twin: two host pools stand for
// two GPUs' pools; after a scattered move every destination block's checksum
// equals its source block's, and every other destination slot is untouched.

#include "copy_test_support.hpp"
#include "kernels/copy/peer_copy.hpp"
#include "kernels/copy/peer_plan.hpp"

#include <gtest/gtest.h>

#include <map>

using namespace kvtier;
using namespace kvtier::copy;

namespace {

/// A host pool whose slot s holds test::pattern(seed, s) in block-major
/// order (layer 0 first), laid out as `order` says.
struct host_pool {
  std::vector<std::byte> bytes;
  tier_layout layout;
  host_pool(slot_order order, uint32_t slots, uint32_t layers, uint64_t layer_bytes, uint64_t seed)
      : layout{order, slots, layers, layer_bytes} {
    bytes.resize(layout.total_bytes());
    for (uint32_t s = 0; s < slots; ++s) {
      auto block = test::pattern(seed, s, layout.block_bytes());
      for (uint32_t l = 0; l < layers; ++l)
        std::memcpy(bytes.data() + layout.offset(s, l), block.data() + l * layer_bytes, layer_bytes);
    }
  }
  peer_pool view() { return {bytes.data(), layout}; }
  /// Slot s's layers [first, first + count), gathered in layer order.
  std::vector<std::byte> block(uint32_t s, uint32_t first = 0, uint32_t count = 0) const {
    if (count == 0)
      count = layout.layers - first;
    std::vector<std::byte> out(count * layout.layer_bytes);
    for (uint32_t l = 0; l < count; ++l)
      std::memcpy(out.data() + l * layout.layer_bytes, bytes.data() + layout.offset(s, first + l), layout.layer_bytes);
    return out;
  }
};

uint64_t sum_of(const std::vector<std::byte>& b) {
  return block_checksum(b);
}

} // namespace

TEST(copy_peer, adjacent_slots_to_adjacent_slots_coalesce_per_layer_in_layer_major_pools) {
  host_pool a(slot_order::layer_major, 16, 4, 64, 1), b(slot_order::layer_major, 32, 4, 64, 2);
  peer_request r{a.view(), b.view(), {{3, 10}, {4, 11}, {5, 12}, {9, 2}, {10, 20}}};
  ASSERT_EQ(check_peer_request(r), "");
  auto runs = peer_runs(r);
  // Per layer: 3..5 -> 10..12 is one run; 9 -> 2 and 10 -> 20 are adjacent
  // in the source but not in the destination: two runs.
  ASSERT_EQ(runs.size(), 4u * 3u);
  EXPECT_EQ(runs[0].from_offset, 3u * 64);
  EXPECT_EQ(runs[0].to_offset, 10u * 64);
  EXPECT_EQ(runs[0].bytes, 3u * 64);
  EXPECT_EQ(runs[1].from_offset, 9u * 64);
  EXPECT_EQ(runs[1].bytes, 64u);
  EXPECT_EQ(runs[3].from_offset, 1u * 16 * 64 + 3 * 64); // layer 1 of slot 3
  EXPECT_EQ(runs[3].to_offset, 1u * 32 * 64 + 10 * 64);
  uint64_t total = 0;
  for (const auto& run : runs)
    total += run.bytes;
  EXPECT_EQ(total, 5u * 4 * 64);
}

TEST(copy_peer, block_major_pools_move_whole_blocks_as_one_run) {
  host_pool a(slot_order::block_major, 16, 4, 64, 1), b(slot_order::block_major, 16, 4, 64, 2);
  peer_request r{a.view(), b.view(), {{3, 10}, {4, 11}, {5, 12}, {9, 2}}};
  auto runs = peer_runs(r);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].bytes, 3u * 4 * 64);
  EXPECT_EQ(runs[1].bytes, 4u * 64);
  // A layer range of block-major pools: one run per block, adjacent or not.
  r.first_layer = 1;
  r.layer_count = 2;
  runs = peer_runs(r);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].from_offset, 3u * 256 + 64);
  EXPECT_EQ(runs[0].bytes, 128u);
}

TEST(copy_peer, long_runs_split_into_pieces) {
  std::vector<byte_run> runs{{0, 1000, 160}, {400, 0, 32}};
  auto pieces = split_runs(runs, 64);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[1].from_offset, 64u);
  EXPECT_EQ(pieces[1].to_offset, 1064u);
  EXPECT_EQ(pieces[2].bytes, 32u);
  EXPECT_EQ(pieces[3].from_offset, 400u);
}

TEST(copy_peer, requests_are_checked_against_the_pools) {
  host_pool a(slot_order::layer_major, 8, 4, 64, 1), b(slot_order::layer_major, 4, 4, 64, 2),
      c(slot_order::layer_major, 4, 4, 128, 3), d(slot_order::layer_major, 4, 4, 24, 4);
  peer_request r{a.view(), b.view(), {{7, 3}}};
  EXPECT_EQ(check_peer_request(r), "");
  r.moves = {{8, 0}};
  EXPECT_EQ(check_peer_request(r), "a slot is outside its pool");
  r.moves = {{1, 4}};
  EXPECT_EQ(check_peer_request(r), "a slot is outside its pool");
  r.moves = {{1, 2}, {3, 2}};
  EXPECT_EQ(check_peer_request(r), "a destination slot is named twice");
  r.moves = {{1, 2}, {1, 3}}; // one source to two destinations is fine
  EXPECT_EQ(check_peer_request(r), "");
  r.first_layer = 2;
  r.layer_count = 3;
  EXPECT_EQ(check_peer_request(r), "the layer range is outside the pools");
  r.first_layer = 0;
  r.layer_count = 0;
  r.to = c.view();
  EXPECT_EQ(check_peer_request(r), "the pools differ in layers or layer_bytes");
  r.from = d.view();
  r.to = d.view();
  EXPECT_EQ(check_peer_request(r), "layer_bytes must be a positive multiple of 16");
  r.from = a.view();
  r.to = b.view();
  r.from.base += 8;
  EXPECT_EQ(check_peer_request(r), "pool bases must be 16-byte aligned");
  r.from = d.view();
  r.to = d.view();
  auto copier = make_host_peer_copier();
  auto result = copier->copy(r);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "layer_bytes must be a positive multiple of 16");
}

TEST(copy_peer, scattered_move_lands_every_block_and_nothing_else) {
  // Two "devices": layer-major pools of different sizes, 4 layers of 1 KiB.
  host_pool prefill(slot_order::layer_major, 64, 4, 1024, 11), decode(slot_order::layer_major, 96, 4, 1024, 22);
  const host_pool decode_before = decode;
  // Shuffled sources, runs of adjacent slots, and scattered destinations.
  std::vector<slot_pair> moves{{5, 90}, {6, 91}, {7, 92}, {40, 3}, {1, 57}, {2, 12}, {63, 0}, {30, 31}, {31, 32}};
  auto copier = make_host_peer_copier();
  auto result = copier->copy({prefill.view(), decode.view(), moves});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.bytes, moves.size() * 4 * 1024);
  EXPECT_EQ(result.runs, 4u * 6); // per layer: 5..7, 40, 1, 2, 63, 30..31
  std::map<uint32_t, uint32_t> source_of;
  for (const auto& m : moves)
    source_of[m.to_slot] = m.from_slot;
  for (uint32_t s = 0; s < decode.layout.slots; ++s) {
    auto it = source_of.find(s);
    const uint64_t expected =
        it == source_of.end() ? sum_of(decode_before.block(s)) : sum_of(prefill.block(it->second));
    EXPECT_EQ(sum_of(decode.block(s)), expected) << "destination slot " << s;
  }
  // Exact bytes too, not only checksums: slot 92 is source slot 7.
  EXPECT_EQ(decode.block(92), test::pattern(11, 7, 4 * 1024));
}

TEST(copy_peer, a_layer_range_moves_only_those_layers) {
  host_pool prefill(slot_order::layer_major, 8, 4, 256, 5), decode(slot_order::layer_major, 8, 4, 256, 6);
  const host_pool decode_before = decode;
  auto result = make_host_peer_copier()->copy({prefill.view(), decode.view(), {{2, 6}, {3, 1}}, 1, 2});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.bytes, 2u * 2 * 256);
  EXPECT_EQ(decode.block(6, 1, 2), prefill.block(2, 1, 2));
  EXPECT_EQ(decode.block(1, 1, 2), prefill.block(3, 1, 2));
  EXPECT_EQ(decode.block(6, 0, 1), decode_before.block(6, 0, 1));
  EXPECT_EQ(decode.block(6, 3, 1), decode_before.block(6, 3, 1));
}
