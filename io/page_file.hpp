#pragma once
// The I/O engine under the NVMe store: moves one slot (header sector +
// payload) per request between a file and memory, and reports each request's
// raw result. It knows nothing of blocks, checksums or retries (slot_store.hpp
// does); two engines implement it, io_uring and a pread/pwrite thread pool,
// and a fault injector decorates either (faulty_page_file.hpp).
//
// Threading: submit() may be called from any thread, including from inside
// the completion callback; the callback runs on the engine's completion
// thread(s) and must not block for long.

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace kvtier::io {

enum class io_dir : uint8_t { write, read };

struct raw_io {
  io_dir dir = io_dir::write;
  uint64_t id = 0;              // echoed in the completion
  uint32_t lane = 0;            // in [0, queue_depth): at most one request per lane in flight
  uint64_t offset = 0;          // file offset of the header sector (4 KiB aligned)
  uint64_t payload_offset = 0;  // file offset of the payload: offset + 4096 when adjacent
  std::byte* header = nullptr;  // one 4 KiB sector in the registered header arena; nullptr: payload only
  std::byte* payload = nullptr; // inside the registered payload region
  uint64_t payload_bytes = 0;   // multiple of 4 KiB
};

/// Bytes moved (header + payload when whole), or -errno.
using raw_callback = std::function<void(uint64_t id, int64_t result)>;

/// Memory the engine may register with the kernel (both 4 KiB aligned).
struct io_buffers {
  std::byte* payload_base = nullptr;
  uint64_t payload_bytes = 0;
  uint64_t payload_chunk = 0; // registration unit (<= 1 GiB, a multiple of the slot stride)
  std::byte* header_base = nullptr;
  uint64_t header_bytes = 0;
};

class page_file {
public:
  virtual ~page_file() = default;
  /// "io_uring", "threads", ... and how it is set up, for logs.
  virtual std::string describe() const = 0;
  /// Set once, before the first submit.
  virtual void set_callback(raw_callback cb) = 0;
  /// Starts every request; at most queue_depth in flight (the caller's lanes
  /// guarantee it). One call is one batch (one io_uring_enter).
  virtual void submit(std::span<const raw_io> batch) = 0;
};

inline bool adjacent(const raw_io& r) {
  return r.header && r.payload_offset == r.offset + 4096;
}

/// Builds the iovec pair [header sector, payload] of an adjacent request.
inline void make_iovecs(const raw_io& r, iovec (&iov)[2]) {
  iov[0] = {r.header, 4096};
  iov[1] = {r.payload, r.payload_bytes};
}

} // namespace kvtier::io
