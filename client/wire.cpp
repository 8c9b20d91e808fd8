#include "client/wire.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace kvtier::wire {

static_assert(std::endian::native == std::endian::little, "the wire is little-endian; so is every host kvtier targets");

using client::errc;
using client::error;

const char* to_string(op o) {
  switch (o) {
    case op::hello:
      return "hello";
    case op::map_region:
      return "map_region";
    case op::exists:
      return "exists";
    case op::get:
      return "get";
    case op::set:
      return "set";
    case op::pin:
      return "pin";
    case op::release:
      return "release";
    case op::stats:
      return "stats";
  }
  return "unknown";
}

bool known_op(std::uint16_t o) {
  return o >= static_cast<std::uint16_t>(op::hello) && o <= static_cast<std::uint16_t>(op::stats);
}

void writer::put(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out_.insert(out_.end(), b, b + n);
}

void writer::name(std::string_view s) {
  u8(static_cast<std::uint8_t>(s.size()));
  put(s.data(), s.size());
}

bool reader::name(std::string& s) {
  std::uint8_t n = 0;
  if (!u8(n) || left() < n)
    return false;
  s.assign(reinterpret_cast<const char*>(in_.data() + at_), n);
  at_ += n;
  return true;
}

client::result<header> decode_header(std::span<const std::byte, header_bytes> bytes, std::uint32_t max_payload) {
  reader r(bytes);
  std::uint32_t m = 0;
  header h;
  r.u32(m);
  r.u16(h.version);
  r.u16(h.op);
  r.u64(h.request_id);
  r.u32(h.length);
  if (m != magic)
    return error{errc::protocol, "not a kvtierd frame (bad magic)"};
  if (h.version != version)
    return error{errc::protocol,
                 "protocol version " + std::to_string(h.version) + ", this side speaks " + std::to_string(version)};
  if (h.length > max_payload)
    return error{errc::protocol,
                 "frame of " + std::to_string(h.length) + " payload bytes, the limit is " +
                     std::to_string(max_payload)};
  return h;
}

void encode_header(const header& h, std::span<std::byte, header_bytes> out) {
  writer w;
  w.u32(magic);
  w.u16(h.version);
  w.u16(h.op);
  w.u64(h.request_id);
  w.u32(h.length);
  std::memcpy(out.data(), w.out().data(), header_bytes);
}

namespace {

error malformed(op o, const char* what) {
  return error{errc::bad_request, std::string("malformed ") + to_string(o) + " frame: " + what};
}

// u32 n, then n keys (and offsets): the count is checked against the bytes
// present before anything is reserved.
bool read_batch(reader& r, request& q, bool with_offsets, error& e) {
  std::uint32_t n = 0;
  if (!r.u32(n)) {
    e = malformed(q.kind, "no batch count");
    return false;
  }
  if (n > max_batch) {
    e = error{errc::bad_request,
              std::string(to_string(q.kind)) + " batch of " + std::to_string(n) + " keys, the limit is " +
                  std::to_string(max_batch)};
    return false;
  }
  const std::size_t each = with_offsets ? 24 : 16;
  if (r.left() != std::size_t{n} * each) {
    e = malformed(q.kind, "the batch count does not match the payload");
    return false;
  }
  q.keys.reserve(n); // no fill: every key is read next
  if (with_offsets)
    q.offsets.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    client::block_key k;
    r.key(k);
    q.keys.push_back(k);
    if (with_offsets) {
      std::uint64_t offset = 0;
      r.u64(offset);
      q.offsets.push_back(offset);
    }
    if (k == client::block_key{}) {
      e = error{errc::bad_request, "key " + std::to_string(i) + " is {0, 0}, which is reserved"};
      return false;
    }
  }
  return true;
}

} // namespace

client::result<request> decode_request(const header& h, std::span<const std::byte> payload) {
  request q;
  if (auto done = decode_request(h, payload, q); !done)
    return done.err();
  return q;
}

