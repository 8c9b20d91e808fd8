// Fuzz target: kvtierd's frame parser (client/wire.hpp), what every byte a
// client sends goes through before the daemon acts on it.
// Invariants:
//  (1) decode_header and decode_request never read outside their input and
//      refuse, rather than trust, every count (no allocation beyond what the
//      payload holds: a batch is at most payload / 16 keys);
//  (2) a request they accept encodes back to exactly the bytes it came from
//      (the format has one spelling per request);
//  (3) decode_reply accepts any payload of at least its fixed fields and
//      never reads past it.
//  (4) decoding into a request kept from earlier inputs (as a session does)
//      accepts and refuses exactly what a fresh decode does, and what it
//      accepts equals the fresh request: nothing stale survives.

#include "tests/fuzz/fuzz_require.hpp"

#include "client/wire.hpp"

#include <cstring>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  using kvtier::fuzz::fuzz_require;
  const auto bytes = std::as_bytes(std::span(data, size));
  if (bytes.size() < wire::header_bytes)
    return 0;
  const auto head = std::span<const std::byte, wire::header_bytes>(bytes.data(), wire::header_bytes);
  auto h = wire::decode_header(head, 1u << 20);
  if (!h)
    return 0;
  const auto payload =
      bytes.subspan(wire::header_bytes, std::min<size_t>(h->length, bytes.size() - wire::header_bytes));
  auto q = wire::decode_request(*h, payload);
  static wire::request kept; // every earlier input's fields, as a session's request between frames
  const auto into = wire::decode_request(*h, payload, kept);
  fuzz_require(bool(into) == bool(q), "decoding into a kept request {} what a fresh decode {}",
               into ? "accepts" : "refuses", q ? "accepts" : "refuses");
  if (q)
    fuzz_require(kept == *q, "a kept request decodes {} with stale fields", wire::to_string(q->kind));
  if (q) {
    fuzz_require(payload.size() == h->length, "a truncated payload of {} bytes was accepted", payload.size());
    fuzz_require(q->keys.size() <= payload.size() / 16, "{} keys from {} bytes", q->keys.size(), payload.size());
    const auto again = wire::encode_request(*q);
    fuzz_require(again.size() == wire::header_bytes + payload.size() &&
                     std::memcmp(again.data(), bytes.data(), again.size()) == 0,
                 "{} re-encodes to other bytes", wire::to_string(q->kind));
  }
  if (h->op & wire::reply_bit) {
    auto r = wire::decode_reply(*h, payload);
    if (r)
      fuzz_require(r->body.size() + r->message.size() + 6 == payload.size(), "reply fields do not add up");
  }
  return 0;
}
