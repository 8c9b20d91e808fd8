// kvtierd against bad input on the socket: each bad frame gets a clear error
// reply or a closed connection, and the daemon keeps serving everyone else.

#include "client/wire.hpp"
#include "daemon_fixture.hpp"

#include <sys/mman.h>

namespace kvtier::daemon::testing {
namespace {

// A raw connection that speaks frames by hand.
class raw_socket {
public:
  explicit raw_socket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~raw_socket() { ::close(fd_); }
  int fd() const { return fd_; }
  void send(const std::vector<std::byte>& bytes) const {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  /// Sends `bytes` with descriptor `fd` attached (SCM_RIGHTS).
  void send_with_fd(const std::vector<std::byte>& bytes, int fd) const {
    iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ASSERT_EQ(::sendmsg(fd_, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  /// The next reply, or nullopt when the daemon closed the connection.
  std::optional<wire::reply> receive() const {
    std::array<std::byte, wire::header_bytes> head;
    if (!read_exactly(head.data(), head.size()))
      return std::nullopt;
    auto h = wire::decode_header(head, 1 << 20);
    EXPECT_TRUE(h);
    std::vector<std::byte> payload(h->length);
    if (!read_exactly(payload.data(), payload.size()))
      return std::nullopt;
    auto r = wire::decode_reply(*h, payload);
    EXPECT_TRUE(r);
    return *r;
  }
  bool closed_by_peer() const {
    std::byte b;
    return ::recv(fd_, &b, 1, 0) == 0;
  }

private:
  bool read_exactly(std::byte* p, std::size_t n) const {
    while (n > 0) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0)
        return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
};

std::vector<std::byte> frame(std::uint16_t op, std::vector<std::byte> payload, std::uint32_t length_claimed = ~0u) {
  std::vector<std::byte> out(wire::header_bytes);
  wire::encode_header(
      {wire::version, op, 42, length_claimed == ~0u ? static_cast<std::uint32_t>(payload.size()) : length_claimed},
      std::span<std::byte, wire::header_bytes>(out.data(), wire::header_bytes));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<std::byte> hello(const std::string& tenant, const std::string& token) {
  wire::request q;
  q.kind = wire::op::hello;
  q.tenant = tenant;
  q.token = token;
  q.id = 1;
  return wire::encode_request(q);
}

// The daemon still answers a well-behaved client.
void still_serving(const daemon_process& d) {
  auto c = d.connect();
  auto r = c.map_region(64 * 1024);
  ASSERT_TRUE(r);
  const client::block_key k{11, 12};
  const std::uint64_t off = 0;
  auto s = c.batch_set(std::span(&k, 1), std::span(&off, 1));
  ASSERT_TRUE(s) << s.err().what();
  EXPECT_EQ(*c.batch_exists(std::span(&k, 1)), 1u);
}

class daemon_bad_input : public ::testing::Test {
protected:
  void SetUp() override { d.start(d.config("64KiB", "1MiB", tenants_toml)); }
  void TearDown() override { EXPECT_EQ(d.stop(), 0); }
  daemon_process d{"bad-input"};
};

TEST_F(daemon_bad_input, bad_magic_gets_a_protocol_error_and_a_closed_connection) {
  raw_socket s(d.socket());
  std::vector<std::byte> junk(wire::header_bytes, std::byte{0x41});
  s.send(junk);
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::protocol);
  EXPECT_EQ(r->message, "not a kvtierd frame (bad magic)");
  EXPECT_TRUE(s.closed_by_peer());
  still_serving(d);
}

TEST_F(daemon_bad_input, oversized_frame_is_refused_before_it_is_read) {
  raw_socket s(d.socket());
  s.send(frame(3, {}, 1u << 30));
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::protocol);
  EXPECT_EQ(r->message, "frame of 1073741824 payload bytes, the limit is 65536");
  EXPECT_TRUE(s.closed_by_peer());
  still_serving(d);
}

TEST_F(daemon_bad_input, wrong_version_is_refused) {
  raw_socket s(d.socket());
  auto f = hello("a", "ta");
  f[4] = std::byte{9}; // version 9
  s.send(f);
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::protocol);
  EXPECT_EQ(r->message, "protocol version 9, this side speaks 1");
  EXPECT_TRUE(s.closed_by_peer());
}

TEST_F(daemon_bad_input, unknown_op_and_out_of_order_requests_get_replies_and_the_session_goes_on) {
  raw_socket s(d.socket());
  s.send(frame(77, {}));
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::protocol);
  EXPECT_EQ(r->message, "unknown operation 77");
  s.send(frame(static_cast<std::uint16_t>(wire::op::stats), {})); // before hello
  r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::refused);
  EXPECT_EQ(r->message, "stats before hello: say who you are first");
  s.send(hello("a", "ta"));
  r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::ok);
  s.send(hello("a", "ta"));
  r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "hello twice on one connection");
  wire::request get;
  get.kind = wire::op::get;
  get.keys = {{1, 2}};
  get.offsets = {0};
  s.send(wire::encode_request(get)); // before map_region
  r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "get before map_region: no region to copy through");
}

