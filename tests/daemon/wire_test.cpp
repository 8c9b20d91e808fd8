// The frame codec alone: every op round-trips; every malformed payload is
// refused with its reason.

#include "client/wire.hpp"

#include <gtest/gtest.h>

namespace kvtier::wire {
namespace {

client::result<request> round_trip(const request& q) {
  const auto f = encode_request(q);
  auto h = decode_header(std::span<const std::byte, header_bytes>(f.data(), header_bytes), 1 << 20);
  EXPECT_TRUE(h);
  return decode_request(*h, std::span(f).subspan(header_bytes));
}

TEST(daemon_wire, every_op_round_trips) {
  request q;
  q.id = 7;
  q.kind = op::hello;
  q.tenant = "tenant";
  q.token = "secret";
  auto r = round_trip(q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, 7u);
  EXPECT_EQ(r->tenant, "tenant");
  EXPECT_EQ(r->token, "secret");
  q = {};
  q.kind = op::map_region;
  q.region_bytes = 1 << 20;
  q.shm_name = "/kvtier-1";
  r = round_trip(q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->region_bytes, 1u << 20);
  EXPECT_EQ(r->shm_name, "/kvtier-1");
  q = {};
  q.kind = op::set;
  q.keys = {{1, 2}, {3, 4}};
  q.offsets = {0, 4096};
  r = round_trip(q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->keys, q.keys);
  EXPECT_EQ(r->offsets, q.offsets);
  q.kind = op::exists;
  q.offsets.clear();
  r = round_trip(q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->keys, q.keys);
  EXPECT_TRUE(r->offsets.empty());
}

TEST(daemon_wire, replies_carry_status_message_and_body) {
  const std::byte body[] = {std::byte{1}, std::byte{2}};
  const auto f = encode_reply(op::get, 9, client::errc::ok, "", body);
  auto h = decode_header(std::span<const std::byte, header_bytes>(f.data(), header_bytes), 1 << 20);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->op, static_cast<std::uint16_t>(op::get) | reply_bit);
  EXPECT_EQ(h->request_id, 9u);
  auto r = decode_reply(*h, std::span(f).subspan(header_bytes));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::ok);
  EXPECT_EQ(r->body.size(), 2u);
  const auto e = encode_reply(op::set, 3, client::errc::quota_exceeded, "full", body);
  h = decode_header(std::span<const std::byte, header_bytes>(e.data(), header_bytes), 1 << 20);
  r = decode_reply(*h, std::span(e).subspan(header_bytes));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::quota_exceeded);
  EXPECT_EQ(r->message, "full");
  EXPECT_TRUE(r->body.empty()); // an error carries no fields
}

TEST(daemon_wire, malformed_payloads_are_refused_with_their_reason) {
  auto decode = [](std::uint16_t o, std::vector<std::byte> payload) {
    header h{version, o, 1, static_cast<std::uint32_t>(payload.size())};
    return decode_request(h, payload);
  };
  writer w;
  w.u32(max_batch + 1);
  auto r = decode(static_cast<std::uint16_t>(op::exists), w.out());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().message, "exists batch of 16385 keys, the limit is 16384");
  writer t;
  t.u8(5);
  t.u8('a');
  r = decode(static_cast<std::uint16_t>(op::hello), t.out());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().message, "malformed hello frame: tenant and token are u8-length strings");
  r = decode(static_cast<std::uint16_t>(op::stats), {std::byte{0}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().message, "malformed stats frame: bytes after the last field");
  r = decode(0, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, client::errc::protocol);
  header h{version, static_cast<std::uint16_t>(op::stats), 1, 10};
  r = decode_request(h, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().message, "truncated frame");
}

} // namespace
} // namespace kvtier::wire
