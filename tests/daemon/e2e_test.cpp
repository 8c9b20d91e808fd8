// kvtierd end to end: the daemon as a child process, clients in forked
// processes, every block checksummed after its round trip.

#include "daemon_fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace kvtier::daemon::testing {
namespace {

constexpr std::size_t block = 64 * 1024;
constexpr std::uint64_t blocks_per_client = 24;
constexpr int clients = 4;

// One client process: sets its blocks, checks exists, reads them back into
// other offsets, compares checksums. Returns 0 when everything matched.
int client_round_trip(const daemon_process& d, std::uint64_t seed) {
  auto c = d.connect();
  if (c.block_bytes() != block)
    return 1;
  auto r = c.map_region(2 * blocks_per_client * block);
  if (!r)
    return 2;
  std::byte* base = (*r)->data();
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets, back;
  for (std::uint64_t i = 0; i < blocks_per_client; ++i) {
    fill_block(base + i * block, block, seed, i);
    keys.push_back(key_of(seed, i));
    offsets.push_back(i * block);
    back.push_back((blocks_per_client + i) * block);
  }
  // Two batches, so the second set sees the first's blocks already held.
  const std::size_t half = blocks_per_client / 2;
  auto s1 = c.batch_set(std::span(keys).first(half), std::span(offsets).first(half));
  auto s2 = c.batch_set(keys, offsets);
  if (!s1 || !s2)
    return 3;
  for (bool b : *s2)
    if (!b)
      return 4;
  auto e = c.batch_exists(keys);
  if (!e || *e != blocks_per_client)
    return 5;
  auto g = c.batch_get(keys, back);
  if (!g)
    return 6;
  for (std::uint64_t i = 0; i < blocks_per_client; ++i)
    if (!(*g)[i] || checksum(base + back[i], block) != expected_checksum(block, seed, i))
      return 7;
  return 0;
}

// Every client's blocks, read back by one more connection, by checksum.
void check_all_blocks(const daemon_process& d) {
  auto c = d.connect();
  auto r = c.map_region(blocks_per_client * block);
  ASSERT_TRUE(r);
  for (int seed = 1; seed <= clients; ++seed) {
    std::vector<client::block_key> keys;
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t i = 0; i < blocks_per_client; ++i) {
      keys.push_back(key_of(seed, i));
      offsets.push_back(i * block);
    }
    auto g = c.batch_get(keys, offsets);
    ASSERT_TRUE(g) << g.err().what();
    for (std::uint64_t i = 0; i < blocks_per_client; ++i) {
      ASSERT_TRUE((*g)[i]) << "seed " << seed << " block " << i;
      EXPECT_EQ(checksum((*r)->data() + offsets[i], block), expected_checksum(block, seed, i));
    }
  }
}

std::string nvme_toml(const daemon_process& d, const std::string& bytes) {
  return "[nvme]\npath = \"" + d.dir() + "\"\nbytes = \"" + bytes + "\"\nengine = \"threads\"\ndirect_io = false\n";
}

void several_clients(const std::string& name, bool nvme) {
  daemon_process d(name);
  // With NVMe, DRAM holds 8 blocks: most reads come back from the slot file.
  d.start(nvme ? d.config("64KiB", "512KiB", std::string(tenants_toml) + nvme_toml(d, "16MiB"))
               : d.config("64KiB", "16MiB", tenants_toml));
  std::vector<pid_t> pids;
  for (int seed = 1; seed <= clients; ++seed)
    pids.push_back(fork_client([&] { return client_round_trip(d, seed); }));
  for (auto pid : pids)
    EXPECT_EQ(wait_exit(pid), 0);
  check_all_blocks(d);
  auto c = d.connect();
  auto s = c.stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tenant_blocks, clients * blocks_per_client);
  EXPECT_EQ(d.stop(), 0);
}

TEST(daemon_e2e, several_client_processes_dram_blocks_checksummed) {
  several_clients("dram", false);
}

