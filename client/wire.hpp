#pragma once
// The kvtierd wire protocol (docs/daemon.md): length-prefixed binary frames.
//
//   header, 20 bytes, little-endian:
//     u32 magic "KVTD" | u16 version | u16 op | u64 request id | u32 payload bytes
//   payload: the op's fields (below), at most the daemon's max_frame_bytes.
//
// A reply carries the request's id and op | reply_bit, and begins with
// u32 status (client::errc) and a u16-length message; the op's fields follow
// only when the status is ok. Both sides use this one codec: the daemon
// decodes requests and encodes replies, the client the reverse.
//
// Invariants: decoding never reads outside the span it is given; a frame
// whose fields do not fill its payload exactly is malformed; every decoded
// count is checked against the bytes present before anything is allocated.

#include "client/client.hpp"
#include "client/result.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace kvtier::wire {

inline constexpr std::uint32_t magic = 0x4454564b; // "KVTD" on the wire
inline constexpr std::uint16_t version = 1;
inline constexpr std::size_t header_bytes = 20;
inline constexpr std::uint16_t reply_bit = 0x8000;
/// The largest batch one frame may name; 24 bytes per key and offset keeps
/// a full batch near 400 KiB.
inline constexpr std::uint32_t max_batch = 16384;
inline constexpr std::size_t max_name_bytes = 255; // tenant, token, shm name

enum class op : std::uint16_t {
  hello = 1,      // u8 len tenant, u8 len token              -> u64 block_bytes, u32 max_batch
  map_region = 2, // u64 bytes, u8 len shm name (empty: memfd) -> (nothing)
  exists = 3,     // u32 n, n keys                            -> u32 leading hits
  get = 4,        // u32 n, n (key, u64 offset)               -> u32 n, n u8 found
  set = 5,        // u32 n, n (key, u64 offset)               -> u32 n, n u8 stored
  pin = 6,        // u32 n, n keys                            -> u32 pinned
  release = 7,    // u32 n, n keys                            -> u32 released
  stats = 8,      // (nothing)                                -> daemon_stats, u64 each, in declaration order
};
const char* to_string(op o);
bool known_op(std::uint16_t o);

struct header {
  std::uint16_t version = wire::version;
  std::uint16_t op = 0;
  std::uint64_t request_id = 0;
  std::uint32_t length = 0; // payload bytes
};

/// Reads a header; refuses a wrong magic or version, or a payload over max_payload.
client::result<header> decode_header(std::span<const std::byte, header_bytes> bytes, std::uint32_t max_payload);
void encode_header(const header& h, std::span<std::byte, header_bytes> out);

/// A decoded request: the fields its op uses are set.
struct request {
  op kind = op::hello;
  std::uint64_t id = 0;
  std::string tenant, token, shm_name;
  std::uint64_t region_bytes = 0;
  std::vector<client::block_key> keys;
  std::vector<std::uint64_t> offsets;
  bool operator==(const request&) const = default;
};

/// The frame parser: a request from its header and exactly its payload.
/// Errors are errc::protocol (unknown op, wrong version) or errc::bad_request
/// (fields that do not fill the payload, a reserved key, a batch too large).
client::result<request> decode_request(const header& h, std::span<const std::byte> payload);
/// The same parser into a request the caller keeps between frames, so a
/// server decodes without allocating once its vectors have grown: on success
/// `into` equals what decode_request returns; on an error it holds no fields
/// to trust.
client::result<void> decode_request(const header& h, std::span<const std::byte> payload, request& into);
/// The whole frame of a request (header and payload).
std::vector<std::byte> encode_request(const request& r);

/// A reply frame: status and message, then `body` when the status is ok.
std::vector<std::byte> encode_reply(op o, std::uint64_t id, client::errc status, std::string_view message,
                                    std::span<const std::byte> body = {});
/// The bytes of that frame, and the frame written at the start of `out`
/// (REQUIRES out.size() >= reply_bytes(...)), which returns them: replies
/// queued in one buffer for one write, with no allocation or fill.
std::size_t reply_bytes(client::errc status, std::string_view message, std::span<const std::byte> body = {});
std::size_t write_reply(std::span<std::byte> out, op o, std::uint64_t id, client::errc status, std::string_view message,
                        std::span<const std::byte> body = {});

/// A decoded reply: status, message and the op's fields, unparsed.
struct reply {
  client::errc status = client::errc::ok;
  std::string message;
  std::vector<std::byte> body;
};
client::result<reply> decode_reply(const header& h, std::span<const std::byte> payload);

/// Little-endian field writer and bounds-checked reader over a payload.
class writer {
public:
  void u8(std::uint8_t v) { put(&v, 1); }
  void u16(std::uint16_t v) { put(&v, 2); }
  void u32(std::uint32_t v) { put(&v, 4); }
  void u64(std::uint64_t v) { put(&v, 8); }
  void key(const client::block_key& k) {
    u64(k.lo);
    u64(k.hi);
  }
  void name(std::string_view s); // u8 length, bytes (REQUIRES s.size() <= max_name_bytes)
  void bytes(std::span<const std::byte> b) { put(b.data(), b.size()); }
  std::vector<std::byte>& out() { return out_; }

private:
  void put(const void* p, std::size_t n);
  std::vector<std::byte> out_;
};

class reader {
public:
  explicit reader(std::span<const std::byte> in) : in_(in) {}
  bool u8(std::uint8_t& v) { return take(&v, 1); }
  bool u16(std::uint16_t& v) { return take(&v, 2); }
  bool u32(std::uint32_t& v) { return take(&v, 4); }
  bool u64(std::uint64_t& v) { return take(&v, 8); }
  bool key(client::block_key& k) { return u64(k.lo) && u64(k.hi); }
  bool name(std::string& s);
  std::size_t left() const { return in_.size() - at_; }
  bool done() const { return at_ == in_.size(); }
  std::span<const std::byte> rest() const { return in_.subspan(at_); }

private:
  bool take(void* p, std::size_t n) { // inline: a batch's decode is a loop of these
    if (left() < n)
      return false;
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

} // namespace kvtier::wire