TEST_F(daemon_bad_input, malformed_fields_get_bad_request) {
  raw_socket s(d.socket());
  s.send(hello("a", "ta"));
  ASSERT_EQ(s.receive()->status, client::errc::ok);
  // exists claiming 3 keys with the bytes of 1
  wire::writer w;
  w.u32(3);
  w.key({1, 2});
  s.send(frame(static_cast<std::uint16_t>(wire::op::exists), w.out()));
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "malformed exists frame: the batch count does not match the payload");
  // the reserved key
  wire::writer z;
  z.u32(1);
  z.key({0, 0});
  s.send(frame(static_cast<std::uint16_t>(wire::op::exists), z.out()));
  r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "key 0 is {0, 0}, which is reserved");
}

TEST_F(daemon_bad_input, wrong_token_is_refused_and_closed) {
  auto c = client::client::connect(d.socket(), "a", "wrong");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.err().code, client::errc::refused);
  EXPECT_EQ(c.err().message, "unknown tenant \"a\" or wrong token");
  auto u = client::client::connect(d.socket(), "nobody", "ta");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.err().code, client::errc::refused);
  still_serving(d);
}

TEST_F(daemon_bad_input, offsets_outside_the_region_are_refused) {
  auto c = d.connect();
  auto r = c.map_region(2 * 64 * 1024);
  ASSERT_TRUE(r);
  const client::block_key k{1, 2};
  const std::uint64_t off = 64 * 1024 + 1;
  auto s = c.batch_set(std::span(&k, 1), std::span(&off, 1));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.err().code, client::errc::bad_request);
  EXPECT_EQ(s.err().message, "offset 65537 (key 0): a block of 65536 bytes there leaves the region of 131072 bytes");
  const std::uint64_t huge = ~std::uint64_t{0};
  auto g = c.batch_get(std::span(&k, 1), std::span(&huge, 1));
  ASSERT_FALSE(g);
  EXPECT_EQ(g.err().code, client::errc::bad_request);
  still_serving(d);
}