TEST(daemon_e2e, several_client_processes_nvme_blocks_checksummed) {
  several_clients("nvme", true);
}

TEST(daemon_e2e, tenants_see_only_their_share_group) {
  daemon_process d("tenants");
  d.start(d.config("64KiB", "4MiB", tenants_toml));
  auto a = d.connect("a", "ta");
  auto b = d.connect("b", "tb");
  auto c = d.connect("c", "tc");
  auto ra = a.map_region(block);
  auto rb = b.map_region(block);
  auto rc = c.map_region(block);
  ASSERT_TRUE(ra && rb && rc);
  fill_block((*ra)->data(), block, 7, 0);
  const client::block_key k = key_of(7, 0);
  const std::uint64_t off = 0;
  auto set = a.batch_set(std::span(&k, 1), std::span(&off, 1));
  ASSERT_TRUE(set && (*set)[0]);
  EXPECT_EQ(*a.batch_exists(std::span(&k, 1)), 1u);
  EXPECT_EQ(*b.batch_exists(std::span(&k, 1)), 0u);
  auto gb = b.batch_get(std::span(&k, 1), std::span(&off, 1));
  ASSERT_TRUE(gb);
  EXPECT_FALSE((*gb)[0]);
  EXPECT_EQ(checksum((*rb)->data(), block), checksum(std::vector<std::byte>(block).data(), block)); // untouched
  EXPECT_EQ(*c.batch_exists(std::span(&k, 1)), 1u); // c shares a's group
  auto gc = c.batch_get(std::span(&k, 1), std::span(&off, 1));
  ASSERT_TRUE(gc && (*gc)[0]);
  EXPECT_EQ(checksum((*rc)->data(), block), expected_checksum(block, 7, 0));
  EXPECT_EQ(d.stop(), 0);
}

TEST(daemon_e2e, quota_refuses_the_batch_that_would_exceed_it) {
  daemon_process d("quota");
  d.start(d.config("64KiB", "4MiB", tenants_toml));
  auto q = d.connect("q", "tq");
  auto r = q.map_region(6 * block);
  ASSERT_TRUE(r);
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t i = 0; i < 6; ++i) {
    fill_block((*r)->data() + i * block, block, 9, i);
    keys.push_back(key_of(9, i));
    offsets.push_back(i * block);
  }
  auto first = q.batch_set(std::span(keys).first(4), std::span(offsets).first(4));
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, std::vector<bool>(4, true));
  auto over = q.batch_set(std::span(keys).subspan(3, 2), std::span(offsets).subspan(3, 2));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.err().code, client::errc::quota_exceeded);
  EXPECT_EQ(over.err().message, "tenant \"q\" holds 4 of its 4 blocks; this batch would add 1");
  auto again = q.batch_set(std::span(keys).first(2), std::span(offsets).first(2)); // held already: no growth
  ASSERT_TRUE(again);
  EXPECT_EQ(*q.batch_exists(keys), 4u);
  auto s = q.stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tenant_blocks, 4u);
  EXPECT_EQ(s->tenant_quota_blocks, 4u);
  EXPECT_EQ(d.stop(), 0);
}

