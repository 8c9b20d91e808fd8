#include "io/nvme_options.hpp"
#include "io/probe.hpp"
#include "io/slot_format.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include <xxhash.h>

using namespace kvtier;
using namespace kvtier::io;

namespace {

alignas(4096) std::array<std::byte, sector_bytes> sector;

std::span<std::byte, sector_bytes> view() {
  return std::span<std::byte, sector_bytes>{sector};
}

} // namespace

TEST(io_format, geometry) {
  slot_geometry g{2 << 20, 10};
  EXPECT_EQ(g.payload_bytes(), 2u << 20);
  EXPECT_EQ(g.slot_bytes(), (2u << 20) + 4096);
  EXPECT_EQ(g.header_offset(0), 4096u);
  EXPECT_EQ(g.payload_offset(0), 8192u);
  EXPECT_EQ(g.header_offset(3), 4096u + 3 * ((2u << 20) + 4096));
  EXPECT_EQ(g.payload_offset(3), 8192u + 3 * ((2u << 20) + 4096));
  EXPECT_EQ(g.file_bytes(), 4096u + 10 * ((2u << 20) + 4096));
  EXPECT_EQ((slot_geometry{1000, 1}.slot_bytes()), 8192u);
  slot_geometry split{2 << 20, 1000, slot_layout::split};
  EXPECT_EQ(split.header_offset(0), 4096u);
  EXPECT_EQ(split.header_offset(999), 4096u + 999 * 4096);
  EXPECT_EQ(split.payload_base(), 4u << 20); // 4 KiB + 1000 headers (3.9 MiB), rounded up to 2 MiB
  EXPECT_EQ(split.payload_offset(7), (4u << 20) + 7 * (2u << 20));
  EXPECT_EQ(split.file_bytes(), (4ull << 20) + 1000 * (2ull << 20));
}

TEST(io_format, superblock_round_trip) {
  superblock sb;
  sb.slots = 7;
  sb.block_bytes = 65536;
  sb.slot_bytes = 69632;
  sb.file_id = 0x1234;
  encode(sb, view());
  auto back = decode_superblock(view());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->slots, 7u);
  EXPECT_EQ(back->file_id, 0x1234u);
  sector[12] ^= std::byte{1};
  EXPECT_FALSE(decode_superblock(view()));
}

TEST(io_format, header_states) {
  slot_header h;
  h.slot = 5;
  h.file_id = 99;
  h.hash = {1, 2};
  h.salt_id = 3;
  h.payload_bytes = 4096;
  h.payload_checksum = 77;
  h.sequence = 8;
  encode(h, view());
  auto d = decode_header(view(), 5, 99);
  ASSERT_EQ(d.state, header_state::valid);
  EXPECT_EQ(d.header.hash, (block_hash{1, 2}));
  EXPECT_EQ(d.header.sequence, 8u);
  EXPECT_EQ(decode_header(view(), 6, 99).state, header_state::empty);  // written for another slot
  EXPECT_EQ(decode_header(view(), 5, 100).state, header_state::empty); // an earlier format of the file
  sector[30] ^= std::byte{4};
  EXPECT_EQ(decode_header(view(), 5, 99).state, header_state::damaged);
  sector.fill(std::byte{0});
  EXPECT_EQ(decode_header(view(), 5, 99).state, header_state::empty);
  sector[100] = std::byte{1};
  EXPECT_EQ(decode_header(view(), 5, 99).state, header_state::empty); // past the header: not ours to judge
  sector[0] = std::byte{1};
  EXPECT_EQ(decode_header(view(), 5, 99).state, header_state::damaged);
}

TEST(io_format, payload_checksum_binds_hash_and_salt) {
  std::array<std::byte, 64> data{};
  auto a = payload_checksum(data.data(), data.size(), {1, 2}, 0);
  EXPECT_NE(a, payload_checksum(data.data(), data.size(), {1, 2}, 1));
  EXPECT_NE(a, payload_checksum(data.data(), data.size(), {3, 2}, 0));
  data[63] = std::byte{1};
  EXPECT_NE(a, payload_checksum(data.data(), data.size(), {1, 2}, 0));
}

TEST(io_format, payload_checksum_is_xxh3_at_every_size) {
  std::vector<std::byte> data(3 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<std::byte>(i * 131 + (i >> 9));
  for (uint64_t n : {0ull, 1ull, 17ull, 240ull, 4096ull, 65536ull, 2ull << 20, (3ull << 20) - 5})
    EXPECT_EQ(payload_checksum(data.data(), n, {5, 6}, 7), XXH3_64bits_withSeed(data.data(), n, 5 ^ 6 ^ 7)) << n;
}

TEST(io_options, slot_file_inside_the_configured_directory) {
  nvme_settings settings;
  settings.engine = engine_choice::threads;
  settings.queue_depth = 64;
  auto o = make_nvme_options(settings, "/mnt/nvme1/kv");
  EXPECT_EQ(o.file, "/mnt/nvme1/kv/kvtier.slots");
  EXPECT_EQ(o.engine, engine_choice::threads);
  EXPECT_EQ(o.queue_depth, 64u);
  EXPECT_EQ(slot_file_path("/var/tmp/kvtier"), "/var/tmp/kvtier/kvtier.slots");
  EXPECT_EQ(slot_file_path("/var/tmp/kvtier/"), "/var/tmp/kvtier/kvtier.slots");
}

TEST(io_probe, says_which_engine_and_why) {
  auto forced = probe_engine(engine_choice::threads);
  EXPECT_EQ(forced.engine, engine_choice::threads);
  EXPECT_EQ(forced.engine_why, "engine = \"threads\" in the configuration");
  EXPECT_EQ(
      forced.message(),
      "NVMe tier: pread/pwrite thread pool (engine = \"threads\" in the configuration); buffered I/O (not probed yet)");
  auto automatic = probe_engine(engine_choice::automatic);
  if (automatic.engine == engine_choice::uring)
    EXPECT_EQ(automatic.engine_why, "probed: io_uring works here");
  else
    EXPECT_EQ(automatic.engine_why.rfind("io_uring unavailable: ", 0), 0u) << automatic.engine_why;
}