TEST_F(daemon_bad_input, truncated_frame_and_a_client_dying_mid_frame_leave_the_daemon_serving) {
  {
    raw_socket s(d.socket());
    s.send(hello("a", "ta"));
    ASSERT_EQ(s.receive()->status, client::errc::ok);
    auto f = frame(static_cast<std::uint16_t>(wire::op::exists), std::vector<std::byte>(40), 1000);
    s.send(f); // 40 of 1000 bytes, then the client is gone
  }
  still_serving(d);
  // A client process killed while its requests are in flight.
  const pid_t pid = fork_client([&] {
    auto c = d.connect();
    auto r = c.map_region(64 * 1024);
    const client::block_key k{5, 6};
    const std::uint64_t off = 0;
    for (;;)
      (void)c.batch_set(std::span(&k, 1), std::span(&off, 1));
    return 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  still_serving(d);
}

TEST_F(daemon_bad_input, a_flooding_client_stalls_only_itself) {
  raw_socket flood(d.socket());
  flood.send(hello("a", "ta"));
  ASSERT_EQ(flood.receive()->status, client::errc::ok);
  // Thousands of requests, never reading a reply: the daemon reads one frame
  // at a time, so it stops reading this socket rather than buffering.
  wire::request q;
  q.kind = wire::op::stats;
  const auto one = wire::encode_request(q);
  std::vector<std::byte> many;
  for (int i = 0; i < 2000; ++i)
    many.insert(many.end(), one.begin(), one.end());
  (void)::send(flood.fd(), many.data(), many.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  still_serving(d);
}

TEST_F(daemon_bad_input, frames_sent_in_one_write_are_answered_in_order_until_a_bad_header_closes) {
  raw_socket s(d.socket());
  auto request = [](wire::op kind, std::uint64_t id) {
    wire::request q;
    q.kind = kind;
    q.id = id;
    if (kind == wire::op::exists)
      q.keys = {{5, 6}};
    return wire::encode_request(q);
  };
  std::vector<std::byte> all = hello("a", "ta");
  for (const auto& f :
       {request(wire::op::exists, 2), request(wire::op::stats, 3), frame(77, {}), request(wire::op::exists, 4),
        frame(static_cast<std::uint16_t>(wire::op::stats), {}, 1u << 30), request(wire::op::stats, 5)})
    all.insert(all.end(), f.begin(), f.end());
  s.send(all);
  // hello, exists, stats, the unknown op (id 42), exists: each its reply, in
  // order; then the oversized header is refused and nothing after it is read.
  const std::vector<std::pair<client::errc, std::size_t>> expected{{client::errc::ok, 12}, {client::errc::ok, 4},
                                                                   {client::errc::ok, 96}, {client::errc::protocol, 0},
                                                                   {client::errc::ok, 4},  {client::errc::protocol, 0}};
  for (const auto& [status, body] : expected) {
    auto r = s.receive();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->message;
    EXPECT_EQ(r->body.size(), body);
  }
  EXPECT_TRUE(s.closed_by_peer());
  still_serving(d);
}

TEST_F(daemon_bad_input, a_client_that_reads_its_replies_late_gets_every_one_in_order) {
  raw_socket s(d.socket());
  s.send(hello("a", "ta"));
  ASSERT_EQ(s.receive()->status, client::errc::ok);
  // 4,000 stats requests (80 KB) whose replies (488 KB) overflow the socket's
  // buffer: the daemon waits for room, then goes on where it stopped.
  constexpr std::uint64_t n = 4000;
  std::vector<std::byte> all;
  for (std::uint64_t id = 1; id <= n; ++id) {
    wire::request q;
    q.kind = wire::op::stats;
    q.id = id;
    const auto f = wire::encode_request(q);
    all.insert(all.end(), f.begin(), f.end());
  }
  std::thread sender([&] { s.send(all); });
  still_serving(d); // while this client's replies wait
  for (std::uint64_t id = 1; id <= n; ++id) {
    std::array<std::byte, wire::header_bytes> head;
    ASSERT_EQ(::recv(s.fd(), head.data(), head.size(), MSG_WAITALL), static_cast<ssize_t>(head.size()));
    auto h = wire::decode_header(head, 1 << 20);
    ASSERT_TRUE(h);
    ASSERT_EQ(h->request_id, id);
    std::vector<std::byte> payload(h->length);
    ASSERT_EQ(::recv(s.fd(), payload.data(), payload.size(), MSG_WAITALL), static_cast<ssize_t>(payload.size()));
    ASSERT_EQ(wire::decode_reply(*h, payload)->status, client::errc::ok);
  }
  sender.join();
}

TEST_F(daemon_bad_input, map_region_without_a_descriptor_is_refused) {
  raw_socket s(d.socket());
  s.send(hello("a", "ta"));
  ASSERT_EQ(s.receive()->status, client::errc::ok);
  wire::request q;
  q.kind = wire::op::map_region;
  q.region_bytes = 4096;
  s.send(wire::encode_request(q)); // no descriptor passed
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "map_region without a name passes its memfd over the Unix socket");
}

TEST_F(daemon_bad_input, a_memfd_not_sealed_against_shrinking_is_refused) {
  raw_socket s(d.socket());
  s.send(hello("a", "ta"));
  ASSERT_EQ(s.receive()->status, client::errc::ok);
  const int fd = ::memfd_create("unsealed", MFD_CLOEXEC); // could be truncated under the daemon's copies
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
  wire::request q;
  q.kind = wire::op::map_region;
  q.region_bytes = 1 << 20;
  s.send_with_fd(wire::encode_request(q), fd);
  ::close(fd);
  auto r = s.receive();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, client::errc::bad_request);
  EXPECT_EQ(r->message, "the region's memfd must be sealed with F_SEAL_SHRINK");
  still_serving(d);
}

} // namespace
} // namespace kvtier::daemon::testing