TEST(daemon_e2e, restart_after_sigkill_serves_nvme_blocks_at_once) {
  daemon_process d("restart");
  const auto cfg = d.config("64KiB", "1MiB", std::string(tenants_toml) + nvme_toml(d, "4MiB"));
  d.start(cfg);
  constexpr std::uint64_t n = 32;
  {
    auto c = d.connect();
    auto r = c.map_region(n * block);
    ASSERT_TRUE(r);
    std::vector<client::block_key> keys;
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t i = 0; i < n; ++i) {
      fill_block((*r)->data() + i * block, block, 5, i);
      keys.push_back(key_of(5, i));
      offsets.push_back(i * block);
    }
    auto s = c.batch_set(keys, offsets);
    ASSERT_TRUE(s);
    EXPECT_EQ(*s, std::vector<bool>(n, true)); // acknowledged: on the slot file
  }
  d.kill9();
  d.start(cfg);
  auto c = d.connect();
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t i = 0; i < n; ++i) {
    keys.push_back(key_of(5, i));
    offsets.push_back(i * block);
  }
  EXPECT_EQ(*c.batch_exists(keys), n);
  auto r = c.map_region(n * block);
  ASSERT_TRUE(r);
  auto g = c.batch_get(keys, offsets);
  ASSERT_TRUE(g);
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE((*g)[i]);
    EXPECT_EQ(checksum((*r)->data() + i * block, block), expected_checksum(block, 5, i));
  }
  auto s = c.stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->nvme_blocks, n);
  EXPECT_EQ(s->tenant_blocks, n); // recovered blocks count against their tenant again
  EXPECT_EQ(d.stop(), 0);
}

TEST(daemon_e2e, pins_hold_blocks_against_eviction_until_released) {
  daemon_process d("pins");
  d.start(d.config("64KiB", "256KiB", tenants_toml)); // 4 blocks of DRAM, no NVMe
  auto c = d.connect();
  auto r = c.map_region(8 * block);
  ASSERT_TRUE(r);
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t i = 0; i < 8; ++i) {
    fill_block((*r)->data() + i * block, block, 3, i);
    keys.push_back(key_of(3, i));
    offsets.push_back(i * block);
  }
  ASSERT_TRUE(c.batch_set(std::span(keys).first(2), std::span(offsets).first(2)));
  EXPECT_EQ(*c.pin(std::span(keys).first(1)), 1u);
  // Six more blocks through four slots: everything unpinned is evicted.
  for (std::uint64_t i = 2; i < 8; ++i)
    ASSERT_TRUE(c.batch_set(std::span(keys).subspan(i, 1), std::span(offsets).subspan(i, 1)));
  EXPECT_EQ(*c.batch_exists(std::span(keys).first(1)), 1u);
  EXPECT_EQ(*c.batch_exists(std::span(keys).subspan(1, 1)), 0u);
  EXPECT_EQ(*c.release(std::span(keys).first(1)), 1u);
  EXPECT_EQ(*c.release(std::span(keys).first(1)), 0u); // not pinned any more
  EXPECT_EQ(d.stop(), 0);
}

TEST(daemon_e2e, loopback_tcp_with_a_named_region_round_trips_blocks) {
  daemon_process d("tcp");
  d.start(d.config("64KiB", "4MiB", tenants_toml, "tcp = \"127.0.0.1:0\"\n"));
  const auto address = d.tcp_address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << d.read_file("out.txt");
  auto c = client::client::connect("tcp:" + address, "a", "ta");
  ASSERT_TRUE(c) << c.err().what();
  auto r = c->map_region(4 * block); // over TCP: a /dev/shm region passed by name
  ASSERT_TRUE(r) << r.err().what();
  EXPECT_EQ((*r)->shm_name().rfind("/kvtier-", 0), 0u);
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets, back;
  for (std::uint64_t i = 0; i < 2; ++i) {
    fill_block((*r)->data() + i * block, block, 8, i);
    keys.push_back(key_of(8, i));
    offsets.push_back(i * block);
    back.push_back((2 + i) * block);
  }
  auto s = c->batch_set(keys, offsets);
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, std::vector<bool>(2, true));
  auto g = c->batch_get(keys, back);
  ASSERT_TRUE(g);
  for (std::uint64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE((*g)[i]);
    EXPECT_EQ(checksum((*r)->data() + back[i], block), expected_checksum(block, 8, i));
  }
  auto wrong = client::client::connect("tcp:" + address, "a", "nope");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.err().code, client::errc::refused);
  EXPECT_EQ(d.stop(), 0);
}

std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return "";
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

