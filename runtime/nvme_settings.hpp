#pragma once
// The NVMe tier's engine settings: the [tiers.nvme] keys beyond capacity and
// path. Plain data read by runtime/config and handed to io/ (io::nvme_options
// extends it with what only a running store knows). Bounds live beside the
// config's other bounds (runtime/config_bounds.hpp).

#include <cstdint>

namespace kvtier {

/// Which engine drives the slot file: io_uring where the kernel allows it, else threads.
enum class nvme_engine : uint8_t { automatic, uring, threads };

/// What opening an existing kvtier slot file does with what it holds.
enum class nvme_open_policy : uint8_t { reuse, reformat };

struct nvme_settings {
  nvme_engine engine = nvme_engine::automatic;
  /// Requests in flight at once. 32 saturates one NVMe namespace for blocks
  /// of 64 KiB and more; smaller blocks want more (the device's own QD is 1024+).
  uint32_t queue_depth = 32;
  bool sqpoll = false;   // a kernel thread polls the SQ: no syscall per batch, one busy core
  bool direct_io = true; // O_DIRECT; falls back to buffered (with a message) where refused
  /// Blocks of at least this many bytes are "large": their file uses the split
  /// layout (payloads on a 2 MiB grid, headers apart; io/slot_format.hpp) and a
  /// write is two SQEs, header and payload. Smaller blocks keep header and
  /// payload adjacent and a write is one WRITEV SQE: for them a second request
  /// costs more than the alignment gains. Measured on the benchmark VM;
  /// docs/io.md has the numbers.
  uint64_t large_block_bytes = 256 << 10;
  /// io_uring fixed buffers over the DRAM pool: every read, and the writes of
  /// large blocks (an adjacent write's two iovecs cannot use them).
  bool register_buffers = true;
  /// A failed write is retried this often before it is reported (the block stays in DRAM).
  uint32_t write_retries = 2;
  /// A failed or unverifiable read is retried this often before it is reported as a miss.
  uint32_t read_retries = 1;
  /// A request with no completion after this long is failed (and retried);
  /// far above any healthy device's worst case (NVMe spec timeouts are 30 s).
  uint32_t io_timeout_ms = 30'000;
  /// What open does with a kvtier slot file that is already there ([tiers.nvme]
  /// on_open): `reuse` keeps every intact block (a file formatted for another
  /// geometry, or whose superblock cannot be rebuilt, is then an error that
  /// names the file); `reformat` discards the contents. A file that is not
  /// kvtier's is formatted either way (io/slot_file.hpp).
  nvme_open_policy on_open = nvme_open_policy::reuse;
};

} // namespace kvtier
