#include "client/connection.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace kvtier::client {

namespace {

std::string os_message(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

void set_timeouts(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

result<int> open_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return error{errc::unreachable, "socket path too long: " + path};
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return error{errc::system, os_message("socket")};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    auto e = error{errc::unreachable, os_message("connect " + path)};
    ::close(fd);
    return e;
  }
  return fd;
}

result<int> open_tcp(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos)
    return error{errc::unreachable, "expected host:port, got " + host_port};
  const auto host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return error{errc::unreachable, host_port + ": " + ::gai_strerror(rc)};
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return error{errc::system, os_message("socket")};
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    auto e = error{errc::unreachable, os_message("connect " + host_port)};
    ::close(fd);
    return e;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, const std::byte* p, std::size_t n, int pass_fd) {
  if (pass_fd >= 0) { // the descriptor rides with the first byte(s)
    iovec iov{const_cast<std::byte*>(p), n};
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
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    ssize_t sent;
    do
      sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent <= 0)
      return false;
    p += sent;
    n -= static_cast<std::size_t>(sent);
  }
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0)
      return false;
    p += sent;
    n -= static_cast<std::size_t>(sent);
  }
  return true;
}

constexpr std::size_t reply_chunk = 64 * 1024;

bool recv_all(int fd, std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

} // namespace

result<std::unique_ptr<connection>> connection::open(const std::string& endpoint, int timeout_ms) {
  const bool tcp = endpoint.starts_with("tcp:") ||
      (!endpoint.starts_with("unix:") && endpoint.find('/') == std::string::npos &&
       endpoint.find(':') != std::string::npos);
  std::string target = endpoint;
  if (endpoint.starts_with("tcp:") || endpoint.starts_with("unix:"))
    target = endpoint.substr(endpoint.find(':') + 1);
  auto fd = tcp ? open_tcp(target) : open_unix(target);
  if (!fd)
    return fd.err();
  set_timeouts(*fd, timeout_ms);
  return std::unique_ptr<connection>(new connection(*fd, !tcp));
}

connection::~connection() {
  if (fd_ >= 0)
    ::close(fd_);
}

error connection::fail(errc code, std::string message) {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  return error{code, std::move(message)};
}

result<wire::reply> connection::call(wire::request q, int fd) {
  if (fd_ < 0)
    return error{errc::closed, "the connection to kvtierd is closed"};
  q.id = next_id_++;
  const auto frame = wire::encode_request(q);
  if (!send_all(fd_, frame.data(), frame.size(), fd))
    return fail(errc::closed, os_message(std::string("sending ") + wire::to_string(q.kind)));
  // One recv usually holds the whole reply (replies are small: flags and
  // counts); the rest, if any, is read to its length.
  if (in_.size() < reply_chunk)
    in_.resize(reply_chunk);
  std::size_t got = 0;
  while (got < wire::header_bytes) {
    const ssize_t n = ::recv(fd_, in_.data() + got, in_.size() - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(errc::closed, std::string("no reply to ") + wire::to_string(q.kind) + " (daemon gone or timed out)");
    got += static_cast<std::size_t>(n);
  }
  auto h =
      wire::decode_header(std::span<const std::byte, wire::header_bytes>(in_.data(), wire::header_bytes), 1u << 30);
  if (!h)
    return fail(h.err().code, h.err().message);
  const std::size_t total = wire::header_bytes + h->length;
  if (got > total)
    return fail(errc::protocol, "bytes after the reply: the daemon answered twice");
  if (in_.size() < total)
    in_.resize(total);
  if (!recv_all(fd_, in_.data() + got, total - got))
    return fail(errc::closed, "truncated reply");
  if (h->request_id != q.id || (h->op & ~wire::reply_bit) != static_cast<std::uint16_t>(q.kind))
    return fail(errc::protocol, "reply for another request");
  auto r = wire::decode_reply(*h, std::span<const std::byte>(in_.data() + wire::header_bytes, h->length));
  if (!r)
    return fail(r.err().code, r.err().message);
  if (r->status != errc::ok) {
    if (r->status == errc::protocol)
      return fail(r->status, r->message); // the daemon closes after a protocol error
    return error{r->status, r->message};
  }
  return r;
}

} // namespace kvtier::client