TEST(daemon_e2e, metrics_and_healthz_over_http) {
  daemon_process d("metrics");
  d.start(d.config("64KiB", "4MiB", tenants_toml));
  auto c = d.connect();
  auto r = c.map_region(block);
  ASSERT_TRUE(r);
  const client::block_key k = key_of(1, 1);
  const std::uint64_t off = 0;
  ASSERT_TRUE(c.batch_set(std::span(&k, 1), std::span(&off, 1)));
  ASSERT_TRUE(c.batch_exists(std::span(&k, 1)));
  ASSERT_TRUE(c.batch_exists(std::span(&k, 1)));
  const auto health = http_get(d.metrics_port(), "/healthz");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  const auto m = http_get(d.metrics_port(), "/metrics");
  EXPECT_NE(m.find("kvtier_request_duration_seconds_count{op=\"exists\"} 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kvtier_request_duration_seconds_count{op=\"set\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("kvtier_lookups_total{tier=\"dram\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("kvtier_tenant_lookups_total{tenant=\"a\",result=\"hit\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("kvtier_blocks{tier=\"dram\"} 1\n"), std::string::npos);
  EXPECT_NE(http_get(d.metrics_port(), "/nope").find("404"), std::string::npos);
  EXPECT_EQ(d.stop(), 0);
}

// Batches over 64 KiB copy on the copy threads, smaller ones on the io
// thread (or every one with copy_threads = 0); the copy link's bytes and its
// stated limit are in /metrics.
TEST(daemon_e2e, bulk_copies_run_on_the_copy_threads_and_links_report_their_limits) {
  for (const std::string threads : {"2", "0"}) {
    daemon_process d("copies" + threads);
    d.start(d.config("64KiB", "4MiB", std::string("copy_gbps = 12.5\n") + tenants_toml,
                     "copy_threads = " + threads + "\n"));
    auto c = d.connect();
    auto r = c.map_region(16 * block);
    ASSERT_TRUE(r);
    std::vector<client::block_key> keys;
    std::vector<std::uint64_t> in, out;
    for (std::uint64_t i = 0; i < 8; ++i) {
      keys.push_back(key_of(3, i));
      in.push_back(i * block);
      out.push_back((8 + i) * block);
      fill_block((*r)->data() + i * block, block, 3, i);
    }
    auto stored = c.batch_set(keys, in);
    ASSERT_TRUE(stored);
    EXPECT_EQ(*stored, std::vector<bool>(8, true));
    auto found = c.batch_get(keys, out);
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, std::vector<bool>(8, true));
    for (std::uint64_t i = 0; i < 8; ++i)
      EXPECT_EQ(checksum((*r)->data() + (8 + i) * block, block), expected_checksum(block, 3, i)) << i;
    ASSERT_TRUE(c.batch_get(std::span(keys.data(), 1), std::span(out.data(), 1))); // 64 KiB: inline
    const auto m = http_get(d.metrics_port(), "/metrics");
    const bool pool = threads != "0";
    const auto count = [](std::uint64_t n) { return " " + std::to_string(n) + "\n"; };
    EXPECT_NE(m.find("kvtier_copied_blocks_total{thread=\"copy\"}" + count(pool ? 16 : 0)), std::string::npos) << m;
    EXPECT_NE(m.find("kvtier_copied_blocks_total{thread=\"io\"}" + count(pool ? 1 : 17)), std::string::npos);
    EXPECT_NE(m.find("kvtier_link_bytes_total{link=\"copy\"}" + count(17 * block)), std::string::npos);
    EXPECT_NE(m.find("kvtier_link_limit_gbps{link=\"copy\"} 12.5\n"), std::string::npos);
    EXPECT_EQ(m.find("kvtier_link_limit_gbps{link=\"nvme_read\"}"), std::string::npos); // no limit stated
    EXPECT_NE(m.find("kvtier_io_loop_lag_seconds_count"), std::string::npos);
    EXPECT_EQ(d.stop(), 0);
  }
}

} // namespace
} // namespace kvtier::daemon::testing