client::result<void> decode_request(const header& h, std::span<const std::byte> payload, request& q) {
  if (h.version != version)
    return error{errc::protocol, "protocol version " + std::to_string(h.version)};
  if (!known_op(h.op))
    return error{errc::protocol, "unknown operation " + std::to_string(h.op)};
  if (payload.size() != h.length)
    return error{errc::protocol, "truncated frame"};
  // Every field back to its default, keeping the vectors' capacity.
  q.tenant.clear();
  q.token.clear();
  q.shm_name.clear();
  q.region_bytes = 0;
  q.keys.clear();
  q.offsets.clear();
  q.kind = static_cast<op>(h.op);
  q.id = h.request_id;
  reader r(payload);
  error e;
  switch (q.kind) {
    case op::hello:
      if (!r.name(q.tenant) || !r.name(q.token))
        return malformed(q.kind, "tenant and token are u8-length strings");
      break;
    case op::map_region:
      if (!r.u64(q.region_bytes) || !r.name(q.shm_name))
        return malformed(q.kind, "u64 bytes and a u8-length name");
      break;
    case op::exists:
    case op::pin:
    case op::release:
      if (!read_batch(r, q, false, e))
        return e;
      break;
    case op::get:
    case op::set:
      if (!read_batch(r, q, true, e))
        return e;
      break;
    case op::stats:
      break;
  }
  if (!r.done())
    return malformed(q.kind, "bytes after the last field");
  return {};
}

std::vector<std::byte> encode_request(const request& q) {
  writer w;
  w.out().resize(header_bytes);
  switch (q.kind) {
    case op::hello:
      w.name(q.tenant);
      w.name(q.token);
      break;
    case op::map_region:
      w.u64(q.region_bytes);
      w.name(q.shm_name);
      break;
    case op::exists:
    case op::pin:
    case op::release:
      w.u32(static_cast<std::uint32_t>(q.keys.size()));
      for (const auto& k : q.keys)
        w.key(k);
      break;
    case op::get:
    case op::set:
      w.u32(static_cast<std::uint32_t>(q.keys.size()));
      for (std::size_t i = 0; i < q.keys.size(); ++i) {
        w.key(q.keys[i]);
        w.u64(q.offsets[i]);
      }
      break;
    case op::stats:
      break;
  }
  auto& out = w.out();
  header h{version, static_cast<std::uint16_t>(q.kind), q.id, static_cast<std::uint32_t>(out.size() - header_bytes)};
  encode_header(h, std::span<std::byte, header_bytes>(out.data(), header_bytes));
  return std::move(out);
}

std::vector<std::byte> encode_reply(op o, std::uint64_t id, errc status, std::string_view message,
                                    std::span<const std::byte> body) {
  std::vector<std::byte> out(reply_bytes(status, message, body));
  write_reply(out, o, id, status, message, body);
  return out;
}

std::size_t reply_bytes(errc status, std::string_view message, std::span<const std::byte> body) {
  return header_bytes + 4 + 2 + std::min<std::size_t>(message.size(), 65535) + (status == errc::ok ? body.size() : 0);
}

std::size_t write_reply(std::span<std::byte> out, op o, std::uint64_t id, errc status, std::string_view message,
                        std::span<const std::byte> body) {
  const auto msg = message.substr(0, 65535);
  if (status != errc::ok)
    body = {};
  const std::size_t bytes = reply_bytes(status, message, body);
  std::byte* p = out.data();
  auto put = [&p](const void* v, std::size_t n) {
    if (n > 0)
      std::memcpy(p, v, n);
    p += n;
  };
  const std::uint32_t m = magic, length = static_cast<std::uint32_t>(bytes - header_bytes),
                      code = static_cast<std::uint32_t>(status);
  const std::uint16_t v = version, kind = static_cast<std::uint16_t>(static_cast<std::uint16_t>(o) | reply_bit),
                      msg_bytes = static_cast<std::uint16_t>(msg.size());
  put(&m, 4);
  put(&v, 2);
  put(&kind, 2);
  put(&id, 8);
  put(&length, 4);
  put(&code, 4);
  put(&msg_bytes, 2);
  put(msg.data(), msg.size());
  put(body.data(), body.size());
  return bytes;
}

client::result<reply> decode_reply(const header& h, std::span<const std::byte> payload) {
  if (!(h.op & reply_bit))
    return error{errc::protocol, "expected a reply frame"};
  reader r(payload);
  std::uint32_t status = 0;
  std::uint16_t n = 0;
  if (!r.u32(status) || !r.u16(n) || r.left() < n)
    return error{errc::protocol, "malformed reply frame"};
  reply out;
  out.status = static_cast<errc>(status);
  out.message.assign(reinterpret_cast<const char*>(r.rest().data()), n);
  const auto rest = r.rest().subspan(n);
  out.body.assign(rest.begin(), rest.end());
  return out;
}

} // namespace kvtier::wire
